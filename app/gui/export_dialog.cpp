// The export dialog.
#include "app/gui/export_dialog.hpp"
#include "app/gui/session.hpp"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFile>
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

#include <filesystem>

#include "planner/placement/placement_file.hpp"

namespace moeplan::gui {

namespace {

QString text(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

ExportSource exportSourceOf(const Session& session) {
  ExportSource source;
  const auto plan = session.plan();
  if (!plan) {
    source.plan = Error{session.planError().isEmpty()
                            ? std::string("No plan yet: choose a model and a cluster")
                            : "No plan to export: " + session.planError().toStdString()};
    return source;
  }
  source.plan = planner::summarize_plan(*plan);
  source.inputs = session.planInputs();
  source.selectedIndex = session.selectedLayout();
  return source;
}

QString describeExportInputs(const planner::PlanSummary& plan, const PlanInputs& inputs) {
  const bool decode = plan.workload.phase == planner::Phase::kDecode;
  QString placement = text(plan.placement_policy);
  if (inputs.model && inputs.placement) {
    placement = inputs.choices.redundancy.none()
                    ? QObject::tr(
                          "%1 without redundant slots, written as the placement file "
                          "of the chosen layout's EP size")
                          .arg(placement)
                    : QObject::tr(
                          "%1 with redundant slots %2, written as the placement file "
                          "of the chosen layout's EP size")
                          .arg(placement, text(inputs.choices.redundancy.describe()));
  } else if (plan.placement_policy == "contiguous") {
    placement = QObject::tr("contiguous (no placement file)");
  }
  return QObject::tr(
             "Exports the plan on screen: <b>%1</b> on <b>%2</b> (%3 GPUs), <b>%4</b>, "
             "<b>%5 %6 per GPU</b>, expert load <b>%7</b>, placement <b>%8</b>, cost "
             "source <b>%9</b>.")
      .arg(text(plan.model).toHtmlEscaped(), text(plan.cluster).toHtmlEscaped())
      .arg(plan.num_gpus)
      .arg(text(planner::phase_name(plan.workload.phase)))
      .arg(plan.workload.tokens_per_gpu)
      .arg(decode ? QObject::tr("sequences") : QObject::tr("tokens"))
      .arg(text(plan.load_source).toHtmlEscaped(), placement.toHtmlEscaped(),
           text(plan.cost_source).toHtmlEscaped());
}

ExportDialog::ExportDialog(ExportSource source, QWidget* parent, const QString& format,
                           const QString& folder)
    : QDialog(parent), planInputs_(std::move(source.inputs)) {
  setWindowTitle(tr("Export layout"));
  auto* layout = new QVBoxLayout(this);
  inputs_ = new QLabel(this);
  inputs_->setWordWrap(true);
  inputs_->setTextFormat(Qt::RichText);
  layout->addWidget(inputs_);
  auto* form = new QFormLayout();
  format_ = new QComboBox(this);
  for (const auto f : planner::kAllExportFormats) {
    format_->addItem(text(planner::export_format_name(f)));
  }
  auto addRow = [&](const QString& label, QWidget* buddy, QLayout* row) {
    auto* l = new QLabel(label, this);
    l->setBuddy(buddy);
    if (row != nullptr) {
      form->addRow(l, row);
    } else {
      form->addRow(l, buddy);
    }
  };
  addRow(tr("&Format:"), format_, nullptr);
  version_ = new QComboBox(this);
  addRow(tr("Framework &version:"), version_, nullptr);
  layout_ = new QComboBox(this);
  addRow(tr("&Layout:"), layout_, nullptr);
  auto* placementRow = new QHBoxLayout();
  placement_ = new QLineEdit(this);
  auto* browsePlacement = new QPushButton(tr("B&rowse…"), this);
  placementRow->addWidget(placement_, 1);
  placementRow->addWidget(browsePlacement);
  addRow(tr("&Placement file:"), placement_, placementRow);
  auto* folderRow = new QHBoxLayout();
  folder_ = new QLineEdit(folder, this);
  auto* browseFolder = new QPushButton(tr("Bro&wse…"), this);
  folderRow->addWidget(folder_, 1);
  folderRow->addWidget(browseFolder);
  addRow(tr("&Output folder:"), folder_, folderRow);
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

  const int formatIndex = format_->findText(format);
  if (formatIndex >= 0) format_->setCurrentIndex(formatIndex);
  auto& plan = source.plan;
  if (!plan) {
    inputs_->hide();
    for (QWidget* w : std::initializer_list<QWidget*>{format_, version_, layout_, placement_,
                                                      folder_, browseFolder, browsePlacement}) {
      w->setEnabled(false);
    }
    showError(errorText(plan.error()));
    write_->setEnabled(false);
    return;
  }
  plan_ = std::move(*plan);
  inputs_->setText(describeExportInputs(*plan_, planInputs_));
  placement_->setPlaceholderText(
      planInputs_.placement ? tr("none: the plan's %1 placement").arg(text(plan_->placement_policy))
                            : tr("none: contiguous experts"));
  placement_->setToolTip(
      tr("A placement file (moeplan place --out) to export instead of the plan's own placement"));
  for (std::size_t i = 0; i < plan_->layouts.size(); ++i) {
    const auto& l = plan_->layouts[i];
    layout_->addItem(text(l.describe()), l.rank);
  }
  const int selected = source.selectedIndex >= 0 && source.selectedIndex < layout_->count()
                           ? source.selectedIndex
                           : plan_->recommended;
  if (selected >= 0) layout_->setCurrentIndex(selected);
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

Result<planner::ExportSpec> ExportDialog::makeSpec() const {
  const std::string selector = layout_->currentData().toString().toStdString();
  const std::string file = placement_->text().trimmed().toStdString();
  if (!planInputs_.model || !planInputs_.cluster) {
    return planner::export_spec_from_plan(*plan_, selector, file);
  }
  auto chosen = planner::select_layout(*plan_, selector);
  if (!chosen) return chosen.error();
  const auto& model = *planInputs_.model;
  const auto& cluster = *planInputs_.cluster;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(cluster.info().source, ec)) {
    // The export records the cluster file and its fingerprint: an edit must be saved first.
    return Error{"cluster '" + cluster.name() + "' is " + cluster.info().source +
                 ": save it in the Topology view (Save…) first, so the export can name its file"};
  }
  if (!file.empty()) {
    auto placement = planner::load_placement_file(file);
    if (!placement) return placement.error();
    return planner::make_export_spec(*plan_, *chosen, model, cluster, &*placement, file);
  }
  // The plan's placement policy for the layout's EP size: the placement the plan costed.
  auto placement = policyPlacementFile(planInputs_, chosen->layout.ep_size);
  if (!placement) return placement.error();
  if (!*placement) return planner::make_export_spec(*plan_, *chosen, model, cluster, nullptr, "");
  const std::string name =
      plan_->placement_policy + " placement for ep" + std::to_string(chosen->layout.ep_size);
  return planner::make_export_spec(*plan_, *chosen, model, cluster, &**placement, name);
}

void ExportDialog::refresh() {
  result_.reset();
  preview_->clear();
  write_->setEnabled(false);
  if (!plan_) return;
  auto format = planner::parse_export_format(format_->currentText().toStdString());
  if (!format) return showError(errorText(format.error()));
  auto spec = makeSpec();
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
  // Launch scripts are run as they are: make them executable (as chmod +x would).
  for (const auto& f : result_->files) {
    if (!QString::fromStdString(f.name).endsWith(QStringLiteral(".sh"))) continue;
    QFile file(QDir(folder).filePath(QString::fromStdString(f.name)));
    file.setPermissions(file.permissions() | QFileDevice::ExeOwner | QFileDevice::ExeGroup |
                        QFileDevice::ExeOther);
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

}  // namespace moeplan::gui
