// The attention block and the decoder layer as one measured case.
#include "profiler/decoder_block.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>

#include "kernels/attention.hpp"
#include "kernels/moe_layer.hpp"
#include "kernels/norm_rope.hpp"
#include "kernels/reference.hpp"
#include "profiler/layer_bench.hpp"
#include "profiler/op_common.hpp"

namespace moeplan::profiler {

std::string decoder_block_problem(const models::MoeModel& m) {
  if (m.attention.num_heads < 1) {
    return m.name + " gives no attention heads (num_attention_heads)";
  }
  const auto& a = m.attention;
  if (a.mla) {
    if (a.kv_lora_rank < 1 || a.qk_nope_head_dim < 1 || a.v_head_dim < 1) {
      return m.name + ": MLA needs kv_lora_rank, qk_nope_head_dim and v_head_dim ≥ 1";
    }
    if (a.qk_rope_head_dim < 2 || a.qk_rope_head_dim % 2 != 0) {
      return m.name + ": MLA's qk_rope_head_dim " + std::to_string(a.qk_rope_head_dim) +
             " leaves no pairs to rotate; expected an even number ≥ 2";
    }
    return {};
  }
  if (a.head_dim < 2 || a.head_dim % 2 != 0) {
    return m.name + ": head_dim " + std::to_string(a.head_dim) +
           " leaves no pairs to rotate; expected an even number ≥ 2";
  }
  return {};
}

namespace {

/// Up to `n` indices spread over [0, count).
std::vector<long> spread(long count, long n) {
  std::vector<long> out;
  const long k = std::min(count, n);
  for (long i = 0; i < k; ++i) out.push_back(k > 1 ? i * (count - 1) / (k - 1) : 0);
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

/// Weights of a [k][n] projection: uniform with unit output variance on unit inputs.
std::vector<float> projection(DType dt, int k, int n, std::uint32_t stream) {
  const auto a = static_cast<float>(std::sqrt(3.0 / std::max(1, k)));
  return random_values(dt, usz(k) * usz(n), stream, -a, a);
}

/// What the GQA and MLA blocks share: the MoE layer after the block, the per-op checks and the
/// cos/sin cache of the token positions.
class BlockCase : public DecoderCase {
 public:
  BlockCase(const models::MoeModel& m, DType dtype, const DecoderCaseShape& sh,
            const kernels::LayerSpec* moe, kernels::Communicator* world, kernels::Backend& backend,
            int rot_dim)
      : dtype_(dtype), backend_(backend) {
    h_ = static_cast<int>(m.hidden_size);
    eps_ = static_cast<float>(m.attention.rms_norm_eps);
    batch_ = sh.decode ? sh.tokens : 1;
    q_len_ = sh.decode ? 1 : sh.tokens;
    kv_len_ = sh.context;
    t_ = batch_ * q_len_;
    rot_ = rot_dim;
    x_ = random_values(dtype, usz(t_) * usz(h_), 31, -2.0F, 2.0F);
    w_in_ = random_values(DType::kFp32, usz(h_), 32, 0.5F, 1.5F);
    w_post_ = random_values(DType::kFp32, usz(h_), 33, 0.5F, 1.5F);
    cache_ = kernels::rope_cos_sin_cache(kv_len_, rot_dim, m.attention.rope_theta);
    positions_.resize(usz(t_));
    for (int b = 0; b < batch_; ++b) {
      for (int t = 0; t < q_len_; ++t) {
        positions_[usz(b) * usz(q_len_) + usz(t)] = kv_len_ - q_len_ + t;
      }
    }
    xn_.resize(usz(t_) * usz(h_));
    y_.resize(usz(t_) * usz(h_));
    hn_.resize(usz(t_) * usz(h_));
    if (moe != nullptr && world != nullptr) {
      spec_ = *moe;
      layout_ = kernels::Layout::of(1, 1);
      groups_ = kernels::make_groups(*world, layout_);
      weights_ = kernels::make_rank_weights(*spec_, layout_, world->rank());
    }
  }

  Check verify() override {
    for (const OpCheck& c : check_ops(8)) {
      if (!c.passed) return {false, c.detail};
    }
    return {};
  }

  std::vector<double> routed_counts() const override {
    if (!spec_ || !ran_) return {};
    return routed_counts_of(*spec_, hn_, t_);
  }

 protected:
  /// The block's end: the post-attention norm of y_ (the output projection's rows), the
  /// fault verify() must catch, and the MoE layer.
  void finish() {
    backend_.rms_norm(kernels::OpContext{}, y_, t_, h_, h_, w_post_, eps_, dtype_, hn_);
    if (fault_) hn_[usz(h_) / 2] = 2.0F * hn_[usz(h_) / 2] + 1.0F;  // row 0: always checked
    if (spec_) {
      out_ = kernels::moe_forward(backend_, groups_, *spec_, layout_, weights_, hn_, t_);
    }
    ran_ = true;
  }

  /// Bytes of `vectors`' floats.
  static std::size_t float_bytes(std::initializer_list<const std::vector<float>*> vectors) {
    std::size_t n = 0;
    for (const auto* v : vectors) n += v->size();
    return n * sizeof(float);
  }

  /// footprint_bytes() of the block's shared buffers and the MoE layer's weights.
  std::size_t shared_footprint() const {
    std::size_t n = float_bytes({&x_, &w_in_, &w_post_, &cache_, &xn_, &y_, &hn_, &out_});
    if (spec_) n += weight_bytes(weights_);
    return n;
  }

  /// The checks of the block's end (post-attention norm, MoE layer) appended to `out`.
  void check_finish(std::vector<OpCheck>& out, long rows) const {
    out.push_back(check_norm(y_, h_, h_, w_post_, hn_, "post-attention norm", rows));
    if (spec_) out.push_back(check_moe(rows));
  }

  /// Adds one compared value to `c`; `where` names it when it is the first past its bound.
  template <class Where>
  static void note(OpCheck& c, double got, double ref, double bound, const Where& where) {
    const double diff = std::abs(got - ref);
    ++c.checked;
    if (diff <= bound) {
      c.max_abs_diff = std::max(c.max_abs_diff, diff);
      c.max_bound_use = std::max(c.max_bound_use, bound > 0.0 ? diff / bound : 0.0);
      return;
    }
    c.max_abs_diff = std::isfinite(diff) ? std::max(c.max_abs_diff, diff) : diff;
    c.max_bound_use = bound > 0.0 && std::isfinite(diff) ? std::max(c.max_bound_use, diff / bound)
                                                         : std::numeric_limits<double>::infinity();
    if (c.passed) {
      c.passed = false;
      c.detail = c.op + " " + where() + " = " + std::to_string(got) + ", expected " +
                 std::to_string(ref) + " ± " + std::to_string(bound);
    }
  }

  static std::vector<long> pick(long count, long rows) {
    return spread(count, rows > 0 ? rows : count);
  }

  /// RMSNorm of `out.size() / width` rows read with `in_ld` between them.
  OpCheck check_norm(std::span<const float> in, int width, int in_ld, std::span<const float> w,
                     std::span<const float> out, const std::string& what, long rows) const {
    OpCheck c;
    c.op = what;
    const long total = static_cast<long>(out.size() / usz(width));
    for (const long r : pick(total, rows)) {
      const auto row = in.subspan(usz(r) * usz(in_ld), usz(width));
      const auto ref = kernels::rms_norm_reference(row, 1, width, w, eps_, dtype_);
      for (int i = 0; i < width; ++i) {
        note(c, out[usz(r) * usz(width) + usz(i)], ref.out[usz(i)], ref.bound[usz(i)],
             [&] { return "row " + std::to_string(r) + " value " + std::to_string(i); });
      }
    }
    return c;
  }

  /// out [m][n] = a [m][k] · b [k][n] (out stored in the dtype), `rows` of its rows whole.
  /// `c` accumulates across calls (MLA's per-head GEMMs are one op); `label` names a row.
  void check_gemm_into(OpCheck& c, std::span<const float> a, int k, std::span<const float> b, int n,
                       std::span<const float> out, long rows, const std::string& label = {}) const {
    const long m = static_cast<long>(out.size() / usz(n));
    std::vector<double> ref(usz(n)), abs_sum(usz(n));
    for (const long i : pick(m, rows)) {
      std::fill(ref.begin(), ref.end(), 0.0);
      std::fill(abs_sum.begin(), abs_sum.end(), 0.0);
      for (int p = 0; p < k; ++p) {
        const double x = a[usz(i) * usz(k) + usz(p)];
        const float* brow = b.data() + usz(p) * usz(n);
        for (int j = 0; j < n; ++j) {
          const double t = x * brow[j];
          ref[usz(j)] += t;
          abs_sum[usz(j)] += std::abs(t);
        }
      }
      for (int j = 0; j < n; ++j) {
        note(c, out[usz(i) * usz(n) + usz(j)], ref[usz(j)],
             sum_tolerance(dtype_, k, abs_sum[usz(j)], ref[usz(j)]),
             [&] { return label + "C[" + std::to_string(i) + "," + std::to_string(j) + "]"; });
      }
    }
  }

  OpCheck check_gemm(std::span<const float> a, int k, std::span<const float> b, int n,
                     std::span<const float> out, const std::string& what, long rows) const {
    OpCheck c;
    c.op = what;
    check_gemm_into(c, a, k, b, n, out, rows);
    return c;
  }

  /// RoPE of `heads` heads of `head_dim` (the first rot_ rotated) read from `in` with `in_ld`
  /// between tokens, written contiguous to `out`.
  OpCheck check_rope(std::span<const float> in, int in_ld, int heads, int head_dim,
                     std::span<const float> out, const std::string& what, long rows) const {
    OpCheck c;
    c.op = what;
    const std::size_t row_out = usz(heads) * usz(head_dim);
    for (const long r : pick(t_, rows)) {
      const int pos = positions_[usz(r)];
      const auto ref =
          kernels::rope_reference(in.subspan(usz(r) * usz(in_ld)), in_ld, 1, heads, head_dim, rot_,
                                  std::span<const int>(&pos, 1), cache_, dtype_);
      for (std::size_t i = 0; i < row_out; ++i) {
        note(c, out[usz(r) * row_out + i], ref.out[i], ref.bound[i],
             [&] { return "row " + std::to_string(r) + " value " + std::to_string(i); });
      }
    }
    return c;
  }

  OpCheck check_attention(const kernels::AttentionShape& s, std::span<const float> q,
                          std::span<const float> k, std::span<const float> v,
                          std::span<const float> out, long rows) const {
    OpCheck c;
    c.op = "attention core";
    std::vector<double> ref(usz(s.v_dim)), bound(usz(s.v_dim));
    for (const long row : pick(s.q_rows(), rows > 0 ? std::max(1L, rows * 3 / 4) : 0)) {
      const int b = static_cast<int>(row / s.q_len), t = static_cast<int>(row % s.q_len);
      for (const long h : pick(s.heads, rows > 0 ? 3 : 0)) {
        kernels::attention_reference_row(s, q, k, v, dtype_, b, t, static_cast<int>(h), ref, bound);
        for (int i = 0; i < s.v_dim; ++i) {
          note(c, out[(usz(row) * usz(s.heads) + usz(h)) * usz(s.v_dim) + usz(i)], ref[usz(i)],
               bound[usz(i)], [&] {
                 return "sequence " + std::to_string(b) + " token " + std::to_string(t) + " head " +
                        std::to_string(h) + " value " + std::to_string(i);
               });
        }
      }
    }
    return c;
  }

  OpCheck check_moe(long rows) const {
    OpCheck c;
    c.op = "MoE layer";
    // Tokens route and compute independently: the reference of the chosen tokens' rows.
    const auto tokens = pick(t_, rows);
    std::vector<float> in;
    for (const long t : tokens) {
      in.insert(in.end(), hn_.begin() + static_cast<std::ptrdiff_t>(usz(t) * usz(h_)),
                hn_.begin() + static_cast<std::ptrdiff_t>(usz(t + 1) * usz(h_)));
    }
    const int n = static_cast<int>(tokens.size());
    const kernels::ReferenceOutput ref = kernels::reference_forward(
        *spec_, in, n,
        {kernels::sends_fp8(*spec_, layout_.dispatcher), kernels::ref_tp_slices(*spec_, 1),
         kernels::fp8_accumulation_of(backend_, *spec_)});
    const std::vector<float>& expected = kernels::reference_of(ref, *spec_, layout_.dispatcher);
    const std::vector<float>& bound = kernels::bound_of(ref, *spec_, layout_.dispatcher);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < h_; ++j) {
        const std::size_t e = usz(i) * usz(h_) + usz(j);
        note(c, out_[usz(tokens[usz(i)]) * usz(h_) + usz(j)], expected[e], bound[e], [&] {
          return "token " + std::to_string(tokens[usz(i)]) + " value " + std::to_string(j);
        });
      }
    }
    return c;
  }

