// CostSource: the one question the cost model asks — how long does this op with this shape take
// on this device, or this collective over these GPU groups? RooflineCosts answers from device
// and link specs; a measured source (the profiler's cost DB) answers behind the same interface.
#pragma once

#include <string>
#include <vector>

#include "models/dtype.hpp"
#include "models/result.hpp"

namespace moeplan::planner {

/// One answer: seconds, and the name of the source that produced it ("roofline", "measured").
struct CostEstimate {
  double seconds = 0.0;
  std::string source;
};

/// C[m, n] = A[m, k] · B[k, n] with A the activations and B the weights.
struct GemmQuery {
  double m = 0.0;  ///< rows (tokens); may be fractional when it is an expectation
  double n = 0.0;
  double k = 0.0;
  DType dtype = DType::kBf16;
  /// Bytes per weight element read, scales included (a quantized format: fp8 with block
  /// scales 1 + 4/128², int4 with group scales ≈ 0.5); 0: dtype's size.
  double weight_bytes = 0.0;
};

/// The probability that a group of a grouped GEMM (an expert slot) with m rows is non-empty —
/// it reads its weights and computes at least one tile. `expected` false: m are the counts
/// themselves, min(1, m) (a fractional m < 1 is non-empty with probability m, with one row when
/// it is: the measured tables' even routing). `expected` true: m is the mean of the slot's count
/// under independent routing of the step's tokens, a Poisson count: 1 − e^{−m} (16 tokens × top-8
/// over 128 experts leave 37% of the experts empty, not none). Given non-empty, the group has
/// m / occupancy rows on average.
double group_occupancy(double m, bool expected);

/// One grouped GEMM launch: group g multiplies m[g] rows by its own [k, n] weight. Groups with
/// m = 0 are skipped (their weights are not read).
struct GroupedGemmQuery {
  std::vector<double> m;
  double n = 0.0;
  double k = 0.0;
  DType dtype = DType::kBf16;
  double weight_bytes = 0.0;  ///< as GemmQuery::weight_bytes
  bool expected = false;      ///< m are expected counts (group_occupancy)
};

/// A memory-bound kernel (softmax/top-k, SiLU·mul, permute, weighted sum): bytes it reads and
/// writes in total.
struct ElementwiseQuery {
  /// "router_topk", "silu_mul", "permute", "combine_sum", "sigmoid_gate", "stage"
  std::string op;
  double bytes = 0.0;
  DType dtype = DType::kBf16;  ///< storage dtype of the activations the kernel moves
};

enum class CollectiveOp { kAllToAll, kAllToAllV, kAllGather, kAllGatherV, kAllReduce };

/// "all_to_all", "all_to_all_v", "all_gather", "all_gather_v", "all_reduce".
std::string collective_name(CollectiveOp op);

/// A collective run concurrently by several equal-sized groups (e.g. every TP lane's EP group).
/// `bytes` follows nccl-tests: the per-rank buffer size S (all-to-all: what one rank sends in
/// total; all-gather: the gathered output; all-reduce: the reduced array). The -v variants and
/// uneven all-to-alls give `matrix[i][j]` = bytes group rank i sends to group rank j (same for
/// every group); then `bytes` is its largest row sum.
struct CollectiveQuery {
  CollectiveOp op = CollectiveOp::kAllToAll;
  std::vector<std::vector<int>> groups;  ///< global GPU indices, one list per group
  double bytes = 0.0;
  std::vector<std::vector<double>> matrix;  ///< empty: the even split implied by `op`
  DType dtype = DType::kBf16;

  int group_size() const { return groups.empty() ? 0 : static_cast<int>(groups.front().size()); }
};

/// One EP rank's fused MoE kernel for one layer, as TensorRT-LLM runs it and the measured tables
/// time it: permute (expand the rank's routed pairs), gate+up grouped GEMM with SiLU, down grouped
/// GEMM, and unpermute (finalize). No router, shared expert or communication. The cost model books
/// it under `experts` and then books no separate dispatch permute (the kernel expands its rows
/// itself); the weighted top-k sum where each token lives stays in `combine`.
struct MoeFusedQuery {
  /// Tokens the tables would route over all E experts to give this rank its pairs: every EP
  /// rank's tokens, ep · (tokens of a TP group) (the tables' num_tokens: G·T for G GPUs of T
  /// tokens under attention DP and all-gather dispatch).
  double tokens = 0.0;
  /// Rows the kernel reads in and writes out when they are not `tokens`: an all-to-all dispatch
  /// (a2av, padded_a2a) delivers only the rank's routed rows. 0: `tokens` (all-gather: every
  /// gathered token passes the kernel).
  double rows_in = 0.0;
  double hidden = 0.0;  ///< H
  double inter = 0.0;   ///< the expert's full intermediate width I (a rank holds I / tp)
  int top_k = 1;
  int num_experts = 1;  ///< E, the model's routed experts
  int tp_size = 1;
  int ep_size = 1;
  std::vector<double> rows;  ///< rows per local slot of this rank (its load, padding included)
  /// rows are expected counts under independent routing (group_occupancy); false: the counts
  /// (the tables' even routing, a measured step's routing, padded buffers).
  bool expected = false;
  DType dtype = DType::kBf16;
  /// The table dtype when it is not dtype_name(dtype) (e.g. "fp8_block": fp8 with 128×128
  /// block scales); empty: dtype_name(dtype).
  std::string format;
  double weight_bytes = 0.0;  ///< as GemmQuery::weight_bytes (0: the table dtype's size)

