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
/// Tokens per rank the deepep_ll buffer holds unless asked otherwise: SGLang's default
/// (SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK = 128), also DeepEP's low-latency test.
inline constexpr int kDefaultLlMaxTokensPerRank = 128;

/// The share of a GPU's memory a serving framework takes for weights, activations and the KV
/// cache unless told otherwise: vLLM's gpu_memory_utilization default (0.9); the rest is left to
/// CUDA graphs, NCCL and the allocator.
inline constexpr double kDefaultMemFraction = 0.9;

/// The context the attention core is priced at when the workload gives none (isl = 0): prompts
/// of this many tokens (prefill), sequences this long (decode).
inline constexpr int kDefaultAttentionContext = 4096;

/// Tokens per GPU per step: prefill tokens, or the decode batch (one new token per sequence).
/// A TP group of tp GPUs shares its tp · tokens_per_gpu tokens (attention TP).
struct Workload {
  Phase phase = Phase::kPrefill;
  int tokens_per_gpu = kDefaultPrefillTokensPerGpu;
  /// deepep_ll's fixed buffer: the most tokens one rank may dispatch per step (a layout whose
  /// micro-batch holds more is infeasible).
  int ll_max_tokens_per_rank = kDefaultLlMaxTokensPerRank;
  /// Input and output tokens per sequence. isl > 0 counts the KV cache: decode holds
  /// tp · tokens_per_gpu sequences of isl + osl tokens per TP group, prefill the KV of its
  /// step's prompts (tp · tokens_per_gpu tokens, rounded up to whole prompts of isl); the
  /// memory then has to fit in mem_fraction of the HBM. isl = 0: no KV cache is counted and the
  /// weights, buffers and activations are compared with the whole HBM.
  int isl = 0;
  int osl = 0;
  double mem_fraction = kDefaultMemFraction;
  bool counts_kv() const { return isl > 0; }
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
  /// Two-batch overlap: the parts above are both micro-batches' sums; this much of them runs
  /// under the other micro-batch's work (0 without overlap).
  double overlap_hidden = 0.0;
  double total() const {
    return router.seconds + dispatch.seconds + experts.seconds + combine.seconds + tp.seconds +
           shared.seconds - overlap_hidden;
  }
};

/// The context the attention is priced at: prefill prompts of isl tokens, decode sequences at
/// their mean length over the generation (isl + osl / 2); kDefaultAttentionContext without isl.
double attention_context(const Workload& w);

/// The decoder's parts outside the MoE blocks, per GPU and step (the TP group's tokens, this
/// rank's heads and slices), each from the cost source.
struct DenseCost {
  /// One decoder layer's attention block: its two norms, the q/k/v projections (MLA: the
  /// q and KV LoRA down/up projections; decode absorbed into the latent), RoPE and q/k norms,
  /// the attention core, the output projection and its TP all-reduce.
  CostItem attention;
  CostItem dense_mlp;    ///< one dense MLP layer: gate/up, SiLU·mul, down, TP all-reduce
  CostItem head;         ///< once per step: embedding lookup, final norm, LM head
  double context = 0.0;  ///< the context the attention was priced at (attention_context)
};

/// Bytes per GPU. The KV cache is counted when the workload gives a context (Workload::isl).
struct MemoryPerGpu {
  double experts = 0.0;      ///< routed expert slots (replicas included) of every MoE layer
  double shared = 0.0;       ///< shared experts and routers of every MoE layer
  double dense = 0.0;        ///< attention, dense MLP layers, norms, embeddings and head (/tp)
  double buffers = 0.0;      ///< dispatch/combine buffers of the dispatcher (padded for padded_a2a)
  double activations = 0.0;  ///< one layer's activations and expert intermediates
  double kv_cache = 0.0;     ///< the workload's KV cache on this GPU (0 without a context)
  double total() const { return experts + shared + dense + buffers + activations + kv_cache; }
};

struct LayoutCost {
  Layout layout;
  LayerCost per_layer;  ///< mean over the MoE layers
  DenseCost dense;      ///< attention (per layer), dense MLP (per dense layer), head (per step)
  double moe_seconds = 0.0;  ///< the MoE blocks of every MoE layer
  /// One forward step of the whole model: the MoE blocks, every layer's attention block, the
  /// dense MLP layers and the head. Prefill: the time to first token of the step's prompts;
  /// decode: the time per output token.
  double step_seconds = 0.0;
  double tokens_per_s_per_gpu = 0.0;
  double tokens_per_s_per_user = 0.0;  ///< decode: one token per sequence per step; prefill: 0
  MemoryPerGpu memory;
  double memory_capacity = 0.0;  ///< device HBM bytes
  /// Bytes the layout may use: mem_fraction × HBM with a context (Workload::isl), else the HBM.
  double memory_limit = 0.0;
  bool feasible = true;  ///< memory.total() ≤ memory_limit, and the reason below empty
  /// With a context: the sequences of isl + osl tokens whose KV cache fits in what the weights,
  /// buffers and activations leave of memory_limit, per GPU (a TP group's count / tp; 0 when
  /// nothing is left).
  double max_sequences_per_gpu = 0.0;
  /// Why the layout cannot run besides memory (deepep_ll: tokens past its buffer; a step slower
  /// than the plan's latency target); "" otherwise.
  std::string infeasible_reason;
  bool meets_target = true;  ///< the step is within the plan's latency target (or none is set)
  double imbalance = 1.0;    ///< max / mean routed pairs per EP rank (mean over layers)
  double expert_rows = 0.0;  ///< rows the slowest rank computes per layer (padding included)
  double useful_rows = 0.0;  ///< routed pairs that rank really serves per layer
  int num_slots = 0;         ///< expert slots per MoE layer (E + redundant replicas)
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
  /// false: the MoE layer alone (validate's prediction of the measured layer): no attention,
  /// dense MLP or head is costed and the step is the MoE blocks'.
  bool whole_model = true;
};

