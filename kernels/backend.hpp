// The compute backend interface: the MoE ops on spans and sizes plus a stream-like context.
// The CPU backend always exists and is the reference; the CUDA backend implements the same ops.
// Ops validate nothing the caller (the sharded layer) has already validated.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "kernels/layer_spec.hpp"
#include "models/result.hpp"

namespace moeplan::kernels {

/// Stream-like execution context of an op (the CPU backend runs synchronously on the caller's
/// thread; a GPU backend carries its stream here).
struct OpContext {
  void* stream = nullptr;
};

/// Tokens sorted by expert: `order[i]` is the pair index (token·k + slot) of the i-th row and
/// expert e's rows are [offsets[e], offsets[e+1]).
struct Permutation {
  std::vector<int> order;
  std::vector<int> offsets;  ///< size num_local_experts + 1
};

/// The ops of the backend interface, for can_implement.
enum class BackendOp : std::uint8_t {
  kRouterLogits,
  kRoute,
  kPermute,
  kExpertFfn,
  kGemm,
  kSiluMul,
  kSigmoidGate,
  kCombine,
  kSharedExpert,
  kGemmFp8Block,  ///< gemm_fp8 (OpQuery::dtype kFp8)
  kAttention,
  kRmsNorm,
  kRope,
};

/// What can_implement is asked: an op on a storage dtype.
struct OpQuery {
  BackendOp op = BackendOp::kGemm;
  DType dtype = DType::kFp32;
};

/// One part of an fp8 block-scaled weight [k][cols] (inputs × outputs) as the kernels keep it
/// (Fp8ExpertWeights): e4m3 codes at column c0 of a row-major array of row stride ld, and fp32
/// scales per [block_rows × block_cols] block, row-major by block over the part
/// (⌈cols/block_cols⌉ blocks per block row; partial edge blocks).
struct Fp8Part {
  const std::uint8_t* codes = nullptr;
  int ld = 0;
  int c0 = 0;
  int cols = 0;
  const float* scales = nullptr;
  int block_rows = 0;
  int block_cols = 0;
};

/// The attention core's shape: `batch` sequences, each with `q_len` new query tokens attending
/// causally to `kv_len` keys, the last q_len of which are the new tokens' own (query i of a
/// sequence sees keys [0, kv_len − q_len + i]): prefill a prompt (q_len = kv_len), decode one
/// token over its cache (q_len = 1). `heads` query heads share `kv_heads` K/V heads in
/// consecutive groups (GQA; MHA kv_heads = heads; MLA absorbed decode one latent head whose
/// first v_dim values are also V).
struct AttentionShape {
  int batch = 1;
  int q_len = 1;
  int kv_len = 1;
  int heads = 1;
  int kv_heads = 1;
  int qk_dim = 1;
  int v_dim = 1;
  float scale = 1.0F;  ///< applied to Q·Kᵀ before the softmax (1/√d of the unabsorbed head)

  long q_rows() const { return static_cast<long>(batch) * q_len; }
  long kv_rows() const { return static_cast<long>(batch) * kv_len; }
  /// Query–key pairs summed over the heads (what the FLOPs scale with: 2·(qk + v) each).
  double pairs() const {
    const double per_seq = q_len * (kv_len - q_len) + 0.5 * q_len * (q_len + 1.0);
    return static_cast<double>(batch) * heads * per_seq;
  }
  double flops() const { return 2.0 * (qk_dim + v_dim) * pairs(); }
  /// Elements of q, k, v and out.
  std::size_t q_size() const { return zu(q_rows()) * zu(heads) * zu(qk_dim); }
  std::size_t k_size() const { return zu(kv_rows()) * zu(kv_heads) * zu(qk_dim); }
  std::size_t v_size() const { return zu(kv_rows()) * zu(kv_heads) * zu(v_dim); }
  std::size_t out_size() const { return zu(q_rows()) * zu(heads) * zu(v_dim); }
  /// Empty when the shape is valid, else what is wrong: positive sizes, q_len ≤ kv_len, heads
  /// a multiple of kv_heads, a positive finite scale.
  std::string problem() const {
    if (batch < 1 || q_len < 1 || kv_len < 1 || heads < 1 || kv_heads < 1 || qk_dim < 1 ||
        v_dim < 1) {
      return "expected positive batch, q_len, kv_len, heads, kv_heads, qk_dim and v_dim";
    }
    if (q_len > kv_len) {
      return "q_len " + std::to_string(q_len) + " exceeds kv_len " + std::to_string(kv_len) +
             " (the new tokens are among the keys)";
    }
    if (heads % kv_heads != 0) {
      return "heads " + std::to_string(heads) + " not a multiple of kv_heads " +
             std::to_string(kv_heads);
    }
    if (!(scale > 0.0F && scale < 3.0e38F)) return "expected a positive finite scale";
    return {};
  }

