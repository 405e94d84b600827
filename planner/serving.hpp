// Serving plans (issue 20): disaggregated prefill and decode pools against aggregated serving
// for a GPU budget, input/output lengths and latency targets. Each pool's instances are planned
// by make_plan (every legal layout, costed on the cluster); the KV cache a prompt leaves is sent
// from its prefill instance to a decode instance over the cluster's links; the split (x prefill
// and y decode instances) is the one with the most output tokens/s within the budget, or, for an
// offered request rate, the one with the fewest GPUs.
//
// Queueing: requests arrive as a Poisson stream. A prompt waits for the prefill work ahead of it
// — a prefill instance is an M/D/1 queue (DistServe's prefill model, the batch of n prompts
// served at its rate), an aggregated instance an M/G/1 queue whose prefill passes wait for the
// pass in flight, a decode step or another prompt (Cobham's non-preemptive formula) — and the
// mean TTFT is that wait plus its own prefill (and the KV transfer). The wait for a free decode
// slot is not modelled: a decode pool runs at or below its saturation rate.
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
  /// > 0: requests/s offered to the deployment: the plan is the one with the fewest GPUs that
  /// serves this rate within the targets. 0: the most requests/s the budget serves (with a TTFT
  /// target, the most at which the mean TTFT, queueing included, meets it).
  double arrival_rate = 0.0;
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
  /// Each prefill instance's utilisation ρ = its arrival rate × (step / prompts per step).
  double prefill_utilization = 0.0;
  /// The mean wait for the prefill work ahead, M/D/1: ρ·D / (2·(1 − ρ)), D = step / prompts;
  /// +∞ when the prefill pool runs at its capacity (ρ = 1: the queue grows without bound).
  double ttft_wait_s = 0.0;
  double ttft_s = 0.0;  ///< mean: the wait + the prefill step + the KV transfer
  double tpot_s = 0.0;
  /// The deployment's rate: the offered rate, or the most both pools serve (the TTFT target
  /// included).
  double requests_per_s = 0.0;
  int gpus_used = 0;
  double tokens_per_s_per_gpu = 0.0;   ///< output tokens per second per budget GPU
  double tokens_per_s_per_user = 0.0;  ///< 1 / TPOT
};

/// Aggregated serving: instances that run both phases on one layout, prefill interleaved with
/// the decode steps, in steady state: a share f of the time goes to prompts (f = request rate ×
/// one prompt's prefill), so the decode steps stretch to TPOT / (1 − f). At most the rate that
/// fills the decode batch: λ = A / (1 + A·t_p), A = g·b / (osl·TPOT).
struct AggServing {
  PoolInstance instance;       ///< the decode plan's layout and batch
  double prefill_s = 0.0;      ///< one prompt's prefill on the same layout shape
  double prefill_share = 0.0;  ///< f
  int instances = 0;
  /// The mean wait for the pass in flight and the prompts ahead, M/G/1 (Cobham):
  /// (f·t_p + (1 − f)·TPOT) / (2·(1 − f)).
  double ttft_wait_s = 0.0;
  double ttft_s = 0.0;          ///< mean: the wait + one prompt's prefill
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
  double arrival_rate = 0.0;  ///< the offered requests/s (0: the most the budget serves)
  std::optional<DisaggServing>
      disaggregated;                     ///< the best split; none when no pair meets the targets
  std::optional<AggServing> aggregated;  ///< the best aggregated instance
  std::string recommended;  ///< "disaggregated", "aggregated" or "" (nothing meets the targets)
  std::vector<std::string> reasons;
  int plans_costed = 0;  ///< make_plan calls (each ranks every legal layout)
};

/// Plans both ways. Errors: no isl/osl, a budget the cluster lacks, targets or a rate that are
/// not positive; a cost source that cannot answer.
Result<ServingPlan> plan_serving(const models::MoeModel& model, const Cluster& cluster,
                                 const CostSource& costs, const ServingRequest& request);

/// The mean wait of an M/D/1 queue of service time `d` at utilisation `rho`; +∞ at ρ ≥ 1.
double md1_wait_seconds(double rho, double d);

/// docs/PLAN_SCHEMA.md, "Serving plans".
nlohmann::json serving_to_json(const ServingPlan& plan);

}  // namespace moeplan::planner
