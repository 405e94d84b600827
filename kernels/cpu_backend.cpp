// The CPU backend: Eigen GEMMs with fp32 accumulation; storage rounding where a real kernel
// stores in the storage dtype.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernels/attention.hpp"
#include "kernels/backend.hpp"
#include "kernels/dtype_convert.hpp"
#include "kernels/fp8.hpp"
#include "kernels/layer_ops.hpp"
#include "kernels/norm_rope.hpp"
#include "kernels/router_math.hpp"

namespace moeplan::kernels {

namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMat>;
using Map = Eigen::Map<RowMat>;

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }

  Status can_implement(const OpQuery& q) const override {
    // The CPU backend computes in fp32 and stores in fp32, bf16 or fp16; fp8 is not one of its
    // storage dtypes (the router works on fp32 logits whatever the storage).
    if (q.op == BackendOp::kGemmFp8Block) {
      if (q.dtype == DType::kFp8) return Status::Ok();
      return Error{"cpu backend: gemm_fp8 takes fp8 weights"};
    }
    if (q.dtype == DType::kFp8 && q.op != BackendOp::kRoute && q.op != BackendOp::kPermute) {
      return Error{
          "cpu backend: fp8 is not a storage dtype of the CPU backend (fp32, bf16, "
          "fp16)"};
    }
    return Status::Ok();
  }

  void gemm_fp8(const OpContext&, std::span<const float> a, int m, int k, const Fp8Act& act,
                std::span<const Fp8Part> parts, std::span<float> c) override {
    if (m == 0) return;
    int n = 0;
    for (const Fp8Part& p : parts) n += p.cols;
    fp8_gemm(ConstMap(a.data(), m, k), act, parts, Map(c.data(), m, n));
  }

  void gemm(const OpContext&, std::span<const float> a, int m, int k, std::span<const float> b,
            int n, DType, DType out_dtype, std::span<float> c) override {
    const auto out = c.first(static_cast<std::size_t>(m) * static_cast<std::size_t>(n));
    matmul(ConstMap(a.data(), m, k), ConstMap(b.data(), k, n), Map(out.data(), m, n));
    if (out_dtype != DType::kFp32) round_to(out_dtype, out);
  }

  void attention(const OpContext&, const AttentionShape& shape, std::span<const float> q,
                 std::span<const float> k, std::span<const float> v, DType dtype,
                 std::span<float> out) override {
    attention_cpu(shape, q, k, v, dtype, out);
  }

  void rms_norm(const OpContext&, std::span<const float> x, int rows, int width, int in_ld,
                std::span<const float> weight, float eps, DType dtype,
                std::span<float> out) override {
    rms_norm_cpu(x, rows, width, in_ld, weight, eps, dtype, out);
  }

  void rope(const OpContext&, std::span<const float> in, int in_ld, int rows, int heads,
            int head_dim, int rot_dim, std::span<const int> positions,
            std::span<const float> cos_sin, DType dtype, std::span<float> out) override {
    rope_cpu(in, in_ld, rows, heads, head_dim, rot_dim, positions, cos_sin, dtype, out);
  }

  void silu_mul(const OpContext&, std::span<const float> gate_up, int rows, int width, DType dtype,
                std::span<float> act) override {
    silu_mul_rows(gate_up.data(), rows, width, dtype, act.data());
  }

  void sigmoid_gate(const OpContext&, std::span<const float> x, int num_tokens, int hidden,
                    std::span<const float> gate, std::span<float> out) override {
    sigmoid_gate_rows(x.data(), num_tokens, hidden, gate, out.data());
  }

  void router_logits(const OpContext&, std::span<const float> x, int num_tokens, int hidden,
                     std::span<const float> w, int num_experts, std::span<float> logits) override {
    const ConstMap wm(w.data(), hidden, num_experts);
    // NOTE: one GEMV per row keeps each row's summation order independent of the batch size,
    // so a token routes identically whichever rank and dispatcher computes it.
    for (int t = 0; t < num_tokens; ++t) {
      const ConstMap xr(x.data() + static_cast<std::ptrdiff_t>(t) * hidden, 1, hidden);
      Map lr(logits.data() + static_cast<std::ptrdiff_t>(t) * num_experts, 1, num_experts);
      lr.noalias() = xr * wm;
    }
  }

  void route(const OpContext&, const models::RouterSpec& router, std::span<const float> logits,
             std::span<const float> score_bias, int num_tokens, int num_experts, int top_k,
             std::span<int> ids, std::span<float> weights) override {
    for (int t = 0; t < num_tokens; ++t) {
      const auto off = static_cast<std::size_t>(t);
      route_token(
          router,
          logits.subspan(off * static_cast<std::size_t>(num_experts),
                         static_cast<std::size_t>(num_experts)),
          score_bias, top_k,
          ids.subspan(off * static_cast<std::size_t>(top_k), static_cast<std::size_t>(top_k)),
          weights.subspan(off * static_cast<std::size_t>(top_k), static_cast<std::size_t>(top_k)));
    }
  }

  Permutation permute(const OpContext&, std::span<const int> pair_experts, int first_expert,
                      int num_local) override {
    Permutation p;
    p.offsets.assign(static_cast<std::size_t>(num_local) + 1, 0);
    for (const int e : pair_experts) {
      const int local = e - first_expert;
      if (local >= 0 && local < num_local) ++p.offsets[static_cast<std::size_t>(local) + 1];
    }
    std::partial_sum(p.offsets.begin(), p.offsets.end(), p.offsets.begin());
    p.order.resize(static_cast<std::size_t>(p.offsets.back()));
    std::vector<int> cursor(p.offsets.begin(), p.offsets.end() - 1);
    for (std::size_t i = 0; i < pair_experts.size(); ++i) {
      const int local = pair_experts[i] - first_expert;
      if (local >= 0 && local < num_local) {
        p.order[static_cast<std::size_t>(cursor[static_cast<std::size_t>(local)]++)] =
            static_cast<int>(i);
      }
    }
    return p;
  }

  void expert_ffn(const OpContext&, std::span<const float> rows, std::span<const int> offsets,
                  std::span<const ExpertWeights> experts, int hidden, DType dtype,
                  std::span<float> out) override {
    RowMat act;
    for (std::size_t j = 0; j < experts.size(); ++j) {
      const int r0 = offsets[j];
      const int m = offsets[j + 1] - r0;
      if (m == 0) continue;
      const ExpertWeights& w = experts[j];
      const ConstMap x(rows.data() + static_cast<std::ptrdiff_t>(r0) * hidden, m, hidden);
      mlp(x, w, hidden, dtype, act,
          Map(out.data() + static_cast<std::ptrdiff_t>(r0) * hidden, m, hidden));
    }
  }

  void combine(const OpContext&, std::span<const float> y, std::span<const int> pair_row,
               std::span<const float> weights, std::span<const float> shared, int num_tokens,
               int top_k, int hidden, DType dtype, std::span<float> out) override {
    const auto h = static_cast<std::size_t>(hidden);
    for (int t = 0; t < num_tokens; ++t) {
      float* o = out.data() + static_cast<std::size_t>(t) * h;
      std::fill(o, o + hidden, 0.0F);
      for (int j = 0; j < top_k; ++j) {
        const auto pair = static_cast<std::size_t>(t) * static_cast<std::size_t>(top_k) +
                          static_cast<std::size_t>(j);
        const float w = weights[pair];
        const float* row = y.data() + static_cast<std::size_t>(pair_row[pair]) * h;
        for (std::size_t i = 0; i < h; ++i) o[i] += w * row[i];
      }
      if (!shared.empty()) {
        const float* s = shared.data() + static_cast<std::size_t>(t) * h;
        for (std::size_t i = 0; i < h; ++i) o[i] += s[i];
      }
    }
    round_to(dtype, out.first(static_cast<std::size_t>(num_tokens) * h));
  }

  void shared_expert(const OpContext&, std::span<const float> x, int num_tokens, int hidden,
                     const ExpertWeights& w, std::span<const float> gate, DType dtype,
                     std::span<float> out) override {
    if (num_tokens == 0) return;
    const ConstMap xm(x.data(), num_tokens, hidden);
    Map om(out.data(), num_tokens, hidden);
    RowMat act;
    mlp(xm, w, hidden, dtype, act, om);
    if (gate.empty()) return;
    sigmoid_gate_rows(x.data(), num_tokens, hidden, gate, out.data());
  }

 private:
  // out = (SiLU(x·Wg) ⊙ (x·Wu)) · Wd; the activation is stored in `dtype`.
  static void mlp(const ConstMap& x, const ExpertWeights& w, int hidden, DType dtype, RowMat& act,
                  Map out) {
    if (!w.fp8.empty()) {
      mlp_fp8(x, w, hidden, dtype, act, out);
      return;
    }
    const int width = w.width;
    const ConstMap w1(w.gate_up.data(), hidden, 2 * width);
    const ConstMap w2(w.down.data(), width, hidden);
    RowMat gu(x.rows(), 2 * width);
    matmul(x, w1, Map(gu.data(), gu.rows(), gu.cols()));
    act.resize(x.rows(), width);
    silu_mul_rows(gu.data(), static_cast<long>(x.rows()), width, dtype, act.data());
    matmul(ConstMap(act.data(), act.rows(), act.cols()), w2, out);
  }

  // The fp8 MLP: the rows and the activation quantized to e4m3 as the format says (1 × 128
  // groups in DeepSeek-V3's recipe, per token, static scales), the weights read from their e4m3
  // form and scales — two gemm_fp8 calls around SiLU·mul, the op the profiler measures.
  static void mlp_fp8(const ConstMap& x, const ExpertWeights& w, int hidden, DType dtype,
                      RowMat& act, Map out) {
    const Fp8ExpertWeights& f = w.fp8.front();
    const int width = w.width;
    const auto m = x.rows();
    const Fp8Part gate_up[] = {{f.gate_up.data(), 2 * width, 0, width, f.gate_scales.data(),
                                f.gate_up_block_rows, f.gate_up_block_cols},
                               {f.gate_up.data(), 2 * width, width, width, f.up_scales.data(),
                                f.gate_up_block_rows, f.gate_up_block_cols}};
    thread_local RowMat gu;
    gu.resize(m, 2 * width);
    fp8_gemm(x, f.input_act(), gate_up, Map(gu.data(), m, 2 * width));
    act.resize(m, width);
    silu_mul_rows(gu.data(), static_cast<long>(m), width, dtype, act.data());
    const Fp8Part down[] = {{f.down.data(), hidden, 0, hidden, f.down_scales.data(),
                             f.down_block_rows, f.down_block_cols}};
    fp8_gemm(ConstMap(act.data(), m, width), f.mid_act(), down, out);
  }

  // c = q(a) · [parts]: a quantized on a copy; the CPU has no fp8 arithmetic, so each GEMM
  // multiplies the exact dequantized values in fp32 — the scaled product with the scaling
  // folded into the operands. The weights are decoded one panel of 512 columns at a time, each
  // multiplied while it is still in cache: a call reads each weight byte once from memory, not a
  // decoded fp32 copy. Scratch is reused across calls on this thread.
  static void fp8_gemm(const ConstMap& a, const Fp8Act& act, std::span<const Fp8Part> parts,
                       Map c) {
    constexpr int kPanel = 512;
    thread_local RowMat aq, panel;
    const auto m = a.rows();
    const auto k = static_cast<int>(a.cols());
    aq = a;
    fake_quantize_activations(aq.data(), static_cast<int>(m), k, act);
    const ConstMap amap(aq.data(), m, k);
    int c_out = 0;
    for (const Fp8Part& part : parts) {
      const int ld_scales = (part.cols + part.block_cols - 1) / part.block_cols;
      for (int first = 0; first < part.cols; first += kPanel) {
        const int cols = std::min(kPanel, part.cols - first);
        panel.resize(k, cols);
        dequantize_panel(part.codes, part.ld, part.c0, k, first, cols, part.block_rows,
                         part.block_cols, part.scales, ld_scales, panel.data(), cols, 0);
        c.middleCols(c_out + first, cols).noalias() = amap * panel;
      }
      c_out += part.cols;
    }
  }

  // The one GEMM of the CPU backend (the MLP's and the gemm op's): Eigen, fp32 accumulation.
  static void matmul(const ConstMap& a, const ConstMap& b, Map c) { c.noalias() = a * b; }
};

}  // namespace

void silu_mul_rows(const float* gu, long rows, int width, DType dtype, float* act) {
  const auto w = static_cast<std::ptrdiff_t>(width);
  for (long r = 0; r < rows; ++r) {
    const float* in = gu + r * 2 * w;
    float* o = act + r * w;
    for (std::ptrdiff_t c = 0; c < w; ++c) {
      // The GEMM stores gate and up in `dtype`; SiLU-and-mul reads them and stores in `dtype`.
      const float g = round_to(dtype, in[c]);
      const float u = round_to(dtype, in[w + c]);
      o[c] = round_to(dtype, g / (1.0F + std::exp(-g)) * u);
    }
  }
}

void sigmoid_gate_rows(const float* x, int num_tokens, int hidden, std::span<const float> gate,
                       float* out) {
  const ConstMap xm(x, num_tokens, hidden);
  Map om(out, num_tokens, hidden);
  const Eigen::Map<const Eigen::VectorXf> g(gate.data(), hidden);
  for (int t = 0; t < num_tokens; ++t) {
    const float z = xm.row(t).dot(g);
    om.row(t) *= 1.0F / (1.0F + std::exp(-z));
  }
}

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace moeplan::kernels