 private:
  static std::size_t zu(long v) { return static_cast<std::size_t>(v); }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  /// Seconds the device has spent in the ops' own kernels since the backend was made (a
  /// running total: callers time a span by the difference): a GPU backend times each op's
  /// kernels with events, not its host copies and conversions around them; a backend without a
  /// device clock (the CPU backend: its ops are the caller's wall time) returns nothing.
  virtual std::optional<double> device_seconds() const { return std::nullopt; }

  /// The device the ops run on as its driver names it (e.g. "NVIDIA H200"); empty for the
  /// host.
  virtual std::string device_name() const { return {}; }

  /// Whether this backend runs `query` (CUTLASS's can_implement): OK, or an Error saying why
  /// not, which the profiler records as not_supported rather than failing the point. Calling an
  /// op this refuses is a caller error.
  virtual Status can_implement(const OpQuery& query) const = 0;

  /// logits[T][E] = x[T][H] · w[H][E] in fp32, each row computed in an order independent of T.
  virtual void router_logits(const OpContext& ctx, std::span<const float> x, int num_tokens,
                             int hidden, std::span<const float> w, int num_experts,
                             std::span<float> logits) = 0;

  /// Scoring, top-k selection and weights per the router semantics: ids[T][k], weights[T][k].
  virtual void route(const OpContext& ctx, const models::RouterSpec& router,
                     std::span<const float> logits, std::span<const float> score_bias,
                     int num_tokens, int num_experts, int top_k, std::span<int> ids,
                     std::span<float> weights) = 0;

  /// Sorts the pairs whose expert lies in [first_expert, first_expert + num_local) by expert
  /// (stable: pairs keep their order within an expert); other pairs are dropped.
  virtual Permutation permute(const OpContext& ctx, std::span<const int> pair_experts,
                              int first_expert, int num_local) = 0;

  /// Grouped expert FFN: for local expert j, rows [offsets[j], offsets[j+1]) of `rows` [*, H]
  /// go through gate/up, SiLU(gate)·up (stored in `dtype`), and down; out[*, H] gets fp32
  /// partial sums (a tp-slice when the weights are one).
  virtual void expert_ffn(const OpContext& ctx, std::span<const float> rows,
                          std::span<const int> offsets, std::span<const ExpertWeights> experts,
                          int hidden, DType dtype, std::span<float> out) = 0;

  /// c[m][n] = a[m][k] · b[k][n] accumulated in fp32 (a and b hold values of `dtype`), stored
  /// in `out_dtype` (fp32: unrounded): the expert MLP's GEMMs as the backend runs them.
  virtual void gemm(const OpContext& ctx, std::span<const float> a, int m, int k,
                    std::span<const float> b, int n, DType dtype, DType out_dtype,
                    std::span<float> c) = 0;

  /// The fp8 scaled GEMM as the expert MLP runs it (DeepSeek-V3's block recipe; per-channel
  /// and per-tensor weight scales are blocks of one column or of the whole part):
  /// c[m][Σ cols] = q(a) · [part 0 | part 1 | …] with a [m][k] quantized to e4m3 as `act` says
  /// (on a copy), each part decoded from its codes and block scales, fp32 accumulation, c
  /// unrounded. Only where can_implement({kGemmFp8Block, kFp8}) is OK.
  virtual void gemm_fp8(const OpContext& ctx, std::span<const float> a, int m, int k,
                        const Fp8Act& act, std::span<const Fp8Part> parts, std::span<float> c) = 0;
  /// How gemm_fp8 accumulates for activations quantized as `act` and weight blocks of
  /// block_rows × block_cols (0 × 0: channel or tensor scales): fp32 throughout unless a
  /// backend says otherwise (the CUDA backend's fp8 tensor cores).
  virtual Fp8Accumulation fp8_accumulation(const Fp8Act& act, int block_rows,
                                           int block_cols) const {
    (void)act;
    (void)block_rows;
    (void)block_cols;
    return {};
  }
  /// The times this backend has run a stand-in rather than its kernel — the CUDA backend's fp8
  /// GEMM emulated in fp32 where cuBLASLt has no fp8 algorithm — and why, the last time: the
  /// result is right, the time is not the kernel's (the profiler records no time for a point
  /// during which the count grew).
  struct Fallbacks {
    std::uint64_t count = 0;
    std::string last;
  };
  virtual Fallbacks fallbacks() const { return {}; }
  /// SiLU-and-mul of gate/up rows [rows][2·width]: act[r][c] = round(SiLU(round(gu[r][c])) ·
  /// round(gu[r][width + c])) in `dtype`.
  virtual void silu_mul(const OpContext& ctx, std::span<const float> gate_up, int rows, int width,
                        DType dtype, std::span<float> act) = 0;

