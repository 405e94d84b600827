// A plan's request as users state it (phase, tokens, GPUs, dispatchers, placement policy or
// file, redundant slots), checked against the model and cluster and turned into a PlanRequest:
// the one place both front ends (moeplan plan, moeplan-gui) build their plans from.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "models/moe_model.hpp"
#include "planner/layout_figures.hpp"
#include "planner/plan.hpp"
#include "planner/topology/cluster.hpp"

namespace moeplan::planner {

/// The most redundant expert slots per EP rank a plan takes.
inline constexpr int kMaxRedundantPerRank = 1024;
/// The most redundant expert slots in all (--redundant total:R) a plan takes.
inline constexpr int kMaxRedundantTotal = 1 << 20;
/// The largest deepep_ll buffer a plan takes, tokens per rank (DeepEP's buffer grows with
/// E · tokens · 2H bytes: 65536 tokens of DeepSeek-V3 is ~1 TB, past any GPU).
inline constexpr int kMaxLlTokensPerRank = 65536;

/// What a user chooses besides the model, cluster, cost source and expert load.
struct PlanChoices {
  std::string phase = "prefill";
  std::optional<int> tokens_per_gpu;     ///< default: per phase (4096 prefill, 128 decode)
  std::optional<int> num_gpus;           ///< default: the whole cluster
  std::vector<std::string> dispatchers;  ///< empty: all
  bool attention_dp = false;
  std::string placement = "contiguous";  ///< a policy name, or a placement file's path
  Redundancy redundancy;             ///< for eplb and best; also decides which EP sizes are legal
  std::string tbo = "off";           ///< two-batch overlap: off, on or both
  std::optional<int> ll_max_tokens;  ///< deepep_ll's buffer (default 128 tokens per rank)
  /// Input / output tokens per sequence: with isl the KV cache is counted (Workload::isl).
  std::optional<int> isl;
  std::optional<int> osl;
  std::optional<double> mem_fraction;  ///< default kDefaultMemFraction; needs isl
  /// Latency targets, ms: time to first token (prefill) and time per output token (decode); a
  /// layout whose step is slower cannot serve the target (PlanRequest::step_target_s).
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
};

/// Whether `placement` names a placement file (a path or a .json name) rather than a policy.
bool is_placement_file(const std::string& placement);

/// The placement fit of a policy on `cluster` for `model` at `tokens_per_gpu` (EP ranks on the
/// cluster's nodes, the model's expert groups, best's samples sized by the routed pairs).
PolicyFit policy_fit(const models::MoeModel& model, const Cluster& cluster, PlacementPolicy policy,
                     Redundancy redundancy, int tokens_per_gpu);

/// Parses --redundant (N per EP rank, total:R, auto) within the plan's limits; errors name
/// "redundant".
Result<Redundancy> parse_plan_redundancy(const std::string& text);

/// The request for `choices` with `load` (no layers: uniform). Errors name the input (phase,
/// tokens, gpus, dispatcher, tbo, ll-max-tokens, isl, osl, mem_fraction, redundant, placement) and
/// what it expects: a policy other than contiguous, or redundant slots, need a load (`load_given`);
/// redundant slots need eplb or best; a placement file must fit the model and fixes the EP size and
/// the slots.
Result<PlanRequest> make_plan_request(const models::MoeModel& model, const Cluster& cluster,
                                      const PlanChoices& choices, ExpertLoad load, bool load_given);

}  // namespace moeplan::planner
