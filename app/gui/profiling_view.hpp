// The Profiling view: runs `profile` or `validate` on this machine (kernels::run_in_process, N
// ranks as threads) in a worker thread, through the same profiler calls as the CLI
// (profiler::make_profile_request / run_profile, make_validate_request / run_validate_cases /
// add_predictions). A progress bar with points done / total and the ETA, Cancel (the stop
// callback: the run ends between points and the database keeps every completed point), a live
// table of the points as they are written, and after validate the predicted (cost DB) and
// roofline vs measured times as a chart and a table. A finished profile, or a database opened
// here, can become the plan's cost source.
#pragma once

#include <QAbstractTableModel>
#include <QElapsedTimer>
#include <QFutureWatcher>
#include <QString>
#include <QThreadPool>
#include <QWidget>
#include <atomic>
#include <memory>
#include <vector>

#include "planner/costs/cost_db.hpp"
#include "profiler/pace.hpp"
#include "profiler/profile.hpp"
#include "profiler/validate.hpp"
#include "profiler/validate_attention.hpp"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace moeplan::gui {

class GroupedBarChart;
class Session;

/// The measured points of a cost database, one row each (op, shape, dtype, group size, median,
/// p10, p90 in ms, repetitions, disposition); rows are appended as a profile writes them.
class PointTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    kOp,
    kShape,
    kDtype,
    kGroup,
    kMedian,
    kP10,
    kP90,
    kReps,
    kDisposition,
    kNumColumns
  };
  /// The raw value behind a cell (seconds for the times).
  static constexpr int kValueRole = Qt::UserRole;

  explicit PointTableModel(QObject* parent = nullptr);
  void setPoints(std::vector<planner::CostPoint> points);
  /// Adds a point, or replaces the row of the point with its identity (re-measured).
  void append(const planner::CostPoint& point);
  const std::vector<planner::CostPoint>& points() const { return points_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  std::vector<planner::CostPoint> points_;
};

/// What a finished run hands back to the view.
struct ProfilingOutcome {
  bool validate = false;
  /// validate of the attention core, block or decoder layer (rows in attentionRows).
  bool attention = false;
  profiler::AttentionScope scope = profiler::AttentionScope::kCore;
  std::vector<profiler::AttentionValidateRow> attentionRows;
  QString path;  ///< profile: the database written
  /// profile on the CPU: the note when the operand rotation is small for this CPU's last-level
  /// cache (profiler::cold_rotation_note; empty otherwise).
  QString coldNote;
  QString error;  ///< empty on success
  profiler::ProfileSummary profile;
  std::vector<profiler::ValidateRow> rows;
  std::vector<std::string> misses;
  /// validate: the machine's pace around the cases against the profile's (profiler/pace.hpp).
  profiler::PaceCheck pace;
  int cases = 0;  ///< validate: cases requested
  bool stopped = false;
};

class ProfilingView : public QWidget {
  Q_OBJECT

 public:
  explicit ProfilingView(Session* session, QWidget* parent = nullptr);
  ~ProfilingView() override;

  // The options, as the CLI's flags (tests and --screenshot set them).
  QComboBox* modelCombo() const { return model_; }
  QSpinBox* scaleSpin() const { return scale_; }
  /// --weights of profile and validate: item 0 the model's own format, then the formats the CPU
  /// kernels run.
  QComboBox* weightsCombo() const { return weights_; }
  QSpinBox* ranksSpin() const { return ranks_; }
  QDoubleSpinBox* maxSecondsSpin() const { return maxSeconds_; }
  QCheckBox* quickCheck() const { return quick_; }
  QCheckBox* resumeCheck() const { return resume_; }
  QSpinBox* maxTokensSpin() const { return maxTokens_; }
  QSpinBox* maxBytesSpin() const { return maxBytes_; }
  /// --cold-mib: the operand rotation of profile's points and pace probes, MiB (validate reads
  /// the profile's own).
  QSpinBox* coldMibSpin() const { return coldMib_; }
  QLineEdit* outputEdit() const { return output_; }
  QLineEdit* layoutsEdit() const { return layouts_; }
  QLineEdit* dispatchersEdit() const { return dispatchers_; }
  QSpinBox* ranksPerNodeSpin() const { return ranksPerNode_; }
  QLineEdit* tokensEdit() const { return tokens_; }
  /// What validate runs: item 0 the MoE layer, 1 the attention core, 2 the attention block, 3
  /// the decoder layer (validate --attention --scope core|block|layer).
  QComboBox* partCombo() const { return part_; }
  QLineEdit* contextsEdit() const { return contexts_; }
  QLineEdit* batchesEdit() const { return batches_; }
  QLineEdit* validateDbEdit() const { return validateDb_; }
  QPushButton* profileButton() const { return profileButton_; }
  QPushButton* validateButton() const { return validateButton_; }
  QPushButton* cancelButton() const { return cancel_; }
  QPushButton* useAsCostsButton() const { return useAsCosts_; }
  QProgressBar* progressBar() const { return progress_; }
  QLabel* statusLabel() const { return status_; }
  QLabel* errorLabel() const { return error_; }
  PointTableModel* pointModel() const { return points_; }
  QTableWidget* validateTable() const { return validateTable_; }
  /// validate's summary: the errors, the cases left out, the machine's pace against the profile's.
  QLabel* validateSummaryLabel() const { return validateSummary_; }
  GroupedBarChart* validateChart() const { return chart_; }
  const ProfilingOutcome& lastOutcome() const { return outcome_; }

