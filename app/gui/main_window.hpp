// The moeplan-gui main window: the Model & workload, Topology, Layouts, Load balance, Traffic
// and Profiling views over one Session; a busy indicator with Cancel for planning; settings.
#pragma once

#include <QMainWindow>
#include <QString>

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTabWidget;
class QTableWidget;

namespace moeplan::models {
struct MoeModel;
}

namespace moeplan::gui {

class ExportDialog;
class LayoutsView;
class LoadView;
class ProfilingView;
class ServingView;
class Session;
class TopologyView;
class TrafficView;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  /// With `useSettings`, restores and saves window state and last files (QSettings).
  explicit MainWindow(QWidget* parent = nullptr, bool useSettings = false);

  /// Loads a bundled model name or a config.json path; on failure the view shows the error.
  bool loadModel(const QString& nameOrPath);
  /// Loads a bundled cluster or a cluster JSON; on failure the topology view shows the error.
  bool loadCluster(const QString& nameOrPath);
  /// Loads an expert-load file or synthetic spec; on failure the model view shows the error.
  bool loadLoad(const QString& fileOrSpec);
  /// Sets the placement policy the plan costs with ("contiguous", "round_robin", "eplb",
  /// "best") and the redundant slots per EP rank; false for an unknown policy.
  bool setPlacement(const QString& policy, int redundantPerRank);
  /// The same with the redundant slots as --redundant takes them: "N" per EP rank, "total:R"
  /// (R in all; they decide which EP sizes are legal) or "auto"; false for bad input.
  bool setPlacement(const QString& policy, const QString& redundant);
  /// Plans with a cost database's measured costs (as `moeplan plan --costs FILE`); "" returns
  /// to the roofline. On failure the model view shows the error and the source is unchanged.
  bool loadCosts(const QString& path);
  /// The model view's (label, value) table and the error line, for tests.
  QTableWidget* modelTable() const { return modelTable_; }
  /// The weight format choice: "model's own" first, then models::weight_format_names().
  QComboBox* weightsCombo() const { return weights_; }
  QLabel* errorLabel() const { return errorLabel_; }
  QLabel* loadErrorLabel() const { return loadError_; }
  QTabWidget* tabs() const { return tabs_; }
  Session* session() const { return session_; }
  TopologyView* topologyView() const { return topology_; }
  LayoutsView* layoutsView() const { return layouts_; }
  LoadView* loadView() const { return loadView_; }
  TrafficView* trafficView() const { return traffic_; }
  QComboBox* costSourceCombo() const { return costSource_; }
  QComboBox* modelCombo() const { return modelCombo_; }
  QComboBox* phaseCombo() const { return phase_; }
  QSpinBox* tokensSpin() const { return tokens_; }
  /// The context (as moeplan plan --isl, --osl, --mem-fraction): input tokens 0 counts no KV
  /// cache.
  QSpinBox* islSpin() const { return isl_; }
  QSpinBox* oslSpin() const { return osl_; }
  QDoubleSpinBox* memFractionSpin() const { return memFraction_; }
  QDoubleSpinBox* targetSpin() const { return target_; }
  QLineEdit* loadEdit() const { return loadSpec_; }
  QComboBox* placementCombo() const { return policy_; }
  QSpinBox* redundantSpin() const { return redundant_; }
  QLabel* costErrorLabel() const { return costError_; }
  /// The Model view's line under the cost source: the DB, or what the roofline is without one.
  QLabel* costFileLabel() const { return costFile_; }
  ProfilingView* profilingView() const { return profiling_; }
  ServingView* servingView() const { return serving_; }
  /// The export dialog over the plan on screen and its selected layout (deleted on close; the
  /// format and folder persist with settings).
  ExportDialog* makeExportDialog();
  /// Waits for planning and placement to finish and their views to update.
  void waitForIdle();
  /// Renders every view to DIR/<view>.png. Returns the number of files written, -1 on error.
  int saveScreenshots(const QString& dir);

 protected:
  void closeEvent(QCloseEvent* event) override;
  void showEvent(QShowEvent* event) override;

 private slots:
  void onModelChosen(int index);
  void onOpenConfig();
  void onOpenLoad();
  void onOpenCosts();
  void onWorkloadEdited();
  void onShowBackends();
  void onExport();

 private:
  QWidget* buildModelView();
  void selectModelInCombo(const QString& nameOrPath);
  /// Keeps the window (frame included) inside the screen's available area.
  void fitToScreen();
  bool restoring_ = false;
  bool shownOnce_ = false;
  void showCostSource();
  /// Fills the model table with `model`'s figures (its weight format included).
  void showModelTable(const models::MoeModel& model);

  bool useSettings_ = false;
  QString modelText_;  ///< the model loaded, as the user named it
  Session* session_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  QComboBox* modelCombo_ = nullptr;
  QTableWidget* modelTable_ = nullptr;
  QLabel* errorLabel_ = nullptr;
  QComboBox* phase_ = nullptr;
  QComboBox* weights_ = nullptr;
  QSpinBox* tokens_ = nullptr;
  QSpinBox* isl_ = nullptr;
  QSpinBox* osl_ = nullptr;
  QDoubleSpinBox* memFraction_ = nullptr;
  QDoubleSpinBox* target_ = nullptr;  ///< the phase's latency target, ms (0: none)
  QLineEdit* loadSpec_ = nullptr;
  QLabel* loadError_ = nullptr;
  QLabel* loadSummary_ = nullptr;
  QComboBox* policy_ = nullptr;
  QSpinBox* redundant_ = nullptr;
  QComboBox* redundantKind_ = nullptr;  ///< per EP rank, in all, auto
  QComboBox* costSource_ = nullptr;
  QLabel* costFile_ = nullptr;
  QLabel* costError_ = nullptr;
  ProfilingView* profiling_ = nullptr;
  ServingView* serving_ = nullptr;
  TopologyView* topology_ = nullptr;
  LayoutsView* layouts_ = nullptr;
  LoadView* loadView_ = nullptr;
  TrafficView* traffic_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QPushButton* cancel_ = nullptr;
};

}  // namespace moeplan::gui
