// The attention block and the decoder layer as one measured case.
#include "profiler/decoder_block.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
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
  if (m.attention.mla) {
    return m.name +
           " uses MLA, whose attention block (LoRA projections, absorbed decode) is not run as a "
           "block yet; expected a GQA or MHA model, or --scope core for MLA's attention core";
  }
  if (m.attention.head_dim < 2) return m.name + ": head_dim below 2 leaves nothing to rotate";
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

class DecoderCaseImpl final : public DecoderCase {
 public:
  DecoderCaseImpl(const models::MoeModel& m, DType dtype, const DecoderCaseShape& sh,
                  const kernels::LayerSpec* moe, kernels::Communicator* world,
                  kernels::Backend& backend)
      : dtype_(dtype), backend_(backend) {
    const auto& a = m.attention;
    h_ = static_cast<int>(m.hidden_size);
    nh_ = a.num_heads;
    nkv_ = a.num_kv_heads;
    hd_ = a.head_dim;
    qk_norm_ = a.qk_norm;
    eps_ = static_cast<float>(a.rms_norm_eps);
    n_qkv_ = (nh_ + 2 * nkv_) * hd_;
    batch_ = sh.decode ? sh.tokens : 1;
    q_len_ = sh.decode ? 1 : sh.tokens;
    kv_len_ = sh.context;
    t_ = batch_ * q_len_;
    shape_ = {batch_, q_len_, kv_len_, nh_,
              nkv_,   hd_,    hd_,     1.0F / std::sqrt(static_cast<float>(hd_))};
    x_ = random_values(dtype, usz(t_) * usz(h_), 31, -2.0F, 2.0F);
    w_in_ = random_values(DType::kFp32, usz(h_), 32, 0.5F, 1.5F);
    w_post_ = random_values(DType::kFp32, usz(h_), 33, 0.5F, 1.5F);
    w_qnorm_ = random_values(DType::kFp32, usz(hd_), 34, 0.5F, 1.5F);
    w_knorm_ = random_values(DType::kFp32, usz(hd_), 35, 0.5F, 1.5F);
    w_qkv_ = projection(dtype, h_, n_qkv_, 36);
    w_o_ = projection(dtype, nh_ * hd_, h_, 37);
    cache_ = kernels::rope_cos_sin_cache(kv_len_, hd_, a.rope_theta);
    positions_.resize(usz(t_));
    for (int b = 0; b < batch_; ++b) {
      for (int t = 0; t < q_len_; ++t) {
        positions_[usz(b) * usz(q_len_) + usz(t)] = kv_len_ - q_len_ + t;
      }
    }
    // K/V: the whole prompt's (prefill), or each sequence's cache of kv_len − 1 earlier tokens
    // with the new token's row written by the step (decode).
    k_ = random_values(dtype, shape_.k_size(), 38, -2.0F, 2.0F);
    v_ = random_values(dtype, shape_.v_size(), 39, -2.0F, 2.0F);
    xn_.resize(usz(t_) * usz(h_));
    qkv_.resize(usz(t_) * usz(n_qkv_));
    q_rot_.resize(shape_.q_size());
    k_rot_.resize(usz(t_) * usz(nkv_) * usz(hd_));
    q_.resize(shape_.q_size());
    k_new_.resize(k_rot_.size());
    attn_.resize(shape_.out_size());
    y_.resize(usz(t_) * usz(h_));
    hn_.resize(usz(t_) * usz(h_));
    if (moe != nullptr && world != nullptr) {
      spec_ = *moe;
      layout_ = kernels::Layout::of(1, 1);
      groups_ = kernels::make_groups(*world, layout_);
      weights_ = kernels::make_rank_weights(*spec_, layout_, world->rank());
    }
  }