  DType dtype_;
  kernels::Backend& backend_;
  int h_ = 0, rot_ = 0;
  bool ran_ = false;
  float eps_ = 1e-6F;
  int batch_ = 1, q_len_ = 1, kv_len_ = 1, t_ = 1;
  std::vector<float> x_, w_in_, w_post_, cache_, xn_, y_, hn_, out_;
  std::vector<int> positions_;
  std::optional<kernels::LayerSpec> spec_;
  kernels::Layout layout_;
  kernels::RankGroups groups_;
  kernels::RankWeights weights_;
};

class GqaCase final : public BlockCase {
 public:
  GqaCase(const models::MoeModel& m, DType dtype, const DecoderCaseShape& sh,
          const kernels::LayerSpec* moe, kernels::Communicator* world, kernels::Backend& backend)
      : BlockCase(m, dtype, sh, moe, world, backend, m.attention.head_dim) {
    const auto& a = m.attention;
    nh_ = a.num_heads;
    nkv_ = a.num_kv_heads;
    hd_ = a.head_dim;
    qk_norm_ = a.qk_norm;
    n_qkv_ = (nh_ + 2 * nkv_) * hd_;
    shape_ = {batch_, q_len_, kv_len_, nh_,
              nkv_,   hd_,    hd_,     1.0F / std::sqrt(static_cast<float>(hd_))};
    w_qnorm_ = random_values(DType::kFp32, usz(hd_), 34, 0.5F, 1.5F);
    w_knorm_ = random_values(DType::kFp32, usz(hd_), 35, 0.5F, 1.5F);
    w_qkv_ = projection(dtype, h_, n_qkv_, 36);
    w_o_ = projection(dtype, nh_ * hd_, h_, 37);
    // K/V: the whole prompt's (prefill), or each sequence's cache of kv_len − 1 earlier tokens
    // with the new token's row written by the step (decode).
    k_ = random_values(dtype, shape_.k_size(), 38, -2.0F, 2.0F);
    v_ = random_values(dtype, shape_.v_size(), 39, -2.0F, 2.0F);
    qkv_.resize(usz(t_) * usz(n_qkv_));
    q_rot_.resize(shape_.q_size());
    k_rot_.resize(usz(t_) * usz(nkv_) * usz(hd_));
    q_.resize(shape_.q_size());
    k_new_.resize(k_rot_.size());
    attn_.resize(shape_.out_size());
  }

