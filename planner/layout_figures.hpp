// Figures of one layout that the front ends draw: the placement a policy gives an EP size (the
// plan's PlacementFn), tokens per expert and GPU, and the GPU × GPU bytes of a layer's token
// traffic, taken from the same collective queries the cost model prices.
#pragma once

#include <cstdint>
#include <vector>

#include "models/result.hpp"
#include "planner/costs/cost_model.hpp"
#include "planner/placement/placement.hpp"

namespace moeplan::planner {

/// How a policy is fitted to an EP size.
struct PolicyFit {
  PlacementPolicy policy = PlacementPolicy::kContiguous;
  int gpus_per_node = 8;            ///< EP rank r lies on node r / gpus_per_node (tp = 1)
  int num_groups = 1;               ///< the model's expert groups (DeepSeek's n_group)
  Redundancy redundancy;            ///< redundant slots per EP size (replicas of hot experts)
  std::int64_t pairs_per_step = 0;  ///< routed pairs per step for `best`'s samples (0: 65536)
  std::uint64_t seed = 0;           ///< `best`'s sample seed
};

/// `best` draws this many step samples from the load (what `moeplan place` does without steps).
inline constexpr int kBestSampleSteps = 512;

/// The placement config of `fit` for `ep_size` EP ranks: ep_size / gpus_per_node nodes when
/// the ranks fill whole nodes, else one; E + R slots for eplb and best (R from `fit.redundancy`),
/// E for contiguous and round_robin (they place no replicas).
PlacementConfig policy_config(const PolicyFit& fit, int num_experts, int ep_size);

/// Places `load` on `ep_size` ranks with `fit`'s policy (contiguous needs no load).
Result<PlacementResult> place_for_ep(const ExpertLoad& load, const PolicyFit& fit, int ep_size);

/// A PlacementFn for make_plan / cost_layout that places with `fit` and caches per EP size
/// (thread-safe).
PlacementFn policy_placement_fn(const ExpertLoad& load, const PolicyFit& fit);

/// Tokens each GPU serves of each expert in one layer: [num_experts][num_gpus], a replicated
/// expert's tokens split evenly over its replicas (the split gpu_loads uses); rows sum to
/// counts, columns to gpu_loads(counts, map, num_gpus).
std::vector<std::vector<double>> expert_gpu_loads(const std::vector<double>& counts,
                                                  const std::vector<int>& map, int num_gpus);

/// Bytes GPU i sends GPU j in layer `layer` of `ctx.load` (row 0 when the load has one row):
/// the flows of every dispatch and combine collective (all-to-all(-v), all-gather(-v)) that
/// cost_layout prices for `layout`, routed as collective_flows lays them out. TP all-reduces
/// are left out. Result: [num_gpus][num_gpus] of the layout's GPUs, zero diagonal.
Result<std::vector<std::vector<double>>> layer_traffic(const CostContext& ctx, const Layout& layout,
                                                       int layer);

/// A traffic matrix's bytes inside nodes (NVLink) and across nodes (the network), GPU g on node
/// g / gpus_per_node.
struct TrafficTotals {
  double intra_node = 0.0;
  double inter_node = 0.0;
  double total() const { return intra_node + inter_node; }
};
TrafficTotals traffic_totals(const std::vector<std::vector<double>>& bytes, int gpus_per_node);

}  // namespace moeplan::planner
