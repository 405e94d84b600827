// Plan: every legal layout for a model, cluster and workload, costed and ranked, with the
// recommended one and the reasons it wins; its JSON form (docs/PLAN_SCHEMA.md), written and read
// back (PlanSummary: what an export needs), and the choice of one of its layouts.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/costs/cost_model.hpp"

namespace moeplan::planner {

struct PlanRequest {
  Workload workload;
  int num_gpus = 0;           ///< GPUs to plan for (0: the whole cluster)
  bool attention_dp = false;  ///< also enumerate attention data-parallel replicas
  std::vector<Dispatcher> dispatchers = {std::begin(models::kAllDispatchers),
                                         std::end(models::kAllDispatchers)};
  std::vector<bool> tbo = {false};  ///< two-batch overlap settings to enumerate
  ExpertLoad load;                  ///< empty (no layers): uniform over the model's MoE layers
  PlacementFn placement;            ///< null: contiguous
  /// Redundant expert slots per EP size: an EP size is legal when (E + R) % ep == 0; the
  /// placement fills them (eplb, best or a placement file).
  Redundancy redundancy;
  /// > 0: only layouts with this EP size are costed (a placement file fits one EP size); the
  /// others are listed as excluded with `only_ep_rule`.
  int only_ep_size = 0;
  std::string only_ep_rule;
  /// > 0: the latency target of the phase (prefill: TTFT, decode: TPOT), seconds; a layout whose
  /// step takes longer is infeasible for it (LayoutCost::meets_target false).
  double step_target_s = 0.0;
};

struct Plan {
  std::string model;
  std::string model_source;
  WeightFormat weights;  ///< the model's weight format the plan was costed at
  std::string cluster;
  std::string cluster_source;
  std::string device;
  std::string cost_source;
  std::string load_source;
  std::string placement_policy;
  Redundancy redundancy;  ///< the redundant slots the layouts were enumerated with
  Workload workload;
  double step_target_s = 0.0;  ///< PlanRequest::step_target_s
  int num_gpus = 0;
  int num_moe_layers = 0;
  int num_experts = 0;  ///< routed experts per MoE layer (before redundant slots)
  bool attention_dp = false;
  std::vector<LayoutCost> layouts;       ///< ranked: feasible first, then by step time
  std::vector<ExcludedLayout> excluded;  ///< illegal combinations with their rule
  int recommended = -1;                  ///< index into layouts; -1 when none fits in memory
  std::vector<std::string> reasons;      ///< why the recommended layout wins (or why none)
};

/// Enumerates, costs and ranks. Errors: a GPU count the cluster lacks, zero tokens, a model
/// with no legal layout on that many GPUs, or a cost source that cannot answer.
Result<Plan> make_plan(const models::MoeModel& model, const Cluster& cluster,
                       const CostSource& costs, const PlanRequest& request);

/// One decode batch size's best layout: what a deployment trades between its users' speed and its
/// GPUs' throughput.
struct ParetoPoint {
  int batch_per_gpu = 0;
  LayoutCost best;  ///< the plan's recommended layout at that batch
  double tokens_per_s_per_user = 0.0;
  double tokens_per_s_per_gpu = 0.0;
  /// No other point serves both more tokens/s per user and more tokens/s per GPU (at least as
  /// many of each, more of one).
  bool on_front = false;
};

/// Sets each point's on_front: no other point has at least its tokens/s/user and tokens/s/GPU
/// and more of one.
void mark_pareto_front(std::vector<ParetoPoint>& points);

/// The decode batch sizes a Pareto sweep tries by default: 1, 2, 4, …, 1024 per GPU.
std::vector<int> default_pareto_batches();

/// The decode batches per GPU a sweep (`--batches`) tries: `given` ascending and each once, or
/// default_pareto_batches() when it is empty; a value outside 1..1048576 is an error naming
/// {batches}.
Result<std::vector<int>> sweep_batches(std::vector<int> given);

/// For each batch per GPU in `batches` (ascending), the plan of `request` at that batch and its
/// recommended layout; batches where no layout fits (memory, KV cache, the latency target) are
/// left out. Needs a decode request; errors as make_plan's, or one naming the phase.
Result<std::vector<ParetoPoint>> decode_pareto(const models::MoeModel& model,
                                               const Cluster& cluster, const CostSource& costs,
                                               PlanRequest request,
                                               const std::vector<int>& batches);

/// The points as JSON (docs/PLAN_SCHEMA.md, `pareto`).
nlohmann::json pareto_to_json(const std::vector<ParetoPoint>& points);

/// Reasons as the JSON carries them: every input a reason names ("{gpus}") spelled as moeplan's
/// flag ("--gpus"), as the CLI prints it.
std::vector<std::string> rendered_reasons(const std::vector<std::string>& reasons);

/// The plan as JSON (docs/PLAN_SCHEMA.md). `top` > 0 keeps the best `top` layouts;
/// `include_excluded` appends the illegal combinations with `legal: false` and their rule.
nlohmann::json plan_to_json(const Plan& plan, int top, bool include_excluded);

/// The six parts of a LayerCost with their keys in the plan JSON and the layout file.
inline constexpr std::pair<const char*, CostItem LayerCost::*> kLayerCostParts[] = {
    {"router", &LayerCost::router},   {"dispatch", &LayerCost::dispatch},
    {"experts", &LayerCost::experts}, {"combine", &LayerCost::combine},
    {"tp", &LayerCost::tp},           {"shared", &LayerCost::shared}};

/// The layout keys of a plan-JSON layout or a layout file's `layout` object on `num_gpus` GPUs:
/// `dp_size` (default 1), `ep_size`, `tp_size` (dp·ep·tp = num_gpus), `dispatcher`, `mapping`,
/// `two_batch_overlap` (default false).
/// Errors name `source` and the key under `prefix`.
Result<Layout> parse_layout_keys(const nlohmann::json& object, const std::string& source,
                                 const std::string& prefix, int num_gpus);
/// The predicted costs of one layout: `layer_ms` (milliseconds per part) and, when present,
/// `sources` (the cost source of each part).
Result<LayerCost> parse_layer_ms(const nlohmann::json& object, const std::string& source,
                                 const std::string& prefix);

/// The figures a plan-JSON layout and a layout file's `predicted` object both carry.
struct PredictedFigures {
  bool feasible = true;               ///< `feasible` (default true)
  LayerCost per_layer;                ///< `layer_ms` and `sources`
  double step_seconds = 0.0;          ///< `step_ms`
  double tokens_per_s_per_gpu = 0.0;  ///< `tokens_per_s_per_gpu` (default 0)
};
/// Reads those keys under `prefix`; errors name `source` and the key.
Result<PredictedFigures> parse_predicted_figures(const nlohmann::json& object,
                                                 const std::string& source,
                                                 const std::string& prefix);

/// One legal layout of a plan with its predicted costs.
struct PlannedLayout {
  int rank = 0;  ///< 1-based rank in the plan
  Layout layout;
  bool feasible = true;
  LayerCost per_layer;  ///< mean per MoE layer, seconds, with each part's cost source
  double step_seconds = 0.0;
  double tokens_per_s_per_gpu = 0.0;
  double memory_gib = 0.0;    ///< per GPU, KV cache excluded
  double capacity_gib = 0.0;  ///< device HBM
  int num_slots = 0;          ///< expert slots per MoE layer (E + redundant); 0: not recorded (E)