  void run() override {
    const kernels::OpContext ctx{};
    const std::size_t kv_row = usz(nkv_) * usz(hd_);
    backend_.rms_norm(ctx, x_, t_, h_, h_, w_in_, eps_, dtype_, xn_);
    backend_.gemm(ctx, xn_, t_, h_, w_qkv_, n_qkv_, dtype_, dtype_, qkv_);
    const std::span<const float> qkv(qkv_);
    backend_.rope(ctx, qkv, n_qkv_, t_, nh_, hd_, hd_, positions_, cache_, dtype_, q_rot_);
    backend_.rope(ctx, qkv.subspan(usz(nh_) * usz(hd_)), n_qkv_, t_, nkv_, hd_, hd_, positions_,
                  cache_, dtype_, k_rot_);
    const std::vector<float>* q = &q_rot_;
    const std::vector<float>* k_new = &k_rot_;
    if (qk_norm_) {
      backend_.rms_norm(ctx, q_rot_, t_ * nh_, hd_, hd_, w_qnorm_, eps_, dtype_, q_);
      backend_.rms_norm(ctx, k_rot_, t_ * nkv_, hd_, hd_, w_knorm_, eps_, dtype_, k_new_);
      q = &q_;
      k_new = &k_new_;
    }
    // The new tokens' keys and values into K/V: the prompt's rows (prefill), each sequence's
    // last row (decode).
    for (int b = 0; b < batch_; ++b) {
      for (int t = 0; t < q_len_; ++t) {
        const std::size_t row = usz(b) * usz(q_len_) + usz(t);
        const std::size_t dst = (usz(b) * usz(kv_len_) + usz(kv_len_ - q_len_ + t)) * kv_row;
        std::memcpy(k_.data() + dst, k_new->data() + row * kv_row, kv_row * sizeof(float));
        std::memcpy(v_.data() + dst, qkv_.data() + row * usz(n_qkv_) + usz(nh_ + nkv_) * usz(hd_),
                    kv_row * sizeof(float));
      }
    }
    backend_.attention(ctx, shape_, *q, k_, v_, dtype_, attn_);
    backend_.gemm(ctx, attn_, t_, nh_ * hd_, w_o_, h_, dtype_, dtype_, y_);
    finish();
  }

