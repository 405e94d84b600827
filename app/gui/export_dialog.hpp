// The export dialog: pick a plan layout, a framework format and release, an optional placement
// file and an output folder; preview the files and write them, all through planner/export (the
// same code as `moeplan export`). Errors and warnings show in the dialog.
#pragma once

#include <optional>

#include <QDialog>
#include <QString>

#include "planner/export.hpp"

class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;

namespace moeplan::gui {

class ExportDialog : public QDialog {
  Q_OBJECT

 public:
  /// A dialog over `plan`'s layouts (the recommended one selected); when `plan` is an error the
  /// dialog shows it and offers nothing to write.
  explicit ExportDialog(Result<planner::PlanSummary> plan, QWidget* parent = nullptr);

  /// The plan of a bundled model (or config.json) on the default cluster with the default
  /// workload, costed by the roofline: what `moeplan plan --model NAME` recommends from.
  static Result<planner::PlanSummary> defaultPlan(const QString& model);

  QComboBox* formatCombo() const { return format_; }
  /// The format's framework releases, its current one first (selected).
  QComboBox* versionCombo() const { return version_; }
  QComboBox* layoutCombo() const { return layout_; }
  QLineEdit* placementEdit() const { return placement_; }
  QLineEdit* folderEdit() const { return folder_; }
  QPlainTextEdit* preview() const { return preview_; }
  QLabel* messageLabel() const { return message_; }
  QPushButton* writeButton() const { return write_; }

  /// Writes the previewed files into the folder. On failure the dialog shows why.
  bool writeFiles();

 private slots:
  void refresh();
  void onFormatChanged();
  void onBrowseFolder();
  void onBrowsePlacement();

 private:
  void showError(const QString& text);

  std::optional<planner::PlanSummary> plan_;
  std::optional<planner::ExportResult> result_;
  QComboBox* format_ = nullptr;
  QComboBox* version_ = nullptr;
  QComboBox* layout_ = nullptr;
  QLineEdit* placement_ = nullptr;
  QLineEdit* folder_ = nullptr;
  QPlainTextEdit* preview_ = nullptr;
  QLabel* message_ = nullptr;
  QPushButton* write_ = nullptr;
};

/// Opens the export dialog for the default plan of `model` (the main window's File menu).
void showExportDialog(QWidget* parent, const QString& model);

}  // namespace moeplan::gui
