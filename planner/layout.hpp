// Layouts: ep_size × tp_size (× attention data parallelism when asked), a dispatcher and a rank
// mapping; their legality rules and the enumeration of every layout for a GPU count.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/moe_model.hpp"

namespace moeplan::planner {

/// How tokens reach their experts (ARCHITECTURE.md).
enum class Dispatcher : std::uint8_t {
  kPaddedA2a,  ///< PaddleNLP #9368: capacity = global max, equal-split all-to-all, padded compute
  kAllGather,  ///< sglang-jax #349: all-gather tokens, local filter, TP all-reduce, all-gather-v
  kA2av,       ///< dropless variable all-to-all after a count exchange (DeepEP-style)
};

/// Which GPU holds which (ep_rank, tp_rank) inside one replica.
enum class RankMapping : std::uint8_t {
  kTpInnermost,  ///< gpu = ep_rank · tp + tp_rank (both seeds): TP groups are neighbours
  kEpInnermost,  ///< gpu = tp_rank · ep + ep_rank: EP groups are neighbours
};

std::string dispatcher_name(Dispatcher d);  ///< "padded_a2a", "allgather", "a2av"
std::string mapping_name(RankMapping m);    ///< "tp_innermost", "ep_innermost"
std::optional<Dispatcher> parse_dispatcher(const std::string& name);
inline constexpr Dispatcher kAllDispatchers[] = {Dispatcher::kPaddedA2a, Dispatcher::kAllGather,
                                                 Dispatcher::kA2av};

struct Layout {
  int num_gpus = 1;  ///< GPUs the layout uses (GPUs 0..num_gpus-1 of the cluster)
  int dp_size = 1;   ///< attention data-parallel replicas of the MoE group (1 unless asked)
  int ep_size = 1;
  int tp_size = 1;
  Dispatcher dispatcher = Dispatcher::kA2av;
  RankMapping mapping = RankMapping::kTpInnermost;

  /// Global GPU index of (replica, ep_rank, tp_rank).
  int gpu(int replica, int ep_rank, int tp_rank) const;
  /// Every EP group (one per replica and TP rank), each in EP-rank order.
  std::vector<std::vector<int>> ep_groups() const;
  /// Every TP group (one per replica and EP rank), each in TP-rank order.
  std::vector<std::vector<int>> tp_groups() const;
  /// "ep8×tp2" (with "dp2×" in front when dp_size > 1).
  std::string shape_name() const;
};

/// A combination excluded by a rule (shown with --explain).
struct ExcludedLayout {
  int num_gpus = 1;
  int dp_size = 1;
  int ep_size = 1;
  int tp_size = 1;
  std::string rule;  ///< e.g. "num_experts % ep_size == 0: 60 % 8 = 4"
};

struct EnumerateOptions {
  int num_gpus = 1;
  bool attention_dp = false;  ///< also enumerate dp_size > 1 (dp · ep · tp = num_gpus)
  std::vector<Dispatcher> dispatchers = {Dispatcher::kPaddedA2a, Dispatcher::kAllGather,
                                         Dispatcher::kA2av};
};

struct Enumeration {
  std::vector<Layout> layouts;           ///< legal; ordered by dp, ep, dispatcher, mapping
  std::vector<ExcludedLayout> excluded;  ///< one per illegal (dp, ep, tp), first broken rule
};

/// The first rule (ep, tp) breaks for `model`, or nothing when legal: E % ep == 0,
/// moe_intermediate_size % tp == 0, shared expert width % tp == 0.
std::optional<std::string> layout_rule_violation(const models::MoeModel& model, int ep_size,
                                                 int tp_size);

/// Every legal layout with dp·ep·tp = num_gpus (dp = 1 unless attention_dp), each dispatcher,
/// and both rank mappings where they differ (ep = 1 or tp = 1 gives one mapping).
Enumeration enumerate_layouts(const models::MoeModel& model, const EnumerateOptions& options);

}  // namespace moeplan::planner