  std::vector<OpCheck> check_ops(long rows) override {
    run();
    std::vector<OpCheck> out;
    const std::span<const float> qkv(qkv_);
    out.push_back(check_norm(x_, h_, h_, w_in_, xn_, "input norm", rows));
    out.push_back(check_gemm(xn_, h_, w_qkv_, n_qkv_, qkv_, "q/k/v projection", rows));
    out.push_back(check_rope(qkv, n_qkv_, nh_, hd_, q_rot_, "RoPE q", rows));
    out.push_back(
        check_rope(qkv.subspan(usz(nh_) * usz(hd_)), n_qkv_, nkv_, hd_, k_rot_, "RoPE k", rows));
    if (qk_norm_) {
      out.push_back(check_norm(q_rot_, hd_, hd_, w_qnorm_, q_, "q norm", rows));
      out.push_back(check_norm(k_rot_, hd_, hd_, w_knorm_, k_new_, "k norm", rows));
    }
    out.push_back(check_attention(shape_, qk_norm_ ? q_ : q_rot_, k_, v_, attn_, rows));
    out.push_back(check_gemm(attn_, nh_ * hd_, w_o_, h_, y_, "output projection", rows));
    check_finish(out, rows);
    return out;
  }

  std::size_t footprint_bytes() const override {
    return shared_footprint() + float_bytes({&w_qnorm_, &w_knorm_, &w_qkv_, &w_o_, &k_, &v_, &qkv_,
                                             &q_rot_, &k_rot_, &q_, &k_new_, &attn_});
  }