/// Rows per slot the padded all-to-all computes on every EP rank: the expected largest count one
/// source rank routes to one slot (see cost_model.cpp), from the slots' total counts.
double padded_capacity(const std::vector<double>& slot_tokens, int ep_size);

/// P(a token routes at least one of its k experts into a set of m of the E experts), sampling
/// k distinct experts uniformly: 1 − C(E−m, k)/C(E, k), evaluated as 1 − Π_{i<k} (E−m−i)/(E−i)
/// so that m may be fractional (a group drawing the share s of the pairs: m = E · s).
double hit_probability(double num_experts, double top_k, double m);

/// Expected distinct destination nodes per token under uniform routing of k of E experts over
/// `num_nodes` nodes of E / num_nodes experts each: N · (1 − C(E − E/N, k) / C(E, k)).
double expected_distinct_nodes_uniform(int num_experts, int top_k, int num_nodes);

/// The placement-aware expectation: `group_pairs[n]` routed pairs land on node (or GPU) n out of
/// `total_pairs` = tokens · k; P(a token reaches n) = hit_probability(E, k, E·share_n). Returns
/// one probability per group; their sum is the expected distinct groups per token (uniform
/// load: the closed form above).
std::vector<double> group_hit_probabilities(const std::vector<double>& group_pairs,
                                            double total_pairs, int num_experts, int top_k);

/// deepep_ll's fixed buffer per rank, bytes (DeepEP's LowLatencyLayout: two send, two receive
/// and two signalling buffers sized by the max tokens per rank, E and H).
double deepep_ll_buffer_bytes(int max_tokens_per_rank, int hidden, int num_experts);

/// Bytes per token of deepep_ll's fp8 dispatch message: H fp8 values, one fp32 scale per 128
/// values, 16 bytes of metadata (DeepEP: sizeof(int4) + H + H/128·4).
double deepep_ll_dispatch_message_bytes(int hidden);

/// The parts outside the MoE blocks of one layout (cost_model_dense.cpp).
Result<DenseCost> cost_dense_parts(const CostContext& ctx, const Layout& layout);

/// One layer's attention block of a chunked-prefill pass: `chunk_per_gpu` prompt tokens (at the
/// prompt's context, attention_context of a prefill step) and `decode_per_gpu` sequences (at the
/// decode context) per GPU in one batch — the norms, projections, RoPE and TP all-reduce over
/// all the rows (each weight read once), each phase's attention core (and MLA's prefill
/// expansion or absorbed decode GEMMs) over its own rows. Contexts from ctx.workload's isl/osl.
Result<CostItem> cost_mixed_attention(const CostContext& ctx, const Layout& layout,
                                      double chunk_per_gpu, double decode_per_gpu);

/// The once-per-step part (embedding, final norm, LM head) of a chunked-prefill pass of
/// `chunk_per_gpu` prompt tokens and `decode_per_gpu` sequences per GPU: the embedding and norm
/// over all the rows, the logits for every decode row and for the prompts the chunk completes
/// (one per context's worth of prompt tokens, as cost_dense_parts counts a prefill step's).
Result<CostItem> cost_mixed_head(const CostContext& ctx, const Layout& layout, double chunk_per_gpu,
                                 double decode_per_gpu);

/// The attention core one rank of attention TP size `tp_size` runs for `tokens` tokens (the TP
/// group's) at `context`: the rank's query heads, MLA decode absorbed over the latent, MLA
/// prefill expanded into per-head keys and values, GQA's K/V heads split (and replicated past
/// their count). What cost_dense_parts asks the cost source and what `profile` measures.
AttentionQuery attention_core_query(const models::MoeModel& m, int tp_size, bool decode,
                                    double tokens, double context);

/// The (n, k) of every GEMM one decoder layer's attention block and dense MLP issue on a rank of
/// TP size `tp_size`, both phases (cost_dense_parts' projections; the LM head excluded): the
/// projection shapes `profile` measures.
std::vector<std::pair<int, int>> dense_gemm_shapes(const models::MoeModel& m, int tp_size);

/// Costs one layout. Errors: the layout needs more GPUs than the cluster has, a placement or
/// load that does not fit the model, or a cost source that cannot answer.
Result<LayoutCost> cost_layout(const CostContext& ctx, const Layout& layout);

}  // namespace moeplan::planner
