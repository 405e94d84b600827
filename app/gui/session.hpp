// The inputs every view shares (model, cluster, workload, expert load, placement policy), the
// plan made from them in a worker thread, and the layout the user selected. Views read from it
// and edit it; it tells them what changed.
#pragma once

#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QTimer>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "models/moe_model.hpp"
#include "planner/layout_figures.hpp"
#include "planner/placement/load_io.hpp"
#include "planner/placement/placement_file.hpp"
#include "planner/plan.hpp"
#include "planner/plan_request.hpp"
#include "planner/serving.hpp"
#include "planner/topology/cluster.hpp"

namespace moeplan::gui {

/// What a plan was made from beyond its own record: the model and cluster objects, the
/// placement choices and the load's layer ids (what an export of that plan needs to turn the
/// placement policy into a placement file).
struct PlanInputs {
  std::shared_ptr<const models::MoeModel> model;
  std::shared_ptr<const planner::Cluster> cluster;
  planner::PlanChoices choices;    ///< as planned (contiguous: no redundant slots)
  planner::PolicyFit fit;          ///< the placement fit of choices.placement
  planner::PlacementFn placement;  ///< the plan's (null: contiguous)
  std::vector<int> layerIds;       ///< hidden-layer index of each row of the load
  std::string loadSource;
  QString costDb;
};

/// The placement file the plan's placement policy gives `ep_size` EP ranks (the placement the
/// plan costed that EP size with); no value for contiguous placement.
Result<std::optional<planner::PlacementFile>> policyPlacementFile(const PlanInputs& inputs,
                                                                  int ep_size);

/// One finished planning run.
struct PlanOutcome {
  std::shared_ptr<const planner::Plan> plan;  ///< null on error
  /// Decode plans: the Pareto sweep over the batch per GPU (planner::decode_pareto) with the
  /// same request; empty in prefill.
  std::vector<planner::ParetoPoint> pareto;
  QString error;
  int generation = 0;
  PlanInputs inputs;
};

/// One finished serving plan (planner::plan_serving, as `moeplan plan --disagg`).
struct ServingOutcome {
  std::shared_ptr<const planner::ServingPlan> plan;  ///< null on error
  std::vector<std::string> misses;                   ///< queries the cost database could not answer
  QString error;
  int generation = 0;
};

class Session : public QObject {
  Q_OBJECT

 public:
  explicit Session(QObject* parent = nullptr);
  ~Session() override;

  const std::optional<models::MoeModel>& model() const { return model_; }
  const std::optional<planner::Cluster>& cluster() const { return cluster_; }
  /// The cluster JSON as last applied (edits change it; Save writes it).
  const nlohmann::json& clusterJson() const { return clusterJson_; }
  const std::optional<planner::LoadData>& load() const { return load_; }
  const planner::Workload& workload() const { return workload_; }
  /// The plan choices (phase, tokens, placement policy, redundant slots) as the library takes
  /// them: what moeplan plan's options set.
  const planner::PlanChoices& choices() const { return choices_; }
  /// The placement policy fit on the current model and cluster (planner::policy_fit).
  planner::PolicyFit policyFit() const;
  /// The PlacementFn the last plan used (null: contiguous); shared, so placements made for the
  /// plan are reused by the views.
  const planner::PlacementFn& placementFn() const { return placementFn_; }
  std::shared_ptr<const planner::Plan> plan() const { return plan_; }
  /// The decode Pareto sweep of the plan (empty in prefill or when no batch fits).
  const std::vector<planner::ParetoPoint>& pareto() const { return pareto_; }
  /// What plan() was made from (empty pointers when there is no plan).
  const PlanInputs& planInputs() const { return planInputs_; }
  /// Index into plan()->layouts of the selected layout (the recommended one after each plan).
  int selectedLayout() const { return selected_; }
  const planner::LayoutCost* selectedLayoutCost() const;
  QString planError() const { return planError_; }
  bool busy() const { return running_; }

  /// Each returns an empty string on success, else the error (the state is left unchanged).
  QString setModel(const QString& nameOrPath);
  /// A what-if weight format (models::weight_format_names(), as `moeplan plan --weights`); ""
  /// returns to the model's own (its quantization_config or torch_dtype). Kept across models.
  QString setWeights(const QString& name);
  /// The weight format chosen with setWeights; empty: the model's own.
  const QString& weights() const { return weights_; }
  QString setClusterName(const QString& nameOrPath);
  QString setClusterJson(const nlohmann::json& j, const QString& source);
  /// A file path (".json", ".csv", ".npy" or containing '/') or a synthetic spec.
  QString setLoad(const QString& fileOrSpec);
  /// The workload and the latency target of its phase, ms (prefill: TTFT, decode: TPOT; 0:
  /// none): layouts slower than the target do not meet it and are not recommended.
  void setWorkload(const planner::Workload& w, double target_ms = 0.0);
  void setPolicy(planner::PlacementPolicy policy, planner::Redundancy redundancy);
  /// Two-batch overlap of the plan's layouts: "off", "on" or "both" (as `plan --tbo`).
  void setTwoBatchOverlap(const std::string& mode);
  /// deepep_ll's buffer, tokens one rank dispatches per step (as `plan --ll-max-tokens`).
  void setLlMaxTokens(int tokens);
  /// Plans with the measured costs of a cost database (as `moeplan plan --costs FILE`) on the
  /// current cluster; "" returns to the roofline. The database is read now to check it.
  QString setCostDb(const QString& path);
  /// The cost database plans use; empty: the roofline.
  const QString& costDb() const { return costDb_; }
  /// Why the cost database does not describe the cluster (its measured device is not the
  /// cluster's); empty when it does, or without a database.
  const QString& costWarning() const { return costWarning_; }
  void selectLayout(int index);