  /// The shared expert's gate: out[t][:] *= sigmoid(x[t] · gate) for x [T][H] in fp32.
  virtual void sigmoid_gate(const OpContext& ctx, std::span<const float> x, int num_tokens,
                            int hidden, std::span<const float> gate, std::span<float> out) = 0;

  /// Combine: out[t] = round_dtype(Σ_j weights[t·k+j] · y[pair_row[t·k+j]] + shared[t]), the
  /// sum taken in fp32 in the order j = 0..k−1, then the shared row (`shared` may be empty).
  virtual void combine(const OpContext& ctx, std::span<const float> y,
                       std::span<const int> pair_row, std::span<const float> weights,
                       std::span<const float> shared, int num_tokens, int top_k, int hidden,
                       DType dtype, std::span<float> out) = 0;

  /// The attention core: out[q_rows][heads][v_dim] = softmax(scale · Q·Kᵀ, causal) · V per
  /// sequence and head, for q [q_rows][heads][qk_dim], k [kv_rows][kv_heads][qk_dim] and
  /// v [kv_rows][kv_heads][v_dim] holding values of `dtype`: scores and softmax in fp32, the
  /// probabilities rounded to `dtype` before P·V (as flash kernels feed their second GEMM),
  /// fp32 accumulation, out stored in `dtype`.
  virtual void attention(const OpContext& ctx, const AttentionShape& shape,
                         std::span<const float> q, std::span<const float> k,
                         std::span<const float> v, DType dtype, std::span<float> out) = 0;

  /// RMSNorm of `rows` rows of `width` values of `dtype`, read with `in_ld` (≥ width) floats
  /// between rows (MLA's latent is the first kv_lora_rank values of each kv_a row): out =
  /// x / √(mean(x²) + eps) · weight in fp32, written contiguous [rows][width] in `dtype`
  /// (kernels/norm_rope.hpp).
  virtual void rms_norm(const OpContext& ctx, std::span<const float> x, int rows, int width,
                        int in_ld, std::span<const float> weight, float eps, DType dtype,
                        std::span<float> out) = 0;

  /// NeoX-style rotary embedding of `rows` tokens × `heads` heads of `head_dim`, read with
  /// `in_ld` floats between rows (a part of a fused projection's output), the first `rot_dim`
  /// values of each head rotated by the fp32 cos/sin cache row of the token's position
  /// (rope_cos_sin_cache), written contiguous [rows][heads][head_dim] in `dtype`.
  virtual void rope(const OpContext& ctx, std::span<const float> in, int in_ld, int rows, int heads,
                    int head_dim, int rot_dim, std::span<const int> positions,
                    std::span<const float> cos_sin, DType dtype, std::span<float> out) = 0;

  /// Shared expert on every token: out[T][H] = (sigmoid(x·gate) if gated) · MLP(x), fp32.
  /// With a tp-slice, the caller sums the partials over tp; `gate` may be empty.
  virtual void shared_expert(const OpContext& ctx, std::span<const float> x, int num_tokens,
                             int hidden, const ExpertWeights& w, std::span<const float> gate,
                             DType dtype, std::span<float> out) = 0;
};

/// The CPU backend (Eigen GEMMs, fp32 accumulation).
std::unique_ptr<Backend> make_cpu_backend();

/// The backend named `name` ("cpu" or "cuda"); an error says why one is not available (not
/// compiled in, no usable device). `device` selects the CUDA device.
Result<std::unique_ptr<Backend>> make_backend(const std::string& name, int device = 0);

}  // namespace moeplan::kernels