 private:
  int nh_ = 0, nkv_ = 0, hd_ = 0, n_qkv_ = 0;
  bool qk_norm_ = false;
  kernels::AttentionShape shape_;
  std::vector<float> w_qnorm_, w_knorm_, w_qkv_, w_o_;
  std::vector<float> k_, v_, qkv_, q_rot_, k_rot_, q_, k_new_, attn_;
};

/// DeepSeek's multi-head latent attention on one rank of attention TP 1, as SGLang and vLLM run
/// it: input norm; q down (q_lora_rank), its norm, q up to every head's nope + rope query (or q
/// straight up without a q LoRA); kv_a down to the latent and the shared rope key; the latent's
/// norm (read in place from kv_a's rows); RoPE on the rope key and on the query's rope part.
/// Each head's query holds its rope part first here ([rope | nope], the q up projection's
/// columns permuted: the same GEMM), so RoPE writes whole query heads — what the frameworks'
/// in-place rope plus their q assembly copy move. Then
/// - prefill (expanded): kv_b up to every head's nope key and value, keys assembled [rope key |
///   nope key] per head and values gathered contiguous, the latent and rope key stored as the
///   KV cache, multi-head attention;
/// - decode (absorbed): each head's nope query through its W_UK into the latent (one GEMM per
///   head, as the frameworks' batched GEMM), the query [latent | rope] attending to the cached
///   [latent | rope key] shared by every head (the new token's appended), each head's output
///   through its W_UV (one GEMM per head);
/// and the output projection and post-attention norm. The copies between the ops are what the
/// cost model prices as MLA's `stage` pass.
class MlaCase final : public BlockCase {
 public:
  MlaCase(const models::MoeModel& m, DType dtype, const DecoderCaseShape& sh,
          const kernels::LayerSpec* moe, kernels::Communicator* world, kernels::Backend& backend)
      : BlockCase(m, dtype, sh, moe, world, backend, m.attention.qk_rope_head_dim) {
    const auto& a = m.attention;
    decode_ = sh.decode;
    nh_ = a.num_heads;
    nope_ = a.qk_nope_head_dim;
    v_ = a.v_head_dim;
    lora_ = a.kv_lora_rank;
    q_lora_ = a.q_lora_rank;
    qk_ = nope_ + rot_;
    const float scale = 1.0F / std::sqrt(static_cast<float>(qk_));
    if (q_lora_ > 0) {
      w_qa_ = projection(dtype, h_, q_lora_, 40);
      w_qa_norm_ = random_values(DType::kFp32, usz(q_lora_), 41, 0.5F, 1.5F);
      w_qb_ = projection(dtype, q_lora_, nh_ * qk_, 42);
      qa_.resize(usz(t_) * usz(q_lora_));
      qan_.resize(qa_.size());
    } else {
      w_qb_ = projection(dtype, h_, nh_ * qk_, 42);
    }
    w_kva_ = projection(dtype, h_, lora_ + rot_, 43);
    w_kv_norm_ = random_values(DType::kFp32, usz(lora_), 44, 0.5F, 1.5F);
    w_o_ = projection(dtype, nh_ * v_, h_, 45);
    q_.resize(usz(t_) * usz(nh_) * usz(qk_));
    q_rot_.resize(q_.size());
    kva_.resize(usz(t_) * usz(lora_ + rot_));
    c_.resize(usz(t_) * usz(lora_));
    k_pe_.resize(usz(t_) * usz(rot_));
    o_in_.resize(usz(t_) * usz(nh_) * usz(v_));
    if (decode_) {
      shape_ = {batch_, 1, kv_len_, nh_, 1, lora_ + rot_, lora_, scale};
      // The cached latent + rope key of kv_len − 1 earlier tokens per sequence, and the latent
      // again as V (the attention op reads V on its own; FlashMLA reads it from the key rows).
      k_ = random_values(dtype, shape_.k_size(), 46, -2.0F, 2.0F);
      vv_ = random_values(dtype, shape_.v_size(), 47, -2.0F, 2.0F);
      // W_UK [nh][nope][lora] and W_UV [nh][lora][v] (kv_b_proj split per head), head-major.
      w_uk_ = projection(dtype, nope_, nh_ * lora_, 48);
      w_uv_ = projection(dtype, lora_, nh_ * v_, 49);
      attn_.resize(shape_.out_size());
      // The per-head GEMMs' inputs and outputs, head-major.
      qn_.resize(usz(nh_) * usz(t_) * usz(nope_));
      ql_.resize(usz(nh_) * usz(t_) * usz(lora_));
      q_abs_.resize(shape_.q_size());
      an_.resize(usz(nh_) * usz(t_) * usz(lora_));
      ov_.resize(usz(nh_) * usz(t_) * usz(v_));
    } else {
      shape_ = {1, t_, t_, nh_, nh_, qk_, v_, scale};
      w_kvb_ = projection(dtype, lora_, nh_ * (nope_ + v_), 50);  // per head [nope key | value]
      kv_.resize(usz(t_) * usz(nh_) * usz(nope_ + v_));
      k_ = std::vector<float>(shape_.k_size());
      vv_ = std::vector<float>(shape_.v_size());
      latent_cache_.resize(usz(t_) * usz(lora_ + rot_));
    }
  }