  /// "rank 3: ep8×tp2 a2av tp_innermost, 1.234 ms per step".
  std::string describe() const;
};

/// The parts of a plan (docs/PLAN_SCHEMA.md) an export needs.
struct PlanSummary {
  std::string source;  ///< the plan file, or "" for a plan made in this process
  std::string model;
  std::string model_source;
  /// The weight format's name (WeightFormat::name(): "bf16", "fp8-block", …); plans written
  /// before formats were recorded read as "" (the model's own).
  std::string weights;
  std::string cluster;
  std::string cluster_source;
  std::string device;
  std::string cost_source;
  std::string load_source;
  std::string placement_policy;  ///< the placement the costs were computed with
  int num_gpus = 0;
  Workload workload;
  std::vector<PlannedLayout> layouts;  ///< legal layouts in rank order
  int recommended = -1;                ///< index into layouts; -1 when none fits
};

/// The summary of a plan made in this process.
PlanSummary summarize_plan(const Plan& plan);
/// Reads a plan JSON (`moeplan plan --json`); errors name `source`, the key and what was expected.
Result<PlanSummary> parse_plan_json(const nlohmann::json& j, const std::string& source);
Result<PlanSummary> load_plan_file(const std::filesystem::path& path);

/// Picks a layout: "" gives the recommended one (rank 1 when none fits), "N" rank N, "EPxTP" or
/// "DPxEPxTP" the best-ranked layout of that shape. Errors (input "layout") say what the plan
/// holds.
Result<PlannedLayout> select_layout(const PlanSummary& plan, const std::string& selector);

}  // namespace moeplan::planner
