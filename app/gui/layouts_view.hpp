// The Layouts view: the ranked plan as a sortable, filterable table, the breakdown and memory
// charts over the same model, and the recommendation with its reasons.
#pragma once

#include <QWidget>

class QCheckBox;
class QComboBox;
class QLabel;
class QSpinBox;
class QTableView;

namespace moeplan::gui {

class BreakdownChart;
class LayoutFilterModel;
class MemoryChart;
class ParetoChart;
class PlanTableModel;
class Session;

class LayoutsView : public QWidget {
  Q_OBJECT

 public:
  explicit LayoutsView(Session* session, QWidget* parent = nullptr);

  PlanTableModel* model() const { return model_; }
  LayoutFilterModel* filter() const { return filter_; }
  QTableView* table() const { return table_; }
  QCheckBox* feasibleOnly() const { return feasible_; }
  QComboBox* dispatcherFilter() const { return dispatcher_; }
  QComboBox* mappingFilter() const { return mapping_; }
  /// Two-batch overlap of the planned layouts: off, on, both (re-plans).
  QComboBox* overlapChoice() const { return overlap_; }
  /// deepep_ll's buffer, tokens per rank (re-plans).
  QSpinBox* llMaxTokensField() const { return llMaxTokens_; }
  QLabel* errorLabel() const { return error_; }
  QLabel* recommendation() const { return recommendation_; }
  /// The plan's inputs above the table (model, cluster, workload, cost source, what memory
  /// counts).
  QLabel* header() const { return header_; }
  /// Says that the selected layout is hidden by the filter (hidden otherwise).
  QLabel* hiddenNote() const { return hiddenNote_; }
  /// The header's warning that the cost DB does not describe the cluster (hidden otherwise).
  QLabel* costWarning() const { return costWarning_; }
  BreakdownChart* breakdownChart() const { return breakdown_; }
  MemoryChart* memoryChart() const { return memory_; }
  /// The decode Pareto sweep (shown in decode, hidden in prefill).
  ParetoChart* paretoChart() const { return pareto_; }
  /// Writes the plan as JSON (docs/PLAN_SCHEMA.md, every layout); errors show in the view.
  bool savePlanJson(const QString& path);

 signals:
  /// A file was saved; `message` says what and where.
  void saved(const QString& message);

 private slots:
  void onPlanFinished();
  void onFilterChanged();
  void onSave();

 private:
  void showSelectedRow();
  void showCostWarning();
  QLabel* costWarning_ = nullptr;
  bool filtering_ = false;
  QLabel* hiddenNote_ = nullptr;
  Session* session_;
  PlanTableModel* model_ = nullptr;
  LayoutFilterModel* filter_ = nullptr;
  QTableView* table_ = nullptr;
  QCheckBox* feasible_ = nullptr;
  QComboBox* dispatcher_ = nullptr;
  QComboBox* mapping_ = nullptr;
  QComboBox* overlap_ = nullptr;
  QSpinBox* llMaxTokens_ = nullptr;
  QLabel* header_ = nullptr;
  QLabel* error_ = nullptr;
  QLabel* recommendation_ = nullptr;
  BreakdownChart* breakdown_ = nullptr;
  MemoryChart* memory_ = nullptr;
  ParetoChart* pareto_ = nullptr;
};

}  // namespace moeplan::gui