  void run() override {
    const kernels::OpContext ctx{};
    const int kva_ld = lora_ + rot_;
    backend_.rms_norm(ctx, x_, t_, h_, h_, w_in_, eps_, dtype_, xn_);
    if (q_lora_ > 0) {
      backend_.gemm(ctx, xn_, t_, h_, w_qa_, q_lora_, dtype_, dtype_, qa_);
      backend_.rms_norm(ctx, qa_, t_, q_lora_, q_lora_, w_qa_norm_, eps_, dtype_, qan_);
      backend_.gemm(ctx, qan_, t_, q_lora_, w_qb_, nh_ * qk_, dtype_, dtype_, q_);
    } else {
      backend_.gemm(ctx, xn_, t_, h_, w_qb_, nh_ * qk_, dtype_, dtype_, q_);
    }
    backend_.gemm(ctx, xn_, t_, h_, w_kva_, kva_ld, dtype_, dtype_, kva_);
    backend_.rms_norm(ctx, kva_, t_, lora_, kva_ld, w_kv_norm_, eps_, dtype_, c_);
    const std::span<const float> kva(kva_);
    backend_.rope(ctx, kva.subspan(usz(lora_)), kva_ld, t_, 1, rot_, rot_, positions_, cache_,
                  dtype_, k_pe_);
    backend_.rope(ctx, q_, nh_ * qk_, t_, nh_, qk_, rot_, positions_, cache_, dtype_, q_rot_);
    if (decode_) {
      run_absorbed(ctx);
    } else {
      run_expanded(ctx);
    }
    backend_.gemm(ctx, o_in_, t_, nh_ * v_, w_o_, h_, dtype_, dtype_, y_);
    finish();
  }

  std::vector<OpCheck> check_ops(long rows) override {
    run();
    std::vector<OpCheck> out;
    const int kva_ld = lora_ + rot_;
    out.push_back(check_norm(x_, h_, h_, w_in_, xn_, "input norm", rows));
    if (q_lora_ > 0) {
      out.push_back(check_gemm(xn_, h_, w_qa_, q_lora_, qa_, "q down projection", rows));
      out.push_back(check_norm(qa_, q_lora_, q_lora_, w_qa_norm_, qan_, "q latent norm", rows));
      out.push_back(check_gemm(qan_, q_lora_, w_qb_, nh_ * qk_, q_, "q up projection", rows));
    } else {
      out.push_back(check_gemm(xn_, h_, w_qb_, nh_ * qk_, q_, "q projection", rows));
    }
    out.push_back(check_gemm(xn_, h_, w_kva_, kva_ld, kva_, "kv down projection", rows));
    out.push_back(check_norm(kva_, lora_, kva_ld, w_kv_norm_, c_, "kv latent norm", rows));
    out.push_back(check_rope(std::span<const float>(kva_).subspan(usz(lora_)), kva_ld, 1, rot_,
                             k_pe_, "RoPE k", rows));
    out.push_back(check_rope(q_, nh_ * qk_, nh_, qk_, q_rot_, "RoPE q", rows));
    if (decode_) {
      OpCheck uk;
      uk.op = "q through W_UK";
      OpCheck uv;
      uv.op = "latent through W_UV";
      for (const long hd : pick(nh_, rows > 0 ? 3 : 0)) {
        const auto h = usz(hd);
        const std::string label = "head " + std::to_string(hd) + " ";
        check_gemm_into(uk, head_of(qn_, h, nope_), nope_, head_of(w_uk_, h, lora_, nope_), lora_,
                        head_of(ql_, h, lora_), rows, label);
        check_gemm_into(uv, head_of(an_, h, lora_), lora_, head_of(w_uv_, h, v_, lora_), v_,
                        head_of(ov_, h, v_), rows, label);
      }
      out.push_back(uk);
      out.push_back(check_attention(shape_, q_abs_, k_, vv_, attn_, rows));
      out.push_back(uv);
    } else {
      out.push_back(
          check_gemm(c_, lora_, w_kvb_, nh_ * (nope_ + v_), kv_, "kv up projection", rows));
      out.push_back(check_attention(shape_, q_rot_, k_, vv_, o_in_, rows));
    }
    out.push_back(check_gemm(o_in_, nh_ * v_, w_o_, h_, y_, "output projection", rows));
    check_finish(out, rows);
    return out;
  }

