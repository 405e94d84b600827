// Serving plans (issue 20): disaggregated prefill and decode pools against aggregated serving
// for a GPU budget, input/output lengths and latency targets. Each pool's instances are planned
// by make_plan (every legal layout, costed on the cluster); the KV cache a prompt leaves is sent
// from its prefill instance to a decode instance over the cluster's links; the split (x prefill
// and y decode instances) is the one with the most output tokens/s within the budget.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/plan.hpp"

namespace moeplan::planner {

/// What a serving plan is asked: the plan request both pools start from (dispatchers,
/// placement, load, memory fraction; its workload's isl and osl must be set), the budget and the
/// targets.
struct ServingRequest {
  PlanRequest base;
  int gpu_budget = 0;                ///< GPUs for the whole deployment (0: the cluster's)
  double ttft_target_s = 0.0;        ///< > 0: time to first token, KV transfer included
  double tpot_target_s = 0.0;        ///< > 0: time per output token
  std::vector<int> instance_gpus;    ///< instance sizes tried (empty: 1, 2, 4, … ≤ the budget)
  std::vector<int> decode_batches;   ///< sequences per GPU (empty: default_pareto_batches)
  std::vector<int> prefill_prompts;  ///< prompts per prefill step (empty: 1, 2, 4, …, 64)
};

/// One pool's instance: its GPU count, the recommended layout of its plan and what it serves.
struct PoolInstance {
  int gpus = 0;
  LayoutCost layout;
  /// Prefill: prompts of isl tokens per step; decode: sequences per GPU.
  int batch = 0;
  double step_s = 0.0;          ///< prefill: one step of its prompts; decode: the TPOT
  double requests_per_s = 0.0;  ///< requests one instance completes per second
};

struct DisaggServing {
  PoolInstance prefill;
  PoolInstance decode;
  int prefill_instances = 0;
  int decode_instances = 0;
  /// One prefill step's KV cache (batch prompts × isl tokens × every layer) from a prefill
  /// instance to a decode instance, routed on the cluster: the busiest link's time plus the
  /// path latency. Added to the TTFT (no layer-by-layer overlap is assumed).
  double kv_transfer_s = 0.0;
  double kv_bytes_per_request = 0.0;
  double ttft_s = 0.0;
  double tpot_s = 0.0;
  double requests_per_s = 0.0;  ///< the deployment's: the slower pool's
  int gpus_used = 0;
  double tokens_per_s_per_gpu = 0.0;   ///< output tokens per second per budget GPU
  double tokens_per_s_per_user = 0.0;  ///< 1 / TPOT
};

/// Aggregated serving: instances that run both phases on one layout, prefill interleaved with
/// the decode steps (chunked prefill), in steady state: a share f of the time goes to prompts
/// (f = request rate × one prompt's prefill), so the decode steps stretch to TPOT / (1 − f).
struct AggServing {
  PoolInstance instance;       ///< the decode plan's layout and batch
  double prefill_s = 0.0;      ///< one prompt's prefill on the same layout shape
  double prefill_share = 0.0;  ///< f
  int instances = 0;
  double ttft_s = 0.0;          ///< one prompt's prefill (queueing not modelled)
  double tpot_s = 0.0;          ///< TPOT / (1 − f)
  double requests_per_s = 0.0;  ///< every instance's
  int gpus_used = 0;
  double tokens_per_s_per_gpu = 0.0;
  double tokens_per_s_per_user = 0.0;
};

struct ServingPlan {
  std::string model;
  std::string cluster;
  std::string cost_source;
  int gpu_budget = 0;
  int isl = 0;
  int osl = 0;
  double ttft_target_s = 0.0;
  double tpot_target_s = 0.0;
  std::optional<DisaggServing>
      disaggregated;                     ///< the best split; none when no pair meets the targets
  std::optional<AggServing> aggregated;  ///< the best aggregated instance
  std::string recommended;  ///< "disaggregated", "aggregated" or "" (nothing meets the targets)
  std::vector<std::string> reasons;
  int plans_costed = 0;  ///< make_plan calls (each ranks every legal layout)
};

/// Plans both ways. Errors: no isl/osl, a budget the cluster lacks, targets that are not
/// positive; a cost source that cannot answer.
Result<ServingPlan> plan_serving(const models::MoeModel& model, const Cluster& cluster,
                                 const CostSource& costs, const ServingRequest& request);

/// docs/PLAN_SCHEMA.md, "Serving plans".
nlohmann::json serving_to_json(const ServingPlan& plan);

}  // namespace moeplan::planner
