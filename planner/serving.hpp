// Serving plans (issue 20): disaggregated prefill and decode pools against aggregated serving
// for a GPU budget, input/output lengths and latency targets. Each pool's instances are planned
// by make_plan (every legal layout, costed on the cluster); the KV cache a prompt leaves is sent
// from its prefill instance to a decode instance over the cluster's links; the split (x prefill
// and y decode instances) is the one with the most output tokens/s within the budget, or, for an
// offered request rate, the one with the fewest GPUs.
//
// Queueing: requests arrive as a Poisson stream. A prompt waits for the prefill work ahead of it
// — a prefill instance is an M/D/1 queue (DistServe's prefill model, the batch of n prompts
// served at its rate); an aggregated instance's prompt tokens queue for the chunks of its mixed
// passes, an M/D/1 queue with its decode passes as vacations — and the mean TTFT is that wait
// plus its own prefill (and the KV transfer) plus the wait for a free decode slot: each
// instance's sequences per GPU × GPUs are the servers of an M/D/c queue whose service is the osl
// passes a sequence holds its slot (SGLang's and Dynamo's decode side admit a request, and so
// take its KV cache, only into a free slot).
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
  /// > 0: the TTFT target holds for this fraction of the requests (0.99: p99), not the mean.
  double ttft_percentile = 0.0;
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
  /// Each decode instance's slot utilisation: its arrival rate × osl·TPOT / (GPUs × sequences
  /// per GPU).
  double decode_utilization = 0.0;
  /// The mean wait for a free decode slot (mdc_wait_seconds; +∞ at utilisation 1).
  double decode_slot_wait_s = 0.0;
  /// mean: the prefill wait + the prefill step + the KV transfer + the decode slot wait
  double ttft_s = 0.0;
  /// With ServingRequest::ttft_percentile: that percentile of the TTFT (+∞ at ρ = 1); else 0.
  double ttft_quantile_s = 0.0;
  double tpot_s = 0.0;
  /// The deployment's rate: the offered rate, or the most both pools serve (the TTFT target
  /// included).
  double requests_per_s = 0.0;
  int gpus_used = 0;
  /// Output tokens per second per budget GPU (with an offered rate: per GPU used).
  double tokens_per_s_per_gpu = 0.0;
  double tokens_per_s_per_user = 0.0;  ///< 1 / TPOT
};

/// Aggregated serving: instances that run both phases on one layout with chunked prefill:
/// decode passes (the b sequences per GPU) and mixed passes (those rows and a chunk of c prompt
/// tokens per GPU), a share x = c_bal / c of them mixed, c_bal = b·isl/osl.
struct AggServing {
  /// The decode plan's layout shape and batch, with the dispatcher fastest for a mixed pass;
  /// step_s the mean pass (= TPOT), requests_per_s one instance's saturation rate g·b/(osl·t̄).
  PoolInstance instance;
  double chunk_tokens_per_gpu = 0.0;  ///< c
  double mixed_pass_s = 0.0;          ///< t_m
  double decode_pass_s = 0.0;         ///< t_d (the decode plan's step)
  double mixed_share = 0.0;           ///< x
  /// D: one prompt's tokens at the chunks' rate, t_m·isl / (g·c).
  double prefill_s = 0.0;
  /// ρ = the instance's request rate × D: the prompt-token queue's utilisation.
  double prefill_utilization = 0.0;
  int instances = 0;
  /// The mean wait of a prompt, M/D/1 with decode passes as vacations:
  /// ρ·D / (2·(1 − ρ)) + t_d / 2; +∞ at ρ = 1.
  double ttft_wait_s = 0.0;
  /// The sequence slots' utilisation: the instance's rate / its saturation rate g·b/(osl·t̄).
  double slot_utilization = 0.0;
  /// The mean wait for a free sequence slot: M/D/c of g·b slots held osl·t̄ each
  /// (mdc_wait_seconds; +∞ at utilisation 1).
  double slot_wait_s = 0.0;
  double ttft_s = 0.0;  ///< mean: the prompt-token wait + max(D, t_m) + the slot wait
  /// With ServingRequest::ttft_percentile: that percentile of the TTFT (+∞ at ρ = 1); else 0.
  double ttft_quantile_s = 0.0;
  double tpot_s = 0.0;          ///< the mean pass x·t_m + (1 − x)·t_d
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
  double arrival_rate = 0.0;     ///< the offered requests/s (0: the most the budget serves)
  double ttft_percentile = 0.0;  ///< the TTFT target's percentile as a fraction (0: the mean)
  std::optional<DisaggServing>
      disaggregated;                     ///< the best split; none when no pair meets the targets
  std::optional<AggServing> aggregated;  ///< the best aggregated instance
  std::string recommended;  ///< "disaggregated", "aggregated" or "" (nothing meets the targets)
  std::vector<std::string> reasons;
  int plans_costed = 0;         ///< make_plan calls (each ranks every legal layout)
  int mixed_passes_costed = 0;  ///< aggregated mixed passes costed (one layout each)
};

