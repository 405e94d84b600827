// The sharded MoE layer: one implementation of the MoE forward for a layout (ep_size × tp_size,
// rank mapping) and a dispatcher, each rank holding only its experts' tp-slices. It serves
// `verify` (against the dense reference), the profiler's end-to-end measurement, and `validate`.
#pragma once

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
/// The dispatchers the sharded layer implements (the DeepEP ones are costed by the planner
/// only).
inline constexpr Dispatcher kKernelDispatchers[] = {Dispatcher::kPaddedA2a, Dispatcher::kAllGather,
                                                    Dispatcher::kA2av};
/// Ok when the sharded layer implements `d`; otherwise an error on input "dispatcher" saying it
/// is costed by the planner only and which dispatchers the kernels run.
Status check_kernel_dispatcher(Dispatcher d);
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
};

/// The groups one rank takes part in: EP (same tp_rank) and TP (same ep_rank).
struct RankGroups {
  std::unique_ptr<Communicator> ep;
  std::unique_ptr<Communicator> tp;
};
/// Collective over `world`: splits it into this rank's EP and TP groups.
RankGroups make_groups(Communicator& world, const Layout& layout);

/// One MoE layer forward on this rank. `x` holds this rank's tokens (token_range of its
/// ep_rank, replicated over its TP group), [count][H]; returns their outputs [count][H] in the
/// storage dtype's values.
std::vector<float> moe_forward(Backend& backend, const RankGroups& groups, const LayerSpec& spec,
                               const Layout& layout, const RankWeights& w, std::span<const float> x,
                               int num_tokens, PhaseTimes* times = nullptr);

}  // namespace moeplan::kernels
