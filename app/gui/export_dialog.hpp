// The export dialog: the plan on screen (its phase, tokens, expert load, placement policy and
// redundant slots, cost source) and its selected layout, a framework format and release, an
// output folder; previews the files and writes them, all through planner/export (the same code
// as `moeplan export`). The plan's placement policy becomes the placement file. Errors and
// warnings show in the dialog.
#pragma once

#include <optional>

#include <QDialog>
#include <QString>

#include "app/gui/session.hpp"
#include "planner/export.hpp"

class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;

namespace moeplan::gui {

/// What the dialog exports: a plan, the layout selected, and what the plan was made from.
struct ExportSource {
  Result<planner::PlanSummary> plan{Error{"no plan"}};
  /// The plan's model, cluster and placement policy; without a model the plan's recorded model
  /// and cluster files are loaded and no placement is made (as `moeplan export --plan`).
  PlanInputs inputs;
  int selectedIndex = -1;  ///< index into plan->layouts; -1: the recommended one
};

/// The plan the session shows and the layout selected in it (its error when there is none).
ExportSource exportSourceOf(const Session& session);

class ExportDialog : public QDialog {
  Q_OBJECT

 public:
  /// A dialog over the source plan's layouts (the selected one current); when the plan is an
  /// error the dialog shows it and offers nothing to write. Format and folder start as given.
  explicit ExportDialog(ExportSource source, QWidget* parent = nullptr,
                        const QString& format = QString(), const QString& folder = QString());

  QComboBox* formatCombo() const { return format_; }
  /// The format's framework releases, its current one first (selected).
  QComboBox* versionCombo() const { return version_; }
  QComboBox* layoutCombo() const { return layout_; }
  /// A placement file that replaces the plan's own placement (empty: the plan's).
  QLineEdit* placementEdit() const { return placement_; }
  /// Which inputs the dialog exports (model, cluster, phase, tokens, load, placement, cost).
  QLabel* inputsLabel() const { return inputs_; }
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

  Result<planner::ExportSpec> makeSpec() const;

  std::optional<planner::PlanSummary> plan_;
  PlanInputs planInputs_;
  std::optional<planner::ExportResult> result_;
  QLabel* inputs_ = nullptr;
  QComboBox* format_ = nullptr;
  QComboBox* version_ = nullptr;
  QComboBox* layout_ = nullptr;
  QLineEdit* placement_ = nullptr;
  QLineEdit* folder_ = nullptr;
  QPlainTextEdit* preview_ = nullptr;
  QLabel* message_ = nullptr;
  QPushButton* write_ = nullptr;
};

/// The text of the inputs label: what the plan was made from and what the export will carry.
QString describeExportInputs(const planner::PlanSummary& plan, const PlanInputs& inputs);

}  // namespace moeplan::gui
