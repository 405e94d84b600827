// The moeplan-gui main window.
#include "app/gui/main_window.hpp"

#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableWidget>
#include <QVBoxLayout>

#include "app/gui/export_dialog.hpp"
#include "kernels/backends.hpp"
#include "models/model_summary.hpp"
#include "models/registry.hpp"

namespace moeplan::gui {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle(QStringLiteral("moeplan %1").arg(QStringLiteral(MOEPLAN_VERSION)));
  tabs_ = new QTabWidget(this);
  tabs_->addTab(buildModelView(), tr("Model"));
  setCentralWidget(tabs_);

  auto* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("&Open config.json…"), this, &MainWindow::onOpenConfig);
  file->addAction(tr("&Export layout…"), this,
                  [this] { showExportDialog(this, modelCombo_->currentText()); });
  file->addSeparator();
  file->addAction(tr("&Quit"), this, &QWidget::close);
  auto* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&Backends…"), this, &MainWindow::onShowBackends);

  resize(900, 620);
  loadModel(QString::fromLatin1(models::kDefaultModel));
}

QWidget* MainWindow::buildModelView() {
  auto* page = new QWidget(this);
  auto* layout = new QVBoxLayout(page);
  auto* row = new QHBoxLayout();
  row->addWidget(new QLabel(tr("Model:"), page));
  modelCombo_ = new QComboBox(page);
  for (const auto& name : models::bundled_model_names()) {
    modelCombo_->addItem(QString::fromStdString(name));
  }
  row->addWidget(modelCombo_, 1);
  auto* open = new QPushButton(tr("Open config.json…"), page);
  row->addWidget(open);
  layout->addLayout(row);

  errorLabel_ = new QLabel(page);
  errorLabel_->setStyleSheet(QStringLiteral("color: #b00020;"));
  errorLabel_->setWordWrap(true);
  errorLabel_->hide();
  layout->addWidget(errorLabel_);

  modelTable_ = new QTableWidget(0, 2, page);
  modelTable_->setHorizontalHeaderLabels({tr("Figure"), tr("Value")});
  modelTable_->horizontalHeader()->setStretchLastSection(true);
  modelTable_->verticalHeader()->hide();
  modelTable_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  layout->addWidget(modelTable_, 1);

  connect(modelCombo_, &QComboBox::activated, this, &MainWindow::onModelChosen);
  connect(open, &QPushButton::clicked, this, &MainWindow::onOpenConfig);
  return page;
}

bool MainWindow::loadModel(const QString& nameOrPath) {
  auto model = models::load_model(nameOrPath.toStdString());
  if (!model) {
    errorLabel_->setText(QString::fromStdString(model.error().message));
    errorLabel_->show();
    modelTable_->setRowCount(0);
    statusBar()->showMessage(tr("Could not load %1").arg(nameOrPath));
    return false;
  }
  errorLabel_->hide();
  const auto rows = models::model_summary(*model);
  modelTable_->setRowCount(static_cast<int>(rows.size()));
  for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
    const auto& [label, value] = rows[static_cast<std::size_t>(i)];
    modelTable_->setItem(i, 0, new QTableWidgetItem(QString::fromStdString(label)));
    modelTable_->setItem(i, 1, new QTableWidgetItem(QString::fromStdString(value)));
  }
  modelTable_->resizeColumnToContents(0);
  const int index = modelCombo_->findText(nameOrPath);
  if (index >= 0) modelCombo_->setCurrentIndex(index);
  statusBar()->showMessage(tr("Loaded %1").arg(QString::fromStdString(model->source_path)));
  return true;
}

void MainWindow::onModelChosen(int index) { loadModel(modelCombo_->itemText(index)); }

void MainWindow::onOpenConfig() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open a Hugging Face config.json"),
                                                    QString(), tr("JSON (*.json)"));
  if (!path.isEmpty()) loadModel(path);
}

void MainWindow::onShowBackends() {
  QString text;
  for (const auto& b : kernels::backend_inventory()) {
    text +=
        QStringLiteral("%1: %2, %3 — %4\n")
            .arg(QString::fromStdString(b.name), b.compiled ? tr("compiled") : tr("not compiled"),
                 b.usable ? tr("usable") : tr("not usable"), QString::fromStdString(b.detail));
  }
  QMessageBox::information(this, tr("Backends"), text);
}

int MainWindow::saveScreenshots(const QString& dir) {
  if (!QDir().mkpath(dir)) return -1;
  int written = 0;
  for (int i = 0; i < tabs_->count(); ++i) {
    tabs_->setCurrentIndex(i);
    const QString file =
        QDir(dir).filePath(tabs_->tabText(i).toLower().replace(QLatin1Char(' '), QLatin1Char('_')) +
                           QStringLiteral(".png"));
    if (!grab().save(file)) return -1;
    ++written;
  }
  return written;
}

}  // namespace moeplan::gui
