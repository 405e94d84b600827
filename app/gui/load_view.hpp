// The Load balance view (per-GPU loads of contiguous, eplb and best side by side — and, asked
// for, best-time: the placement searched on the cost model's predicted MoE time, with every
// placement's predicted time per step — the expert × GPU and layer × GPU heat maps,
// balancedness per layer) and the Traffic view (the GPU × GPU bytes of a layer's dispatch and
// combine as a heat map with node blocks). Figures come from planner::place_for_ep,
// search_placement_by_time, mean_moe_seconds, gpu_loads, balance_figures and layer_traffic,
// computed in a worker.
#pragma once

#include <QFutureWatcher>
#include <QString>
#include <QStringList>
#include <QWidget>
#include <atomic>
#include <memory>
#include <optional>
#include <vector>

#include "planner/placement/placement.hpp"
#include "planner/placement/placement_metrics.hpp"
#include "planner/rebalance.hpp"
#include "planner/time_search.hpp"

class QCheckBox;
class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTimer;

namespace moeplan::gui {

class GroupedBarChart;
class HeatMap;
class LineChart;
class Session;

/// The placements of the compared policies for one EP size and their figures.
struct BalanceOutcome {
  int generation = 0;
  int epSize = 0;
  int numNodes = 1;
  QString error;
  /// The policy of each placement: comparedPolicies(), then kBest for best-time (its start).
  std::vector<planner::PlacementPolicy> policies;
  QStringList names;                                       ///< each placement's policy name
  std::vector<planner::PlacementResult> placements;        ///< one per policy
  std::vector<planner::BalanceFigures> figures;            ///< one per policy
  std::vector<std::vector<std::vector<double>>> gpuLoads;  ///< [policy][layer][gpu]
  /// The time objective (LoadView::timeObjectiveCheck): what the search on predicted time did
  /// (its placement is the last one, named best-time) and every placement's predicted MoE time
  /// per step (seconds) on `timedSteps` steps none of the policies saw.
  std::optional<planner::TimeSearchReport> timeSearch;
  std::vector<double> predictedSeconds;  ///< one per placement; empty without the objective
  int timedSteps = 0;
  QString timeError;  ///< why the search or the timing could not run (the other figures stand)
  QString timeCosts;  ///< the cost source's name
  QString timedOn;    ///< the layout, phase and tokens per GPU the placements were timed on
  /// A load with steps: eplb fitted once against re-fitted every N steps on the last W
  /// (planner::simulate_rebalancing on the selected layout); empty otherwise.
  std::optional<planner::RebalanceResult> rebalance;
  QString rebalanceError;  ///< why the simulation could not run (the other figures stand)
  QString rebalanceCosts;  ///< the cost source's name
};

class LoadView : public QWidget {
  Q_OBJECT

 public:
  explicit LoadView(Session* session, QWidget* parent = nullptr);
  ~LoadView() override;

  /// The policies compared side by side.
  static const std::vector<planner::PlacementPolicy>& comparedPolicies();
  QSpinBox* layerSpin() const { return layer_; }
  QComboBox* policyCombo() const { return policy_; }
  /// Colours both heat maps on one scale over the compared policies.
  QCheckBox* sharedScaleCheck() const { return sharedScale_; }
  QLabel* errorLabel() const { return error_; }
  const BalanceOutcome& outcome() const { return outcome_; }
  GroupedBarChart* gpuLoadChart() const { return bars_; }
  HeatMap* expertHeatMap() const { return expertMap_; }
  HeatMap* layerHeatMap() const { return layerMap_; }
  /// Rebalancing over time (a load with steps): per-step time of the fixed placement and of
  /// the recommended re-fit, and the recommendation.
  LineChart* rebalanceChart() const { return timeline_; }
  QLabel* rebalanceLabel() const { return rebalanceText_; }
  /// Re-fit intervals N and windows W the simulation tries.
  static const std::vector<int>& rebalanceGrid();
  /// Adds best-time (best refined on the cost model's predicted MoE time of the selected
  /// layout, as `moeplan place --objective time`) and every placement's predicted time.
  QCheckBox* timeObjectiveCheck() const { return timeObjective_; }
  /// The predicted times per step and what the search did.
  QLabel* timeLabel() const { return timeText_; }
  /// Unseen steps the placements are timed on (drawn from the load's frequencies).
  static constexpr int kTimedSteps = 32;
  /// Recomputes now (a running computation is abandoned).
  void recompute();
  /// Abandons the running placement: its result is dropped, the figures shown stay; a running
  /// search on predicted time stops.
  void cancel();
  bool busy() const { return running_; }
  void waitForIdle();
  /// Writes the heat-map policy's placement (moeplan place's file format).
  bool savePlacement(const QString& path);

 private slots:
  void onDone();
  void redraw();
  void onSave();

 private:
  /// What the worker's search on predicted time reports and is told (shared with the worker).
  struct SearchState {
    std::atomic<bool> cancel{false};
    std::atomic<int> settled{0};
    std::atomic<int> layers{0};
  };
  void drawRebalance();
  void drawTime();
  void showProgress();
  Session* session_;
  QSpinBox* layer_ = nullptr;
  QComboBox* policy_ = nullptr;
  QCheckBox* sharedScale_ = nullptr;
  QCheckBox* timeObjective_ = nullptr;
  QLabel* timeText_ = nullptr;
  QTimer* poll_ = nullptr;
  std::shared_ptr<SearchState> search_;
  QLabel* header_ = nullptr;
  QLabel* error_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QPushButton* cancel_ = nullptr;
  bool running_ = false;
  GroupedBarChart* bars_ = nullptr;
  HeatMap* expertMap_ = nullptr;
  HeatMap* layerMap_ = nullptr;
  LineChart* balance_ = nullptr;
  LineChart* timeline_ = nullptr;
  QLabel* rebalanceText_ = nullptr;
  BalanceOutcome outcome_;
  int generation_ = 0;
  QFutureWatcher<BalanceOutcome> watcher_;
};

class TrafficView : public QWidget {
  Q_OBJECT

 public:
  explicit TrafficView(Session* session, QWidget* parent = nullptr);
  HeatMap* heatMap() const { return map_; }
  QLabel* errorLabel() const { return error_; }
  QSpinBox* layerSpin() const { return layer_; }
  void recompute();

 private:
  Session* session_;
  QSpinBox* layer_ = nullptr;
  QLabel* header_ = nullptr;
  QLabel* error_ = nullptr;
  QLabel* summary_ = nullptr;
  HeatMap* map_ = nullptr;
};

}  // namespace moeplan::gui