  std::string table_dtype() const {
    return format.empty() ? std::string(dtype_name(dtype)) : format;
  }
  /// Rows per slot when the tokens are routed evenly over every expert: tokens · k / E.
  double balanced_rows() const {
    return num_experts > 0 ? tokens * top_k / static_cast<double>(num_experts) : 0.0;
  }
  /// The same query with every one of the E / ep local slots at balanced_rows().
  MoeFusedQuery balanced() const {
    MoeFusedQuery b = *this;
    b.rows.assign(static_cast<std::size_t>(ep_size > 0 ? num_experts / ep_size : 0),
                  balanced_rows());
    return b;
  }
};

/// The attention core of one layer on one rank: softmax(Q·Kᵀ)·V of `heads` query heads over
/// `kv_heads` K/V heads, between the projections (not included). Prefill: `tokens` new tokens
/// in prompts of `context` tokens, causal (a token attends to the (context + 1) / 2 tokens
/// before it on average), K and V computed in the step. Decode: `tokens` sequences of one new
/// token each, attending to `context` cached tokens whose K/V (`kv_bytes_per_token` per cached
/// token on this rank, all its heads) are read from the KV cache.
struct AttentionQuery {
  bool decode = false;
  double tokens = 0.0;
  double context = 0.0;
  double heads = 0.0;               ///< query heads on this rank
  double kv_heads = 0.0;            ///< K/V heads on this rank (MLA absorbed: 1, the shared latent)
  double qk_dim = 0.0;              ///< per head, Q·K
  double v_dim = 0.0;               ///< per head, V and the output
  double kv_bytes_per_token = 0.0;  ///< decode: KV-cache bytes read per cached token
  DType dtype = DType::kBf16;

  /// Average keys each new token attends to.
  double keys_per_token() const { return decode ? context : 0.5 * (context + 1.0); }
  /// 2·(qk_dim + v_dim) FLOPs per head per (query, key) pair: Q·Kᵀ and P·V.
  double flops() const { return 2.0 * heads * (qk_dim + v_dim) * tokens * keys_per_token(); }
  /// Bytes read and written: Q and O; decode the cached K/V, prefill the step's K/V.
  double bytes() const {
    const double b = dtype_bytes(dtype);
    const double qo = tokens * heads * (qk_dim + v_dim) * b;
    if (decode) return qo + tokens * context * kv_bytes_per_token;
    return qo + tokens * kv_heads * (qk_dim + v_dim) * b;
  }
};

/// DeepEP's two kernel families (models::Dispatcher deepep_normal, deepep_ll).
enum class EpKernelMode : std::uint8_t { kNormal, kLowLatency };
enum class EpKernelPhase : std::uint8_t { kDispatch, kCombine };
/// "normal_dispatch", "normal_combine", "ll_dispatch", "ll_combine".
std::string ep_kernel_name(EpKernelMode mode, EpKernelPhase phase);

/// The SMs DeepEP's normal kernels use unless told otherwise (deep_ep.Buffer.num_sms = 20); the
/// measured tables' rows at this count are the ones read.
inline constexpr int kDeepEpDefaultSms = 20;

/// One DeepEP dispatch or combine kernel of a layer, described by the traffic it moves: `hops`
/// run pipelined inside one kernel (normal: the inter-node hop over the rails and the NVLink
/// forward inside each node; low latency: the direct sends), after the `notify` count exchange
/// (normal dispatch only). The shape fields key measured tables (aiconfigurator's DeepEP rows).
struct EpKernelQuery {
  EpKernelMode mode = EpKernelMode::kNormal;
  EpKernelPhase phase = EpKernelPhase::kDispatch;
  std::vector<CollectiveQuery> hops;
  std::vector<CollectiveQuery> notify;  ///< empty or one count exchange, before the hops
  double tokens = 0.0;                  ///< tokens per rank (the tables' num_token)
  int hidden = 0;
  int top_k = 1;
  int num_experts = 1;
  int num_nodes = 1;  ///< nodes the EP group spans
  int ep_size = 1;
  DType dtype = DType::kBf16;
};

/// The interface every cost source implements. Answers are values; a source that cannot answer
/// (e.g. a measured source without a matching entry) returns an Error naming what is missing.
class CostSource {
 public:
  virtual ~CostSource() = default;
  /// "roofline", "measured:<db path>", ...
  virtual std::string name() const = 0;
  virtual Result<CostEstimate> gemm(const GemmQuery& q) const = 0;
  virtual Result<CostEstimate> grouped_gemm(const GroupedGemmQuery& q) const = 0;
  virtual Result<CostEstimate> elementwise(const ElementwiseQuery& q) const = 0;
  virtual Result<CostEstimate> collective(const CollectiveQuery& q) const = 0;
  /// Whether this source prices the fused MoE kernel of `table_dtype` (then the cost model asks
  /// moe_fused for a rank's experts, permute and weighted sum together). The default, false:
  /// grouped GEMMs and elementwise ops, as the CPU backend runs them.
  virtual bool has_fused_moe(const std::string& table_dtype) const {
    (void)table_dtype;
    return false;
  }
  virtual Result<CostEstimate> moe_fused(const MoeFusedQuery& q) const {
    return Error{"moe_fused (" + q.table_dtype() + "): not priced by cost source " + name()};
  }
  /// The attention core (AttentionQuery). The default: not priced (an Error naming the source).
  virtual Result<CostEstimate> attention(const AttentionQuery& q) const {
    (void)q;
    return Error{"attention: not priced by cost source " + name()};
  }
  /// A DeepEP kernel. The default: the notify collective, then the slowest of the hops (they
  /// are pipelined chunk by chunk inside one kernel), each priced by collective().
  virtual Result<CostEstimate> ep_kernel(const EpKernelQuery& q) const;
};

}  // namespace moeplan::planner
