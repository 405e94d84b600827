// The parts of the per-layer cost model the dispatcher files share (cost_model.cpp,
// cost_model_deepep.cpp): the sizes a layer is costed from, how its pairs spread over the EP
// ranks, and the helpers that add a source's answers to a cost item. Internal to planner/costs.
#pragma once

#include <string>
#include <vector>

#include "planner/costs/cost_model.hpp"

namespace moeplan::planner::detail {

/// The sizes one layer's costs are computed from (for one layout and workload).
struct LayerDims {
  double hidden = 0.0;            ///< H
  double expert_width = 0.0;      ///< I / tp: one routed expert's slice on a rank
  double shared_width = 0.0;      ///< shared-expert width / tp
  double top_k = 0.0;             ///< k
  double activation_bytes = 0.0;  ///< bytes per activation element
  double group_tokens = 0.0;      ///< tokens of one TP group: tp · tokens per GPU
  int num_experts = 0;            ///< E
  int ep_size = 1;
  int slots_per_rank = 1;
  int tp_size = 1;
  int ranks_per_node = 1;            ///< GPUs per node of the cluster (DeepEP's node grouping)
  int ll_max_tokens = 0;             ///< deepep_ll's buffer: tokens per rank
  double inter = 0.0;                ///< I, the full expert width
  DType dtype = DType::kBf16;        ///< activations between kernels, combine, TP reductions
  DType gemm_dtype = DType::kBf16;   ///< the expert and shared-expert GEMMs (the weight format's)
  double expert_weight_bytes = 0.0;  ///< per expert weight element, scales included
  double shared_weight_bytes = 0.0;  ///< per shared-expert weight element, scales included
  double dispatch_row = 0.0;         ///< bytes of one row a dispatcher sends (values + scales)
  std::string table_dtype;           ///< the fused-MoE table dtype of the weight format
  /// The cost source prices a rank's fused MoE kernel (permute, experts, unpermute): the
  /// dispatchers then book no permute (counted once, in experts).
  bool fused = false;
  bool gathers_tokens = false;  ///< the all-gather dispatcher: every token reaches every rank
  /// The load is one step's routing of these tokens (ExpertLoad::realized): rows per slot are
  /// counts, not expectations.
  bool realized_load = false;
  /// Bytes of `rows` hidden-state rows.
  double row_bytes(double rows) const { return rows * hidden * activation_bytes; }
  /// Bytes of `rows` rows in the dispatch payload (fp8 with scales when the format quantizes
  /// activations, as DeepEP dispatches; combine returns row_bytes).
  double dispatch_bytes(double rows) const { return rows * dispatch_row; }
};

/// How the routed pairs of one layer are spread over the EP ranks.
struct RankLoad {
  std::vector<double> pairs;  ///< routed (token, expert) pairs each EP rank serves
  double max = 0.0;
  double total = 0.0;
};

/// What a dispatcher's exchange leaves for the expert compute.
struct Exchange {
  std::vector<std::vector<double>> rows;  ///< rows per local slot, per EP rank
  /// The rows are the slots' expected counts (group_occupancy); false: fixed counts (padded
  /// buffers computed whole).
  bool expected_rows = true;
  double buffers = 0.0;    ///< dispatch/combine buffer bytes per GPU
  std::string infeasible;  ///< why the dispatcher cannot run ("" when it can)
};

/// True when the "+"-joined source list `sources` names `source`.
bool names_source(const std::string& sources, const std::string& source);
/// Appends each name of the "+"-joined list `source` to the list `sources` unless it is named
/// already.
void add_source(std::string& sources, const std::string& source);
/// Adds an answer to a cost item; the item names every source that contributed.
Status add(CostItem& item, const Result<CostEstimate>& r);
/// The local slots' own token counts on each EP rank (every dispatcher but padded_a2a).
std::vector<std::vector<double>> rows_per_rank(const std::vector<double>& slots,
                                               const LayerDims& d);

/// deepep_normal (DeepEP normal kernels; kernels/moe_layer.cpp deepep_normal): the count
/// exchange, the inter-node hop of each token once per destination node to the same-rail rank,
/// the NVLink forward inside the node, and the reverse for combine (reduced before the
/// inter-node hop).
Result<Exchange> deepep_normal_cost(const CostSource& cs, const LayerDims& d, const Layout& layout,
                                    const std::vector<double>& slots, const RankLoad& load,
                                    LayerCost& c);
/// deepep_ll (DeepEP low-latency kernels): every pair sent directly as fp8 with scales, bf16
/// back, into a fixed buffer of ll_max_tokens per rank (infeasible past it).
Result<Exchange> deepep_ll_cost(const CostSource& cs, const LayerDims& d, const Layout& layout,
                                const std::vector<double>& slots, const RankLoad& load,
                                LayerCost& c);

}  // namespace moeplan::planner::detail
