// The sharded MoE layer: one implementation of the MoE forward for a layout (ep_size × tp_size,
// rank mapping) and a dispatcher, each rank holding only its experts' tp-slices. It serves
// `verify` (against the dense reference), the profiler's end-to-end measurement, and `validate`.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/communicator.hpp"
#include "kernels/layer_spec.hpp"
#include "models/layout.hpp"
#include "models/result.hpp"

namespace moeplan::kernels {

using models::Dispatcher;
using models::dispatcher_name;
using models::kAllDispatchers;
/// The dispatchers that run on every layout (the DeepEP ones need tp 1, and deepep_normal whole
/// nodes: kernel_dispatch_violation).
inline constexpr Dispatcher kKernelDispatchers[] = {Dispatcher::kPaddedA2a, Dispatcher::kAllGather,
                                                    Dispatcher::kA2av};
using models::Layout;
using models::parse_dispatcher;
using models::parse_layout;
using models::RankMapping;

/// Checks a layout against a layer and a world size before any work: ep·tp = world and the
/// legality rules of models/layout.hpp. The message says which rule failed.
Status check_layout(const LayerSpec& spec, const Layout& layout, int world_size);

/// Every (ep, tp) with ep·tp = world that passes check_layout, ep descending (mapping
/// tp_innermost).
std::vector<Layout> legal_layouts(const LayerSpec& spec, int world_size);

/// Tokens [first, first + count) owned by EP rank `ep_rank` when `num_tokens` split over ep.
struct TokenRange {
  int first = 0;
  int count = 0;
};
TokenRange token_range(int num_tokens, int ep_size, int ep_rank);

/// The weights one rank holds: the replicated router (and bias, shared gate), its E/ep experts'
/// tp-slices, and its tp-slice of the shared expert.
struct RankWeights {
  std::vector<float> router;       ///< [H][E]
  std::vector<float> score_bias;   ///< [E]
  std::vector<float> shared_gate;  ///< [H] or empty
  int first_expert = 0;
  std::vector<ExpertWeights> experts;  ///< E/ep local experts
  ExpertWeights shared;                ///< width 0 when the model has none
};
RankWeights make_rank_weights(const LayerSpec& spec, const Layout& layout, int world_rank);

/// Wall time of each part of one forward on this rank, in seconds.
struct PhaseTimes {
  double router = 0.0;
  double dispatch = 0.0;
  double experts = 0.0;
  double tp = 0.0;
  double combine = 0.0;
  double shared = 0.0;
  double total = 0.0;
  /// Bytes of one token row on the dispatch wire (values and scales): the dtype's, or fp8 e4m3
  /// with one fp32 scale per 128 values (the DeepEP dispatchers, and every one with fp8 weights).
  std::size_t dispatch_row_bytes = 0;
};

/// The groups one rank takes part in: EP (same tp_rank) and TP (same ep_rank); with nodes
/// (ranks_per_node > 0, tp 1, ep a multiple of it) also the EP ranks of its node (`node`,
/// ordered by EP rank) and the EP ranks with its index in the other nodes (`rail`, one per node,
/// ordered by node): DeepEP's intra-node (NVLink) and inter-node (same-rail RDMA) hops.
struct RankGroups {
  std::unique_ptr<Communicator> ep;
  std::unique_ptr<Communicator> tp;
  std::unique_ptr<Communicator> node;
  std::unique_ptr<Communicator> rail;
};
/// Collective over `world`: splits it into this rank's EP and TP groups, and the node and rail
/// groups when `ranks_per_node` > 0 groups the EP ranks into nodes (consecutive EP ranks; one
/// node when 0).
RankGroups make_groups(Communicator& world, const Layout& layout, int ranks_per_node = 0);

/// How the DeepEP dispatchers run: EP ranks per node (deepep_normal; 0: one node) and the
/// low-latency buffer's tokens per rank (deepep_ll; 0: sized to this forward's largest rank).
struct DispatchOptions {
  int ranks_per_node = 0;
  int ll_max_tokens = 0;
};

/// Why `layout` (its dispatcher) cannot run on `num_tokens` tokens with `options`, or nothing:
/// the DeepEP rules of models::dispatcher_violation, and deepep_ll's buffer (the largest EP
/// rank's tokens ≤ ll_max_tokens).
std::optional<std::string> kernel_dispatch_violation(const Layout& layout, int num_tokens,
                                                     const DispatchOptions& options);

/// One MoE layer forward on this rank. `x` holds this rank's tokens (token_range of its
/// ep_rank, replicated over its TP group), [count][H]; returns their outputs [count][H] in the
/// storage dtype's values.
/// The DeepEP dispatchers need the groups made with the same ranks_per_node as `options`.
std::vector<float> moe_forward(Backend& backend, const RankGroups& groups, const LayerSpec& spec,
                               const Layout& layout, const RankWeights& w, std::span<const float> x,
                               int num_tokens, PhaseTimes* times = nullptr,
                               const DispatchOptions& options = {});

}  // namespace moeplan::kernels