/// Plans both ways. Errors: no isl/osl, a budget the cluster lacks, targets or a rate that are
/// not positive; a cost source that cannot answer.
Result<ServingPlan> plan_serving(const models::MoeModel& model, const Cluster& cluster,
                                 const CostSource& costs, const ServingRequest& request);

/// The mean wait of an M/D/1 queue of service time `d` at utilisation `rho`; +∞ at ρ ≥ 1.
double md1_wait_seconds(double rho, double d);

/// Erlang's C formula: the probability that an arrival waits in an M/M/c queue of `servers`
/// servers at utilisation ρ (offered load ρ·c Erlangs), from the Poisson distribution's
/// probability and cumulative probability at c (regularised incomplete gamma): 0 at ρ ≤ 0, 1 at
/// ρ ≥ 1.
double erlang_c(double servers, double rho);

/// The mean wait for a free decode slot: an M/D/c queue of `servers` slots each held for
/// `service` seconds, at utilisation ρ, by Cosmetatos' approximation ½·(1 + f)·W(M/M/c),
/// f = (1 − ρ)(c − 1)(√(4 + 5c) − 2) / (16·ρ·c), W(M/M/c) = C·S / (c·(1 − ρ)); exact at c = 1
/// (Pollaczek–Khinchine); +∞ at ρ ≥ 1.
double mdc_wait_seconds(double rho, double servers, double service);

/// The p-quantile of that wait from the M/M/c tail P(W > t) = C·e^(−c(1 − ρ)·t / S): Erlang's C
/// for the probability of waiting and the exponential service's decay rate, both above
/// deterministic service's (whose heavy-traffic decay is twice as fast): conservative, at or
/// above the simulated quantile in every case of ServingQueue.MdcWaitAgainstASimulation. 0 when
/// C ≤ 1 − p; +∞ at ρ ≥ 1.
double mdc_wait_quantile(double rho, double servers, double service, double p);

/// "p99", "p99.9", "p50" for 0.99, 0.999, 0.5.
std::string percentile_name(double fraction);

/// The p-quantile (0 < p < 1) of that wait: 0 when P(W = 0) = 1 − ρ ≥ p, else from the tail's
/// exponential asymptote P(W > y) ≈ C·e^(−θ·y) (Cramér–Lundberg: θ = u/D, ρ·(e^u − 1) = u,
/// C = (1 − ρ)/(ρ·e^u − 1)); +∞ at ρ ≥ 1.
double md1_wait_quantile(double rho, double d, double p);

/// The p-quantile of the M/D/1 wait plus the residual of a decode pass of `vacation` seconds in
/// flight (uniform on [0, vacation], independent: the queue with vacations' decomposition).
double md1_vacation_wait_quantile(double rho, double d, double vacation, double p);

/// docs/PLAN_SCHEMA.md, "Serving plans".
nlohmann::json serving_to_json(const ServingPlan& plan);

}  // namespace moeplan::planner
