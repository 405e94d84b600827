// The per-layer cost model: for one layout, workload and expert load, the time of each part of
// an MoE layer (router, dispatch, expert compute on the slowest rank, combine, TP collective,
// shared expert), the step total over the model's MoE layers, and the memory per GPU.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "models/moe_model.hpp"
#include "planner/costs/cost_source.hpp"
#include "planner/layout.hpp"
#include "planner/placement/expert_load.hpp"
#include "planner/topology/cluster.hpp"

namespace moeplan::planner {

enum class Phase : std::uint8_t { kPrefill, kDecode };
std::string phase_name(Phase p);  ///< "prefill", "decode"
std::optional<Phase> parse_phase(const std::string& name);

/// The dtype name a fused-MoE cost table keys a weight format under (aiconfigurator's
/// moe_dtype: "bf16", "fp8", "fp8_block", "w4a16_mxfp4", "int4_wo"; "nvfp4").
std::string moe_table_dtype(const WeightFormat& f);

inline constexpr int kDefaultPrefillTokensPerGpu = 4096;
inline constexpr int kDefaultDecodeBatchPerGpu = 128;

/// Tokens per GPU per step: prefill tokens, or the decode batch (one new token per sequence).
/// A TP group of tp GPUs shares its tp · tokens_per_gpu tokens (attention TP).
struct Workload {
  Phase phase = Phase::kPrefill;
  int tokens_per_gpu = kDefaultPrefillTokensPerGpu;
};

/// One predicted time and the cost source that produced it.
struct CostItem {
  double seconds = 0.0;
  std::string source;
};

/// One MoE layer, seconds per part.
struct LayerCost {
  CostItem router;
  CostItem dispatch;  ///< count exchange, permute, the dispatch collective
  CostItem experts;   ///< grouped expert GEMMs + SiLU on the slowest EP rank
  CostItem combine;   ///< the combine collective and the weighted sum
  CostItem tp;        ///< TP all-reduces of the routed and shared expert outputs
  CostItem shared;    ///< shared expert GEMMs and gate
  double total() const {
    return router.seconds + dispatch.seconds + experts.seconds + combine.seconds + tp.seconds +
           shared.seconds;
  }
};

/// Bytes per GPU. KV cache is not included (it depends on context length, not on the layout).
struct MemoryPerGpu {
  double experts = 0.0;      ///< routed expert slots (replicas included) of every MoE layer
  double shared = 0.0;       ///< shared experts and routers of every MoE layer
  double dense = 0.0;        ///< attention, dense MLP layers, norms, embeddings and head (/tp)
  double buffers = 0.0;      ///< dispatch/combine buffers of the dispatcher (padded for padded_a2a)
  double activations = 0.0;  ///< one layer's activations and expert intermediates
  double total() const { return experts + shared + dense + buffers + activations; }
};

struct LayoutCost {
  Layout layout;
  LayerCost per_layer;        ///< mean over the MoE layers
  double step_seconds = 0.0;  ///< sum over the MoE layers (attention and dense layers excluded)
  double tokens_per_s_per_gpu = 0.0;
  MemoryPerGpu memory;
  double memory_capacity = 0.0;  ///< device HBM bytes
  bool feasible = true;          ///< memory.total() ≤ memory_capacity
  double imbalance = 1.0;        ///< max / mean routed pairs per EP rank (mean over layers)
  double expert_rows = 0.0;      ///< rows the slowest rank computes per layer (padding included)
  double useful_rows = 0.0;      ///< routed pairs that rank really serves per layer
  int num_slots = 0;             ///< expert slots per MoE layer (E + redundant replicas)
  /// Per MoE layer (in load order) when the load differs between layers: each layer's cost and
  /// its max / mean routed pairs per EP rank. Empty when every layer costs the same.
  std::vector<LayerCost> layers;
  std::vector<double> layer_imbalance;
};

/// Returns the placement to use for an EP size (contiguous when not set).
using PlacementFn = std::function<Result<Placement>(int ep_size)>;

/// Everything a layout's cost depends on besides the layout.
struct CostContext {
  const models::MoeModel& model;
  const Cluster& cluster;
  const CostSource& costs;
  Workload workload;
  const ExpertLoad& load;  ///< one row per MoE layer (or one row for all)
  PlacementFn placement;   ///< null: contiguous_placement
};

/// Rows per slot the padded all-to-all computes on every EP rank: the expected largest count one
/// source rank routes to one slot (see cost_model.cpp), from the slots' total counts.
double padded_capacity(const std::vector<double>& slot_tokens, int ep_size);

/// Costs one layout. Errors: the layout needs more GPUs than the cluster has, a placement or
/// load that does not fit the model, or a cost source that cannot answer.
Result<LayoutCost> cost_layout(const CostContext& ctx, const Layout& layout);

}  // namespace moeplan::planner
