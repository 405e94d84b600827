// Layout enumeration: every legal dp × ep × tp split of a GPU count for a model, with each
// dispatcher and rank mapping. The layout vocabulary itself (Layout, Dispatcher, RankMapping and
// the legality rules) is models/layout.hpp, shared with the kernels, profiler and exporters.
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "models/layout.hpp"
#include "models/moe_model.hpp"

namespace moeplan::planner {

using models::Dispatcher;
using models::dispatcher_name;
using models::kAllDispatchers;
using models::Layout;
using models::mapping_name;
using models::parse_dispatcher;
using models::RankMapping;
using models::Redundancy;

/// A combination excluded by a rule (shown with --explain).
struct ExcludedLayout {
  int num_gpus = 1;
  int dp_size = 1;
  int ep_size = 1;
  int tp_size = 1;
  std::string rule;  ///< e.g. "num_experts % ep_size == 0: 60 % 8 = 4"
  /// Excluded only by its redundant slots: every rule holds with none.
  bool legal_without_redundancy = false;
};

struct EnumerateOptions {
  int num_gpus = 1;
  bool attention_dp = false;  ///< also enumerate dp_size > 1 (dp · ep · tp = num_gpus)
  std::vector<Dispatcher> dispatchers = {std::begin(models::kAllDispatchers),
                                         std::end(models::kAllDispatchers)};
  /// GPUs per node of the cluster (deepep_normal needs whole nodes, at least two); 0: one node.
  int gpus_per_node = 0;
  /// Two-batch overlap settings to enumerate each layout with ({false}: none; {false, true}:
  /// both).
  std::vector<bool> tbo = {false};
  /// Redundant expert slots per EP size: an EP size is legal when (E + R) % ep == 0.
  Redundancy redundancy;
};

struct Enumeration {
  std::vector<Layout> layouts;           ///< legal; ordered by dp, ep, dispatcher, mapping
  std::vector<ExcludedLayout> excluded;  ///< one per illegal (dp, ep, tp), first broken rule
};

/// The widths of `model` the legality rules look at.
models::LayoutDims layout_dims(const models::MoeModel& model);

/// The first rule (ep, tp) breaks for `model` with `redundant` redundant expert slots in all, as
/// --explain words it, or nothing when legal.
std::optional<std::string> layout_rule_violation(const models::MoeModel& model, int ep_size,
                                                 int tp_size, std::int64_t redundant = 0);

/// Every legal layout with dp·ep·tp = num_gpus (dp = 1 unless attention_dp), each dispatcher
/// that can run it (models::dispatcher_violation), both rank mappings where they differ (ep = 1
/// or tp = 1 gives one mapping), and each two-batch-overlap setting.
Enumeration enumerate_layouts(const models::MoeModel& model, const EnumerateOptions& options);

}  // namespace moeplan::planner