 private:
  /// Prefill: kv_b up, the keys [rope key | nope key] and values of every head assembled, the
  /// latent cache written, multi-head attention straight into the output projection's rows.
  void run_expanded(const kernels::OpContext& ctx) {
    backend_.gemm(ctx, c_, t_, lora_, w_kvb_, nh_ * (nope_ + v_), dtype_, dtype_, kv_);
    const std::size_t kv_head = usz(nope_ + v_);
    for (int t = 0; t < t_; ++t) {
      for (int h = 0; h < nh_; ++h) {
        const std::size_t th = usz(t) * usz(nh_) + usz(h);
        float* k = k_.data() + th * usz(qk_);
        std::memcpy(k, k_pe_.data() + usz(t) * usz(rot_), usz(rot_) * sizeof(float));
        std::memcpy(k + rot_, kv_.data() + th * kv_head, usz(nope_) * sizeof(float));
        std::memcpy(vv_.data() + th * usz(v_), kv_.data() + th * kv_head + usz(nope_),
                    usz(v_) * sizeof(float));
      }
      float* cache = latent_cache_.data() + usz(t) * usz(lora_ + rot_);
      std::memcpy(cache, c_.data() + usz(t) * usz(lora_), usz(lora_) * sizeof(float));
      std::memcpy(cache + lora_, k_pe_.data() + usz(t) * usz(rot_), usz(rot_) * sizeof(float));
    }
    backend_.attention(ctx, shape_, q_rot_, k_, vv_, dtype_, o_in_);
  }

  /// Decode: the nope queries through W_UK per head, the absorbed attention over the latent
  /// cache, each head's output through its W_UV.
  void run_absorbed(const kernels::OpContext& ctx) {
    const std::size_t qk = usz(qk_), lora = usz(lora_), rot = usz(rot_);
    // Each sequence's new latent and rope key appended to its cache (K) and latent (V).
    for (int b = 0; b < t_; ++b) {
      const std::size_t dst = usz(b) * usz(kv_len_) + usz(kv_len_ - 1);
      std::memcpy(k_.data() + dst * (lora + rot), c_.data() + usz(b) * lora, lora * sizeof(float));
      std::memcpy(k_.data() + dst * (lora + rot) + lora, k_pe_.data() + usz(b) * rot,
                  rot * sizeof(float));
      std::memcpy(vv_.data() + dst * lora, c_.data() + usz(b) * lora, lora * sizeof(float));
    }
    for (int h = 0; h < nh_; ++h) {
      const auto hh = usz(h);
      float* qn = qn_.data() + hh * usz(t_) * usz(nope_);
      for (int t = 0; t < t_; ++t) {
        std::memcpy(qn + usz(t) * usz(nope_), q_rot_.data() + (usz(t) * usz(nh_) + hh) * qk + rot,
                    usz(nope_) * sizeof(float));
      }
      backend_.gemm(ctx, std::span<const float>(qn, usz(t_) * usz(nope_)), t_, nope_,
                    head_weights(w_uk_, h, nope_, lora_), lora_, dtype_, dtype_,
                    std::span<float>(ql_).subspan(hh * usz(t_) * lora, usz(t_) * lora));
    }
    for (int t = 0; t < t_; ++t) {
      for (int h = 0; h < nh_; ++h) {
        const std::size_t th = usz(t) * usz(nh_) + usz(h);
        float* q = q_abs_.data() + th * (lora + rot);
        std::memcpy(q, ql_.data() + (usz(h) * usz(t_) + usz(t)) * lora, lora * sizeof(float));
        std::memcpy(q + lora, q_rot_.data() + th * qk, rot * sizeof(float));
      }
    }
    backend_.attention(ctx, shape_, q_abs_, k_, vv_, dtype_, attn_);
    for (int h = 0; h < nh_; ++h) {
      const auto hh = usz(h);
      float* an = an_.data() + hh * usz(t_) * lora;
      for (int t = 0; t < t_; ++t) {
        std::memcpy(an + usz(t) * lora, attn_.data() + (usz(t) * usz(nh_) + hh) * lora,
                    lora * sizeof(float));
      }
      backend_.gemm(ctx, std::span<const float>(an, usz(t_) * lora), t_, lora_,
                    head_weights(w_uv_, h, lora_, v_), v_, dtype_, dtype_,
                    std::span<float>(ov_).subspan(hh * usz(t_) * usz(v_), usz(t_) * usz(v_)));
      for (int t = 0; t < t_; ++t) {
        std::memcpy(o_in_.data() + (usz(t) * usz(nh_) + hh) * usz(v_),
                    ov_.data() + (hh * usz(t_) + usz(t)) * usz(v_), usz(v_) * sizeof(float));
      }
    }
  }

  /// Head h's [k][n] weights, stored head-major ([nh][k][n]) so each head's GEMM reads one
  /// contiguous block.
  static std::span<const float> head_weights(const std::vector<float>& w, int h, int k, int n) {
    return std::span<const float>(w).subspan(usz(h) * usz(k) * usz(n), usz(k) * usz(n));
  }
  /// Head h's slice of a head-major buffer of `inner` values per row (t_ rows each), or of
  /// `inner`×`k` weights.
  std::span<const float> head_of(const std::vector<float>& buf, std::size_t h, int inner,
                                 int k = 0) const {
    const std::size_t n = k > 0 ? usz(k) * usz(inner) : usz(t_) * usz(inner);
    return std::span<const float>(buf).subspan(h * n, n);
  }