  /// Starts a profile with the options shown (false with the error shown when they are bad).
  bool startProfile();
  /// Starts validate against the database in the validate field.
  bool startValidate();
  /// Asks the running profile or validate to stop after the point in progress.
  void cancel();
  bool busy() const { return running_; }
  /// Blocks until the run has finished and its result is shown (screenshots, tests).
  void waitForIdle();
  /// A small real run for pictures: profile the shown model (the full sweep up to `tokens`
  /// rows, 0.2 s per point) into `dbPath` on `ranks` ranks, then validate every layout and
  /// dispatcher at `tokens` (one global token count) against it, waiting for both. Returns the
  /// error shown, empty on success.
  QString runExample(const QString& dbPath, int ranks, int scale, const QString& tokens);
  /// Shows the points of an existing database (errors in the view); false on error.
  bool openDatabase(const QString& path);

 signals:
  /// A run finished (successfully, stopped, or with an error).
  void finished();

 private:
  /// The --weights value of the weights combo ("" for the model's own).
  std::string weightsChoice() const;
  void onDone();
  void setRunning(bool on, int total);
  void onProgress(int done, int total, const QString& what);
  void showError(const QString& text);
  void showValidate(const ProfilingOutcome& out);
  void showAttentionValidate(const ProfilingOutcome& out);
  /// The summary line (errors, misses as tooltip), the status and the verify error of a run.
  void showValidateSummary(const ProfilingOutcome& out, const profiler::ValidateSummary& sum,
                           std::size_t rows, const QString& prefix, const QString& verifyFailed);
  bool startAttentionValidate();
  void syncModel();

  Session* session_;
  QComboBox* model_ = nullptr;
  QSpinBox* scale_ = nullptr;
  QComboBox* weights_ = nullptr;
  QSpinBox* ranks_ = nullptr;
  QDoubleSpinBox* maxSeconds_ = nullptr;
  QCheckBox* quick_ = nullptr;
  QCheckBox* resume_ = nullptr;
  QSpinBox* maxTokens_ = nullptr;
  QSpinBox* maxBytes_ = nullptr;
  QSpinBox* coldMib_ = nullptr;
  QLineEdit* output_ = nullptr;
  QLineEdit* layouts_ = nullptr;
  QLineEdit* dispatchers_ = nullptr;
  QSpinBox* ranksPerNode_ = nullptr;
  QLineEdit* tokens_ = nullptr;
  QComboBox* part_ = nullptr;
  QLineEdit* contexts_ = nullptr;
  QLineEdit* batches_ = nullptr;
  QLineEdit* validateDb_ = nullptr;
  QPushButton* profileButton_ = nullptr;
  QPushButton* validateButton_ = nullptr;
  QPushButton* cancel_ = nullptr;
  QPushButton* useAsCosts_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* status_ = nullptr;
  QLabel* error_ = nullptr;
  QLabel* dbLabel_ = nullptr;
  PointTableModel* points_ = nullptr;
  QTableWidget* validateTable_ = nullptr;
  QLabel* validateSummary_ = nullptr;
  GroupedBarChart* chart_ = nullptr;

  QString shownDb_;  ///< the database whose points the table shows
  std::shared_ptr<std::atomic<bool>> stop_;
  QElapsedTimer clock_;
  bool running_ = false;
  ProfilingOutcome outcome_;
  /// Runs take a thread of their own for minutes: never one of the global pool's, which plans
  /// and placements share.
  QThreadPool pool_;
  QFutureWatcher<ProfilingOutcome> watcher_;
};

}  // namespace moeplan::gui