  void run() override {
    const kernels::OpContext ctx{};
    const std::size_t kv_row = usz(nkv_) * usz(hd_);
    backend_.rms_norm(ctx, x_, t_, h_, w_in_, eps_, dtype_, xn_);
    backend_.gemm(ctx, xn_, t_, h_, w_qkv_, n_qkv_, dtype_, dtype_, qkv_);
    const std::span<const float> qkv(qkv_);
    backend_.rope(ctx, qkv, n_qkv_, t_, nh_, hd_, hd_, positions_, cache_, dtype_, q_rot_);
    backend_.rope(ctx, qkv.subspan(usz(nh_) * usz(hd_)), n_qkv_, t_, nkv_, hd_, hd_, positions_,
                  cache_, dtype_, k_rot_);
    const std::vector<float>* q = &q_rot_;
    const std::vector<float>* k_new = &k_rot_;
    if (qk_norm_) {
      backend_.rms_norm(ctx, q_rot_, t_ * nh_, hd_, w_qnorm_, eps_, dtype_, q_);
      backend_.rms_norm(ctx, k_rot_, t_ * nkv_, hd_, w_knorm_, eps_, dtype_, k_new_);
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
    backend_.rms_norm(ctx, y_, t_, h_, w_post_, eps_, dtype_, hn_);
    if (fault_) hn_[usz(h_) / 2] = 2.0F * hn_[usz(h_) / 2] + 1.0F;  // row 0: always checked
    if (spec_) {
      out_ = kernels::moe_forward(backend_, groups_, *spec_, layout_, weights_, hn_, t_);
    }
    ran_ = true;
  }

  Check verify() override {
    for (const OpCheck& c : check_ops(8)) {
      if (!c.passed) return {false, c.detail};
    }
    return {};
  }

  std::vector<OpCheck> check_ops(long rows) override {
    run();
    std::vector<OpCheck> out;
    out.push_back(check_norm(x_, h_, w_in_, xn_, "input norm", rows));
    out.push_back(check_gemm(xn_, h_, w_qkv_, n_qkv_, qkv_, "q/k/v projection", rows));
    out.push_back(check_rope(0, nh_, q_rot_, "RoPE q", rows));
    out.push_back(check_rope(nh_ * hd_, nkv_, k_rot_, "RoPE k", rows));
    if (qk_norm_) {
      out.push_back(check_norm(q_rot_, hd_, w_qnorm_, q_, "q norm", rows));
      out.push_back(check_norm(k_rot_, hd_, w_knorm_, k_new_, "k norm", rows));
    }
    out.push_back(check_attention(rows));
    out.push_back(check_gemm(attn_, nh_ * hd_, w_o_, h_, y_, "output projection", rows));
    out.push_back(check_norm(y_, h_, w_post_, hn_, "post-attention norm", rows));
    if (spec_) out.push_back(check_moe(rows));
    return out;
  }

  std::vector<double> routed_counts() const override {
    if (!spec_ || !ran_) return {};
    return routed_counts_of(*spec_, hn_, t_);
  }

 private:
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

  OpCheck check_norm(const std::vector<float>& in, int width, const std::vector<float>& w,
                     const std::vector<float>& out, const char* what, long rows) const {
    OpCheck c;
    c.op = what;
    const long total = static_cast<long>(in.size() / usz(width));
    for (const long r : pick(total, rows)) {
      const auto row = std::span<const float>(in).subspan(usz(r) * usz(width), usz(width));
      const auto ref = kernels::rms_norm_reference(row, 1, width, w, eps_, dtype_);
      for (int i = 0; i < width; ++i) {
        note(c, out[usz(r) * usz(width) + usz(i)], ref.out[usz(i)], ref.bound[usz(i)],
             [&] { return "row " + std::to_string(r) + " value " + std::to_string(i); });
      }
    }
    return c;
  }

  OpCheck check_gemm(const std::vector<float>& a, int k, const std::vector<float>& b, int n,
                     const std::vector<float>& out, const char* what, long rows) const {
    OpCheck c;
    c.op = what;
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
             [&] { return "C[" + std::to_string(i) + "," + std::to_string(j) + "]"; });
      }
    }
    return c;
  }

  OpCheck check_rope(int offset, int heads, const std::vector<float>& out, const char* what,
                     long rows) const {
    OpCheck c;
    c.op = what;
    const std::size_t row_out = usz(heads) * usz(hd_);
    for (const long r : pick(t_, rows)) {
      const auto in = std::span<const float>(qkv_).subspan(usz(r) * usz(n_qkv_) + usz(offset));
      const int pos = positions_[usz(r)];
      const auto ref = kernels::rope_reference(in, n_qkv_, 1, heads, hd_, hd_,
                                               std::span<const int>(&pos, 1), cache_, dtype_);
      for (std::size_t i = 0; i < row_out; ++i) {
        note(c, out[usz(r) * row_out + i], ref.out[i], ref.bound[i],
             [&] { return "row " + std::to_string(r) + " value " + std::to_string(i); });
      }
    }
    return c;
  }

  OpCheck check_attention(long rows) const {
    OpCheck c;
    c.op = "attention core";
    const std::vector<float>& q = qk_norm_ ? q_ : q_rot_;
    std::vector<double> ref(usz(hd_)), bound(usz(hd_));
    for (const long row : pick(shape_.q_rows(), rows > 0 ? std::max(1L, rows * 3 / 4) : 0)) {
      const int b = static_cast<int>(row / q_len_), t = static_cast<int>(row % q_len_);
      for (const long h : pick(nh_, rows > 0 ? 3 : 0)) {
        kernels::attention_reference_row(shape_, q, k_, v_, dtype_, b, t, static_cast<int>(h), ref,
                                         bound);
        for (int i = 0; i < hd_; ++i) {
          note(c, attn_[(usz(row) * usz(nh_) + usz(h)) * usz(hd_) + usz(i)], ref[usz(i)],
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
        {kernels::sends_fp8(*spec_, layout_.dispatcher), kernels::ref_tp_slices(*spec_, 1)});
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
  int h_ = 0, nh_ = 0, nkv_ = 0, hd_ = 0, n_qkv_ = 0;
  bool qk_norm_ = false, ran_ = false;
  float eps_ = 1e-6F;
  int batch_ = 1, q_len_ = 1, kv_len_ = 1, t_ = 1;
  kernels::AttentionShape shape_;
  std::vector<float> x_, w_in_, w_post_, w_qnorm_, w_knorm_, w_qkv_, w_o_, cache_;
  std::vector<int> positions_;
  std::vector<float> k_, v_, xn_, qkv_, q_rot_, k_rot_, q_, k_new_, attn_, y_, hn_, out_;
  std::optional<kernels::LayerSpec> spec_;
  kernels::Layout layout_;
  kernels::RankGroups groups_;
  kernels::RankWeights weights_;
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
  return std::unique_ptr<DecoderCase>(
      std::make_unique<DecoderCaseImpl>(model, dtype, shape, moe, world, backend));
}

}  // namespace moeplan::profiler