  std::size_t footprint_bytes() const override {
    return shared_footprint() +
           float_bytes({&w_qa_, &w_qa_norm_, &w_qb_, &w_kva_, &w_kv_norm_, &w_o_,          &w_kvb_,
                        &w_uk_, &w_uv_,      &qa_,   &qan_,   &q_,         &q_rot_,        &kva_,
                        &c_,    &k_pe_,      &kv_,   &k_,     &vv_,        &latent_cache_, &qn_,
                        &ql_,   &q_abs_,     &attn_, &an_,    &ov_,        &o_in_});
  }

  bool decode_ = false;
  int nh_ = 0, nope_ = 0, v_ = 0, lora_ = 0, q_lora_ = 0, qk_ = 0;
  kernels::AttentionShape shape_;
  std::vector<float> w_qa_, w_qa_norm_, w_qb_, w_kva_, w_kv_norm_, w_o_, w_kvb_, w_uk_, w_uv_;
  std::vector<float> qa_, qan_, q_, q_rot_, kva_, c_, k_pe_, kv_, k_, vv_, latent_cache_;
  std::vector<float> qn_, ql_, q_abs_, attn_, an_, ov_, o_in_;
};

}  // namespace

Result<std::unique_ptr<DecoderCase>> make_decoder_case(const models::MoeModel& model, DType dtype,
                                                       const DecoderCaseShape& shape,
                                                       const kernels::LayerSpec* moe,
                                                       kernels::Communicator* world,
                                                       kernels::Backend& backend) {
  if (const std::string p = decoder_block_problem(model); !p.empty()) return Error{p, "model"};
  if (shape.tokens < 1 || shape.context < 1 || (!shape.decode && shape.tokens != shape.context)) {
    return Error{"decoder case: expected a prompt of `context` tokens or decode sequences ≥ 1"};
  }
  if (moe != nullptr && world == nullptr) return Error{"decoder case: the MoE layer needs a world"};
  if (moe != nullptr && moe->hidden != model.hidden_size) {
    return Error{"decoder case: the MoE layer's hidden size " + std::to_string(moe->hidden) +
                 " is not the block's " + std::to_string(model.hidden_size) +
                 "; expected the model's layer at scale 1"};
  }
  for (const kernels::BackendOp op : {kernels::BackendOp::kRmsNorm, kernels::BackendOp::kRope,
                                      kernels::BackendOp::kGemm, kernels::BackendOp::kAttention}) {
    MOEPLAN_TRY_STATUS(backend_supports(backend, op, dtype));
  }
  if (model.attention.mla) {
    return std::unique_ptr<DecoderCase>(
        std::make_unique<MlaCase>(model, dtype, shape, moe, world, backend));
  }
  return std::unique_ptr<DecoderCase>(
      std::make_unique<GqaCase>(model, dtype, shape, moe, world, backend));
}

RotatingDecoderCase::RotatingDecoderCase(std::vector<std::unique_ptr<DecoderCase>> copies)
    : copies_(std::move(copies)) {}

void RotatingDecoderCase::run() {
  copies_[next_]->run();
  next_ = (next_ + 1) % copies_.size();
}

Check RotatingDecoderCase::verify() {
  for (auto& c : copies_) {
    if (Check check = c->verify(); !check.passed) return check;
  }
  return {};
}

std::vector<double> RotatingDecoderCase::routed_counts() const {
  return copies_.front()->routed_counts();
}

std::vector<OpCheck> RotatingDecoderCase::check_ops(long rows) {
  return copies_.front()->check_ops(rows);
}

std::size_t RotatingDecoderCase::footprint_bytes() const {
  return copies_.size() * copies_.front()->footprint_bytes();
}

Result<std::unique_ptr<RotatingDecoderCase>> make_cold_decoder_case(
    const models::MoeModel& model, DType dtype, const DecoderCaseShape& shape,
    const kernels::LayerSpec* moe, kernels::Communicator* world, kernels::Backend& backend,
    std::size_t cold_bytes) {
  std::vector<std::unique_ptr<DecoderCase>> copies;
  auto first = make_decoder_case(model, dtype, shape, moe, world, backend);
  if (!first) return first.error();
  const std::size_t n = cold_copies((*first)->footprint_bytes(), 64, cold_bytes);
  copies.push_back(std::move(*first));
  while (copies.size() < n) {
    auto c = make_decoder_case(model, dtype, shape, moe, world, backend);
    if (!c) return c.error();
    copies.push_back(std::move(*c));
  }
  return std::make_unique<RotatingDecoderCase>(std::move(copies));
}

}  // namespace moeplan::profiler
