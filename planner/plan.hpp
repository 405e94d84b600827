// Plan: every legal layout for a model, cluster and workload, costed and ranked, with the
// recommended one and the reasons it wins; and its JSON form (docs/PLAN_SCHEMA.md).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/costs/cost_model.hpp"

namespace moeplan::planner {

struct PlanRequest {
  Workload workload;
  int num_gpus = 0;           ///< GPUs to plan for (0: the whole cluster)
  bool attention_dp = false;  ///< also enumerate attention data-parallel replicas
  std::vector<Dispatcher> dispatchers = {Dispatcher::kPaddedA2a, Dispatcher::kAllGather,
                                         Dispatcher::kA2av};
  ExpertLoad load;        ///< empty (no layers): uniform over the model's MoE layers
  PlacementFn placement;  ///< null: contiguous
  /// > 0: only layouts with this EP size are costed (a placement file fits one EP size); the
  /// others are listed as excluded with `only_ep_rule`.
  int only_ep_size = 0;
  std::string only_ep_rule;
};

struct Plan {
  std::string model;
  std::string model_source;
  std::string cluster;
  std::string cluster_source;
  std::string device;
  std::string cost_source;
  std::string load_source;
  std::string placement_policy;
  Workload workload;
  int num_gpus = 0;
  int num_moe_layers = 0;
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

/// The plan as JSON (docs/PLAN_SCHEMA.md). `top` > 0 keeps the best `top` layouts;
/// `include_excluded` appends the illegal combinations with `legal: false` and their rule.
nlohmann::json plan_to_json(const Plan& plan, int top, bool include_excluded);

}  // namespace moeplan::planner
