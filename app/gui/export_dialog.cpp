// The export dialog.
#include "app/gui/export_dialog.hpp"
#include "app/gui/session.hpp"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFontDatabase>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalBlocker>
#include <QVBoxLayout>

#include "models/registry.hpp"
#include "planner/costs/roofline_costs.hpp"

namespace moeplan::gui {

namespace {

QString text(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

Result<planner::PlanSummary> ExportDialog::defaultPlan(const QString& model) {
  auto m = models::load_model(model.toStdString());
  if (!m) return m.error();
  auto cluster = planner::load_cluster(planner::kDefaultCluster);
  if (!cluster) return cluster.error();
  const planner::RooflineCosts costs(*cluster);
  auto plan = planner::make_plan(*m, *cluster, costs, planner::PlanRequest{});
  if (!plan) return plan.error();
  return planner::summarize_plan(*plan);
}

ExportDialog::ExportDialog(Result<planner::PlanSummary> plan, QWidget* parent) : QDialog(parent) {
  setWindowTitle(tr("Export layout"));
  auto* layout = new QVBoxLayout(this);
  auto* form = new QFormLayout();
  format_ = new QComboBox(this);
  for (const auto f : planner::kAllExportFormats) {
    format_->addItem(text(planner::export_format_name(f)));
  }
  form->addRow(tr("Format:"), format_);
  version_ = new QComboBox(this);
  form->addRow(tr("Framework version:"), version_);
  layout_ = new QComboBox(this);
  form->addRow(tr("Layout:"), layout_);
  auto* placementRow = new QHBoxLayout();
  placement_ = new QLineEdit(this);
  placement_->setPlaceholderText(tr("none (contiguous experts)"));
  auto* browsePlacement = new QPushButton(tr("Browse…"), this);
  placementRow->addWidget(placement_, 1);
  placementRow->addWidget(browsePlacement);
  form->addRow(tr("Placement file:"), placementRow);
  auto* folderRow = new QHBoxLayout();
  folder_ = new QLineEdit(this);
  auto* browseFolder = new QPushButton(tr("Browse…"), this);
  folderRow->addWidget(folder_, 1);
  folderRow->addWidget(browseFolder);
  form->addRow(tr("Output folder:"), folderRow);
  layout->addLayout(form);

  message_ = new QLabel(this);
  message_->setWordWrap(true);
  message_->hide();
  layout->addWidget(message_);
  preview_ = new QPlainTextEdit(this);
  preview_->setReadOnly(true);
  preview_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  layout->addWidget(preview_, 1);

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
  write_ = buttons->addButton(tr("Write files"), QDialogButtonBox::ApplyRole);
  layout->addWidget(buttons);
  resize(860, 600);

  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(write_, &QPushButton::clicked, this, [this] { writeFiles(); });
  connect(browseFolder, &QPushButton::clicked, this, &ExportDialog::onBrowseFolder);
  connect(browsePlacement, &QPushButton::clicked, this, &ExportDialog::onBrowsePlacement);

  if (!plan) {
    for (QWidget* w : std::initializer_list<QWidget*>{format_, version_, layout_, placement_,
                                                      folder_, browseFolder, browsePlacement}) {
      w->setEnabled(false);
    }
    showError(errorText(plan.error()));
    write_->setEnabled(false);
    return;
  }
  plan_ = std::move(*plan);
  for (std::size_t i = 0; i < plan_->layouts.size(); ++i) {
    const auto& l = plan_->layouts[i];
    layout_->addItem(text(l.describe()), l.rank);
  }
  if (plan_->recommended >= 0) layout_->setCurrentIndex(plan_->recommended);
  connect(format_, &QComboBox::currentIndexChanged, this, &ExportDialog::onFormatChanged);
  connect(version_, &QComboBox::currentIndexChanged, this, &ExportDialog::refresh);
  connect(layout_, &QComboBox::currentIndexChanged, this, &ExportDialog::refresh);
  connect(placement_, &QLineEdit::editingFinished, this, &ExportDialog::refresh);
  connect(folder_, &QLineEdit::textChanged, this, &ExportDialog::refresh);
  onFormatChanged();
}

void ExportDialog::showError(const QString& message) {
  message_->setStyleSheet(QStringLiteral("color: #b00020;"));
  message_->setText(message);
  message_->show();
}

void ExportDialog::onFormatChanged() {
  auto format = planner::parse_export_format(format_->currentText().toStdString());
  {
    const QSignalBlocker block(version_);
    version_->clear();
    if (format) {
      for (const auto& v : planner::framework_versions(*format)) version_->addItem(text(v));
    }
  }
  refresh();
}

void ExportDialog::refresh() {
  result_.reset();
  preview_->clear();
  write_->setEnabled(false);
  if (!plan_) return;
  auto format = planner::parse_export_format(format_->currentText().toStdString());
  if (!format) return showError(errorText(format.error()));
  auto spec =
      planner::export_spec_from_plan(*plan_, layout_->currentData().toString().toStdString(),
                                     placement_->text().trimmed().toStdString());
  if (!spec) return showError(errorText(spec.error()));
  auto result = planner::export_layout(
      *spec, *format,
      {version_->currentText().toStdString(), folder_->text().trimmed().toStdString()});
  if (!result) return showError(errorText(result.error()));
  result_ = std::move(*result);
  preview_->setPlainText(text(planner::export_to_text(*result_)));
  if (result_->warnings.empty()) {
    message_->hide();
  } else {
    QString warnings;
    for (const auto& w : result_->warnings) warnings += tr("Warning: %1\n").arg(text(w));
    message_->setStyleSheet(QStringLiteral("color: #8a5a00;"));
    message_->setText(warnings.trimmed());
    message_->show();
  }
  write_->setEnabled(!folder_->text().trimmed().isEmpty());
}

bool ExportDialog::writeFiles() {
  if (!result_) {
    if (message_->isHidden()) showError(tr("Nothing to write: choose a format and a layout"));
    return false;
  }
  const QString folder = folder_->text().trimmed();
  if (folder.isEmpty()) {
    showError(tr("Choose an output folder"));
    return false;
  }
  if (auto s = planner::write_export(*result_, folder.toStdString()); !s.ok()) {
    showError(errorText(s.error()));
    return false;
  }
  message_->setStyleSheet(QString());
  message_->setText(
      tr("Wrote %n file(s) to %1", nullptr, static_cast<int>(result_->files.size())).arg(folder));
  message_->show();
  return true;
}

void ExportDialog::onBrowseFolder() {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Output folder"), folder_->text());
  if (!dir.isEmpty()) folder_->setText(dir);
}

void ExportDialog::onBrowsePlacement() {
  const QString file = QFileDialog::getOpenFileName(
      this, tr("Placement file (moeplan place --out)"), QString(), tr("JSON (*.json)"));
  if (!file.isEmpty()) {
    placement_->setText(file);
    refresh();
  }
}

void showExportDialog(QWidget* parent, const QString& model) {
  ExportDialog dialog(ExportDialog::defaultPlan(model), parent);
  dialog.exec();
}

}  // namespace moeplan::gui