  /// Starts planning now in a worker thread (a running plan is abandoned).
  void replan();
  /// Abandons the running plan: its result is dropped when it arrives.
  void cancel();
  /// Blocks until no plan is running and its result has been applied (screenshots, tests).
  void waitForIdle();

  /// Plans serving in a worker thread, as `moeplan plan --disagg`: aggregated instances against
  /// disaggregated prefill and decode pools for requests of the workload's context (isl + osl,
  /// both needed), with the current model, cluster, load, placement and cost source; latency
  /// targets in ms (0: none), a GPU budget (0: the cluster's), an offered rate in requests/s
  /// (0: the most the budget serves; `--rate`), the TTFT target's percentile (0: the mean;
  /// `--ttft-percentile`) and the decode batches per GPU to sweep (empty: the powers of 2
  /// from 1 to 1024; `--batches`). A running one is abandoned.
  void planServing(double ttft_ms, double tpot_ms, int gpu_budget, double rate = 0.0,
                   double ttft_percentile = 0.0, std::vector<int> batches = {});
  /// Abandons the running serving plan: its result is dropped when it arrives.
  void cancelServing();
  /// The last serving plan (null before one or after an error).
  std::shared_ptr<const planner::ServingPlan> serving() const { return serving_.plan; }
  /// The cost database's misses of the last serving plan (empty with the roofline).
  const std::vector<std::string>& servingMisses() const { return serving_.misses; }
  QString servingError() const { return serving_.error; }
  bool servingBusy() const { return servingRunning_; }
  /// Blocks until no serving plan is running and its result has been applied.
  void waitForServing();

 signals:
  void modelChanged();
  void clusterChanged();
  void costSourceChanged();
  void loadChanged();
  void planStarted();
  void planFinished();  ///< plan() or planError() changed
  void planCancelled();
  void layoutSelected(int index);
  void servingStarted();
  void servingFinished();  ///< serving() or servingError() changed
  void servingCancelled();

 private:
  void scheduleReplan();
  /// Why there is nothing to plan: the first of model, cluster and load that is missing.
  QString missingInput() const;
  /// The plan choices as planned: without redundant slots for contiguous and round_robin.
  planner::PlanChoices plannedChoices() const;
  void onPlanDone();
  void onServingDone();
  void finishServing(ServingOutcome outcome);
  void updateCostWarning();

  std::optional<models::MoeModel> model_;
  std::optional<models::MoeModel> loadedModel_;  ///< as read, before the weights choice
  QString weights_;
  std::optional<planner::Cluster> cluster_;
  nlohmann::json clusterJson_;
  std::optional<planner::LoadData> load_;
  QString loadSpec_ = QStringLiteral("uniform");
  QString costDb_;
  QString costWarning_;
  planner::Workload workload_;
  planner::PlanChoices choices_;
  planner::PlacementFn placementFn_;
  std::shared_ptr<const planner::Plan> plan_;
  std::vector<planner::ParetoPoint> pareto_;
  PlanInputs planInputs_;
  QString planError_;
  int selected_ = -1;
  int generation_ = 0;
  bool running_ = false;  ///< a plan run whose result has not been handled yet
  QTimer debounce_;
  QFutureWatcher<PlanOutcome> watcher_;
  ServingOutcome serving_;
  int servingGeneration_ = 0;
  bool servingRunning_ = false;
  QFutureWatcher<ServingOutcome> servingWatcher_;
};

/// A library error as the GUI shows it: the inputs it names are called by the GUI's own labels
/// ("Tokens per GPU", "Cost DB"), not by command-line flags.
/// `labels` overrides the shared ones where a view names an input its own way (the Serving view's
/// "TTFT target" for ttft_ms, where the Model view has one "Latency target").
QString errorText(const Error& error, const std::map<std::string, std::string>& labels = {});

/// Formats a value with its unit: "12.345 ms", "3.21 GiB", "450 GB/s".
QString formatMs(double seconds);
QString formatGiB(double bytes);
QString formatBytes(double bytes);

}  // namespace moeplan::gui
