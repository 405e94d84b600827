// The CUDA backend against the CPU backend on the same inputs, op by op, with a tolerance per
// dtype; the sharded layer and `verify` on the GPU; the NCCL communicator at group size 1 (and
// on two GPUs where there are two). Every suite skips, saying why, when no device is usable.
#include <gtest/gtest.h>

#include <chrono>

#include <cmath>
#include <random>
#include <vector>

#include "collective_checks.hpp"
#include "kernels/attention.hpp"
#include "kernels/backend.hpp"
#include "kernels/cuda/cuda_backend.hpp"
#include "kernels/dtype_convert.hpp"
#include "kernels/moe_layer.hpp"
#include "kernels/norm_rope.hpp"
#include "kernels/router_math.hpp"
#include "kernels/verify.hpp"
#include "models/registry.hpp"
#if MOEPLAN_HAVE_NCCL
#include "kernels/cuda/nccl_communicator.hpp"
#endif

namespace moeplan::kernels {
namespace test_cuda_backend {
namespace {

std::size_t sz(int v) { return static_cast<std::size_t>(v); }

std::vector<float> random_values(std::size_t n, float lo, float hi, unsigned seed, DType dtype) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = round_to(dtype, dist(rng));
  return v;
}

bool any_nonzero(const std::vector<float>& v) {
  for (const float x : v) {
    if (x != 0.0F) return true;
  }
  return false;
}

// Normalised squared error Σ(a−b)² / Σb² (ggml's test metric).
double nmse(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0;
  double den = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    num += d * d;
    den += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return den > 0.0 ? num / den : num;
}

// NOTE: the two backends sum fp32 dot products of length K in different orders (relative
// difference ~√K·u₃₂ in RMS) and may then round a value that lies near a rounding midpoint of
// the storage dtype differently (one unit roundoff u of the dtype). The RMS error relative to
// the RMS value is therefore below 2√K·u₃₂ + u: its square bounds the NMSE.
double nmse_bound(DType dtype, int k) {
  const double u32 = unit_roundoff(DType::kFp32);
  const double r = 2.0 * std::sqrt(static_cast<double>(k)) * u32 +
                   (dtype == DType::kFp32 ? 0.0 : unit_roundoff(dtype));
  return r * r;
}

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = cuda::cuda_unusable_reason(0);
    if (!why.empty()) GTEST_SKIP() << "no usable CUDA device: " << why;
    cpu_ = make_cpu_backend();
    auto g = cuda::make_cuda_backend(0, cuda::FfnChoice::kGrouped);
    auto l = cuda::make_cuda_backend(0, cuda::FfnChoice::kLtLoop);
    ASSERT_TRUE(g.ok()) << g.error().message;
    ASSERT_TRUE(l.ok()) << l.error().message;
    grouped_ = std::move(*g);
    lt_ = std::move(*l);
  }
  std::unique_ptr<Backend> cpu_, grouped_, lt_;
  OpContext ctx_;
};

TEST_F(CudaOps, RouterLogitsMatchCpu) {
  const int t = 77;
  const int h = 448;
  const int e = 64;
  const auto x = random_values(sz(t * h), 0.0F, 1.0F, 1, DType::kFp32);
  const auto w = random_values(sz(h * e), -0.1F, 0.1F, 2, DType::kFp32);
  std::vector<float> a(sz(t * e)), b(a.size());
  cpu_->router_logits(ctx_, x, t, h, w, e, a);
  grouped_->router_logits(ctx_, x, t, h, w, e, b);
  ASSERT_TRUE(any_nonzero(a));
  EXPECT_LE(nmse(b, a), nmse_bound(DType::kFp32, h));
}

struct RouteCase {
  const char* name;
  models::RouterSpec spec;
  int experts;
  int k;
};

std::vector<RouteCase> route_cases() {
  models::RouterSpec qwen2;
  models::RouterSpec qwen3 = qwen2;
  qwen3.norm_topk_prob = true;
  models::RouterSpec v2 = qwen2;
  v2.topk_method = models::TopkMethod::kGroupLimitedGreedy;
  v2.num_groups = 8;
  v2.topk_groups = 3;
  v2.routed_scaling_factor = 16.0;
  v2.scale_after_norm = false;
  models::RouterSpec v3;
  v3.scoring = models::ScoringFunc::kSigmoid;
  v3.topk_method = models::TopkMethod::kNoauxTc;
  v3.num_groups = 8;
  v3.topk_groups = 4;
  v3.norm_topk_prob = true;
  v3.routed_scaling_factor = 2.5;
  v3.has_score_correction_bias = true;
  // Every warp-router width (1…16 slots per lane) and the thread-per-token fallback (> 512).
  return {{"mixtral", qwen3, 8, 2},       {"qwen2", qwen2, 64, 8},     {"qwen3", qwen3, 128, 8},
          {"deepseek_v2", v2, 160, 6},    {"deepseek_v3", v3, 256, 8}, {"qwen3_512", qwen3, 512, 8},
          {"v3_640_fallback", v3, 640, 8}};
}

TEST_F(CudaOps, RouteMatchesCpuForEveryFamily) {
  for (const auto& c : route_cases()) {
    SCOPED_TRACE(c.name);
    const int t = 300;
    const auto logits = random_values(sz(t * c.experts), -4.0F, 4.0F, 3, DType::kFp32);
    const auto bias = random_values(sz(c.experts), -0.1F, 0.1F, 4, DType::kFp32);
    std::vector<int> ia(sz(t * c.k)), ib(ia.size());
    std::vector<float> wa(ia.size()), wb(ia.size());
    cpu_->route(ctx_, c.spec, logits, bias, t, c.experts, c.k, ia, wa);
    grouped_->route(ctx_, c.spec, logits, bias, t, c.experts, c.k, ib, wb);
    // The selection score of expert e on the CPU (what route_token_core ranks by).
    const auto choice = [&](int token, int e) {
      const std::size_t at = sz(token) * sz(c.experts) + sz(e);
      if (c.spec.scoring == models::ScoringFunc::kSigmoid) {
        return static_cast<double>(sigmoid_score(logits[at])) + bias[sz(e)];
      }
      return static_cast<double>(logits[at]);  // softmax keeps the logits' order
    };
    int reordered = 0;
    for (int tok = 0; tok < t; ++tok) {
      bool same = true;
      for (int j = 0; j < c.k; ++j) {
        const std::size_t at = sz(tok) * sz(c.k) + sz(j);
        if (ia[at] == ib[at]) continue;
        same = false;
        // NOTE: device expf may round a sigmoid one ulp away from the host's, so two experts
        // whose scores lie within a few fp32 ulps may swap; anything farther apart is a bug.
        const double a = choice(tok, ia[at]);
        const double b = choice(tok, ib[at]);
        EXPECT_LE(std::fabs(a - b), 4e-7 * std::fabs(a))
            << "token " << tok << " slot " << j << ": cpu expert " << ia[at] << ", gpu " << ib[at];
      }
      if (!same) {
        ++reordered;
        continue;
      }
      for (int j = 0; j < c.k; ++j) {
        const std::size_t at = sz(tok) * sz(c.k) + sz(j);
        // expf on the device and a tree-ordered softmax sum: a few fp32 ulps.
        EXPECT_NEAR(wb[at], wa[at], 1e-5 * std::fabs(wa[at]) + 1e-7) << "pair " << at;
      }
    }
    EXPECT_LE(reordered, 3);  // near-ties are rare with continuous random logits
  }
}

TEST_F(CudaOps, PermuteMatchesCpuExactly) {
  std::mt19937 rng(9);
  for (const int e_total : {8, 64, 256, 1024}) {
    std::uniform_int_distribution<int> dist(0, e_total - 1);
    std::vector<int> experts(sz(1000 * 8));
    for (auto& e : experts) e = dist(rng);
    for (const auto& [first, count] :
         {std::pair{0, e_total}, std::pair{e_total / 4, e_total / 4}, std::pair{e_total - 1, 1}}) {
      SCOPED_TRACE(std::to_string(e_total) + " experts, local [" + std::to_string(first) + ", +" +
                   std::to_string(count) + ")");
      const Permutation a = cpu_->permute(ctx_, experts, first, count);
      const Permutation b = grouped_->permute(ctx_, experts, first, count);
      EXPECT_EQ(b.offsets, a.offsets);
      EXPECT_EQ(b.order, a.order);  // stable: pairs keep their order within an expert
    }
  }
  const Permutation empty = grouped_->permute(ctx_, std::vector<int>{}, 0, 4);
  EXPECT_EQ(empty.offsets, (std::vector<int>{0, 0, 0, 0, 0}));
}

std::vector<ExpertWeights> make_experts(int n, int h, int w, DType dtype) {
  std::vector<ExpertWeights> out;
  for (int e = 0; e < n; ++e) {
    ExpertWeights x;
    x.width = w;
    x.gate_up = random_values(sz(h * 2 * w), -0.1F, 0.1F, static_cast<unsigned>(10 + e), dtype);
    x.down = random_values(sz(w * h), -0.1F, 0.1F, static_cast<unsigned>(100 + e), dtype);
    out.push_back(std::move(x));
  }
  return out;
}

TEST_F(CudaOps, ExpertFfnMatchesCpuBothImplementationsEveryDtype) {
  const int h = 256;
  const int w = 192;
  // Skewed groups with an empty expert and two of equal size (one cuBLAS group of two).
  const std::vector<int> offsets = {0, 40, 40, 71, 102, 230, 231};
  const int n = static_cast<int>(offsets.size()) - 1;
  for (const DType dtype : {DType::kFp32, DType::kBf16, DType::kFp16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const auto experts = make_experts(n, h, w, dtype);
    const auto rows = random_values(sz(offsets.back() * h), 0.0F, 1.0F, 5, dtype);
    std::vector<float> ref(rows.size()), g(rows.size()), l(rows.size());
    cpu_->expert_ffn(ctx_, rows, offsets, experts, h, dtype, ref);
    round_to(dtype, ref);  // the GPU stores the down projection in the dtype
    grouped_->expert_ffn(ctx_, rows, offsets, experts, h, dtype, g);
    lt_->expert_ffn(ctx_, rows, offsets, experts, h, dtype, l);
    ASSERT_TRUE(any_nonzero(ref));
    EXPECT_LE(nmse(g, ref), nmse_bound(dtype, h)) << "grouped";
    EXPECT_LE(nmse(l, ref), nmse_bound(dtype, h)) << "lt_loop";
  }
}

TEST_F(CudaOps, ExpertFfnAutoPicksAnImplementationAndMatches) {
  auto a = cuda::make_cuda_backend(0, cuda::FfnChoice::kAuto);
  ASSERT_TRUE(a.ok());
  const int h = 128;
  const std::vector<int> offsets = {0, 16, 32, 48, 64};
  const auto experts = make_experts(4, h, 64, DType::kBf16);
  const auto rows = random_values(sz(64 * h), 0.0F, 1.0F, 6, DType::kBf16);
  std::vector<float> ref(rows.size()), out(rows.size());
  cpu_->expert_ffn(ctx_, rows, offsets, experts, h, DType::kBf16, ref);
  round_to(DType::kBf16, ref);
  (*a)->expert_ffn(ctx_, rows, offsets, experts, h, DType::kBf16, out);
  (*a)->expert_ffn(ctx_, rows, offsets, experts, h, DType::kBf16, out);  // cached choice
  EXPECT_LE(nmse(out, ref), nmse_bound(DType::kBf16, h));
}

TEST_F(CudaOps, ExpertFfnRejectsMismatchedOffsets) {
  const auto experts = make_experts(2, 64, 32, DType::kFp32);
  std::vector<float> rows(64 * 10), out(rows.size());
  const std::vector<int> bad = {0, 5};  // needs 3 entries
  EXPECT_THROW(grouped_->expert_ffn(ctx_, rows, bad, experts, 64, DType::kFp32, out),
               std::invalid_argument);
}

TEST_F(CudaOps, SharedExpertMatchesCpuGatedAndUngated) {
  const int t = 53;
  const int h = 256;
  const int w = 320;
  for (const DType dtype : {DType::kFp32, DType::kBf16, DType::kFp16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const ExpertWeights sw = make_experts(1, h, w, dtype)[0];
    const auto x = random_values(sz(t * h), 0.0F, 1.0F, 7, dtype);
    const auto gate = random_values(sz(h), -0.05F, 0.05F, 8, DType::kFp32);
    for (const bool gated : {false, true}) {
      std::vector<float> ref(sz(t * h)), out(ref.size());
      const std::span<const float> g =
          gated ? std::span<const float>(gate) : std::span<const float>();
      cpu_->shared_expert(ctx_, x, t, h, sw, g, dtype, ref);
      grouped_->shared_expert(ctx_, x, t, h, sw, g, dtype, out);
      ASSERT_TRUE(any_nonzero(ref));
      EXPECT_LE(nmse(out, ref), nmse_bound(dtype, h)) << (gated ? "gated" : "ungated");
    }
  }
}

// The ops the profiler times one by one (gemm stored in fp32 or the dtype, SiLU·mul, the
// shared gate) against the CPU backend; fp8 is no storage dtype of these ops, and gemm_fp8 takes
// fp8 weights only.
TEST_F(CudaOps, GemmSiluGateMatchCpuAndFp8IsRefused) {
  const int m = 37, k = 192, n = 96;
  for (const DType dtype : {DType::kFp32, DType::kBf16, DType::kFp16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const auto a = random_values(sz(m * k), -1.0F, 1.0F, 11, dtype);
    const auto b = random_values(sz(k * n), -0.1F, 0.1F, 12, dtype);
    for (const DType out_dtype : {DType::kFp32, dtype}) {
      std::vector<float> ref(sz(m * n)), out(ref.size());
      cpu_->gemm(ctx_, a, m, k, b, n, dtype, out_dtype, ref);
      grouped_->gemm(ctx_, a, m, k, b, n, dtype, out_dtype, out);
      ASSERT_TRUE(any_nonzero(ref));
      EXPECT_LE(nmse(out, ref), nmse_bound(out_dtype, k));
    }
    const auto gu = random_values(sz(m * 2 * n), -4.0F, 4.0F, 13, DType::kFp32);
    std::vector<float> ref(sz(m * n)), out(ref.size());
    cpu_->silu_mul(ctx_, gu, m, n, dtype, ref);
    grouped_->silu_mul(ctx_, gu, m, n, dtype, out);
    EXPECT_LE(nmse(out, ref), nmse_bound(dtype, 1));
  }
  const auto x = random_values(sz(m * k), 0.0F, 1.0F, 14, DType::kFp32);
  const auto gate = random_values(sz(k), -0.05F, 0.05F, 15, DType::kFp32);
  const auto y0 = random_values(sz(m * k), 1.0F, 2.0F, 16, DType::kFp32);
  std::vector<float> ref = y0, out = y0;
  cpu_->sigmoid_gate(ctx_, x, m, k, gate, ref);
  grouped_->sigmoid_gate(ctx_, x, m, k, gate, out);
  EXPECT_LE(nmse(out, ref), nmse_bound(DType::kFp32, k));
  EXPECT_FALSE(grouped_->can_implement({BackendOp::kGemm, DType::kFp8}).ok());
  EXPECT_TRUE(grouped_->can_implement({BackendOp::kGemm, DType::kBf16}).ok());
  EXPECT_TRUE(grouped_->can_implement({BackendOp::kGemmFp8Block, DType::kFp8}).ok());
  EXPECT_FALSE(grouped_->can_implement({BackendOp::kGemmFp8Block, DType::kBf16}).ok());
}

// The device clock the profiler times GPU ops by: CUDA events around each op's kernels, not its
// host copies. A 69 GFLOP bf16 GEMM whose fp32 operands (100 MB) cross PCIe each call: the
// kernel time is positive, below the call's wall time, and no faster than 5 PFLOP/s (above any
// GPU's dense bf16 peak); an op with no rows adds nothing; the CPU backend has no device clock.
TEST_F(CudaOps, DeviceSecondsTimeTheKernelsAlone) {
  EXPECT_FALSE(cpu_->device_seconds().has_value());
  EXPECT_FALSE(grouped_->device_name().empty());
  const int m = 2048, k = 4096, n = 4096;
  const auto a = random_values(sz(m) * sz(k), -1.0F, 1.0F, 21, DType::kBf16);
  const auto b = random_values(sz(k) * sz(n), -0.1F, 0.1F, 22, DType::kBf16);
  std::vector<float> c(sz(m) * sz(n));
  grouped_->gemm(ctx_, a, m, k, b, n, DType::kBf16, DType::kBf16, c);  // warm-up (cuBLAS init)
  for (int rep = 0; rep < 3; ++rep) {
    const double d0 = *grouped_->device_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    grouped_->gemm(ctx_, a, m, k, b, n, DType::kBf16, DType::kBf16, c);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double d = *grouped_->device_seconds() - d0;
    EXPECT_GT(d, 2.0 * m * k * n / 5e15);
    EXPECT_LT(d, wall);
  }
  const double before = *grouped_->device_seconds();
  grouped_->gemm(ctx_, a, 0, k, b, n, DType::kBf16, DType::kBf16, c);
  EXPECT_EQ(*grouped_->device_seconds(), before);
}

TEST_F(CudaOps, AttentionWithinTheReferenceBound) {
  // The GPU kernel's online softmax against the same double reference and bound as the CPU
  // backend: MHA prefill, GQA decode over several key tiles, a chunk after cached keys, MLA
  // absorbed decode with 576-wide latent keys.
  const AttentionShape shapes[] = {{2, 37, 37, 4, 4, 32, 32, 0.176F},
                                   {3, 1, 300, 8, 2, 64, 64, 0.125F},
                                   {2, 5, 20, 6, 3, 24, 24, 0.2F},
                                   {2, 1, 200, 16, 1, 576, 512, 0.0722F}};
  for (const AttentionShape& s : shapes) {
    for (const DType dt : {DType::kFp32, DType::kBf16, DType::kFp16}) {
      SCOPED_TRACE(std::to_string(s.heads) + " heads, kv_len " + std::to_string(s.kv_len) + " " +
                   std::string(dtype_name(dt)));
      const auto q = random_values(s.q_size(), -1.0F, 1.0F, 31, dt);
      const auto k = random_values(s.k_size(), -1.0F, 1.0F, 32, dt);
      const auto v = random_values(s.v_size(), -1.0F, 1.0F, 33, dt);
      std::vector<float> out(s.out_size(), std::nanf(""));
      grouped_->attention(ctx_, s, q, k, v, dt, out);
      const auto ref = attention_reference(s, q, k, v, dt);
      for (std::size_t i = 0; i < out.size(); ++i) {
        ASSERT_LE(std::abs(out[i] - ref.out[i]), ref.bound[i]) << "element " << i;
      }
    }
  }
}

TEST_F(CudaOps, RmsNormAndRopeWithinTheReferenceBound) {
  // The GPU's warp-per-row RMSNorm and thread-per-pair RoPE against the CPU backend's double
  // references and bounds: widths of a hidden state and of a head, a strided fused-q/k/v read,
  // MLA's partial rope dims.
  for (const DType dt : {DType::kFp32, DType::kBf16, DType::kFp16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    for (const int width : {128, 2048, 7168}) {
      const int rows = 9;
      const auto x = random_values(sz(rows * width), -2.0F, 2.0F, 41, dt);
      const auto w = random_values(sz(width), 0.5F, 1.5F, 42, DType::kFp32);
      std::vector<float> out(x.size(), std::nanf(""));
      grouped_->rms_norm(ctx_, x, rows, width, width, w, 1e-6F, dt, out);
      const auto ref = rms_norm_reference(x, rows, width, w, 1e-6F, dt);
      for (std::size_t i = 0; i < out.size(); ++i) {
        ASSERT_LE(std::abs(out[i] - ref.out[i]), ref.bound[i]) << "width " << width << " " << i;
      }
    }
    {
      // MLA's latent norm: the first 512 of each 576-wide kv_a row, written contiguous.
      const int rows = 5, width = 512, ld = 576;
      const auto x = random_values(sz(rows * ld), -2.0F, 2.0F, 44, dt);
      const auto w = random_values(sz(width), 0.5F, 1.5F, 45, DType::kFp32);
      std::vector<float> out(sz(rows * width), std::nanf(""));
      grouped_->rms_norm(ctx_, x, rows, width, ld, w, 1e-6F, dt, out);
      for (int r = 0; r < rows; ++r) {
        const auto row = std::span<const float>(x).subspan(sz(r * ld), sz(width));
        const auto ref = rms_norm_reference(row, 1, width, w, 1e-6F, dt);
        for (int c = 0; c < width; ++c) {
          ASSERT_LE(std::abs(out[sz(r * width + c)] - ref.out[sz(c)]), ref.bound[sz(c)])
              << "strided row " << r << " value " << c;
        }
      }
    }
    const auto cs = rope_cos_sin_cache(512, 64, 10000.0);
    const int rows = 7, heads = 3, head_dim = 192, ld = 700;
    const auto in = random_values(sz(rows * ld), -2.0F, 2.0F, 43, dt);
    const std::vector<int> pos = {0, 1, 2, 100, 200, 300, 511};
    std::vector<float> out(sz(rows * heads * head_dim), std::nanf(""));
    grouped_->rope(ctx_, in, ld, rows, heads, head_dim, 64, pos, cs, dt, out);
    const auto ref = rope_reference(in, ld, rows, heads, head_dim, 64, pos, cs, dt);
    for (std::size_t i = 0; i < out.size(); ++i) {
      ASSERT_LE(std::abs(out[i] - ref.out[i]), ref.bound[i]) << "rope element " << i;
    }
  }
}

TEST_F(CudaOps, CombineMatchesCpu) {
  const int t = 41;
  const int k = 6;
  const int h = 96;
  const int rows = t * k;
  for (const DType dtype : {DType::kFp32, DType::kBf16, DType::kFp16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const auto y = random_values(sz(rows * h), -1.0F, 1.0F, 11, dtype);
    const auto weights = random_values(sz(rows), 0.0F, 0.5F, 12, DType::kFp32);
    const auto shared = random_values(sz(t * h), -1.0F, 1.0F, 13, DType::kFp32);
    std::vector<int> pair_row(sz(rows));
    for (int i = 0; i < rows; ++i) pair_row[sz(i)] = (i * 37) % rows;  // a permutation
    for (const bool with_shared : {false, true}) {
      std::vector<float> ref(sz(t * h)), out(ref.size());
      const std::span<const float> s =
          with_shared ? std::span<const float>(shared) : std::span<const float>();
      cpu_->combine(ctx_, y, pair_row, weights, s, t, k, h, dtype, ref);
      grouped_->combine(ctx_, y, pair_row, weights, s, t, k, h, dtype, out);
      // The same fp32 operations in the same order: equal, or one dtype rounding apart where
      // the compiler contracted a CPU multiply-add.
      for (std::size_t i = 0; i < ref.size(); ++i) {
        ASSERT_NEAR(out[i], ref[i], 2.0 * unit_roundoff(dtype) * std::fabs(ref[i]) + 1e-6)
            << "element " << i;
      }
    }
  }
}

models::MoeModel load(const std::string& name) {
  auto m = models::load_model(name);
  EXPECT_TRUE(m.ok());
  return *m;
}

// The sharded layer at group size 1 (and two in-process ranks sharing the GPU) through the CUDA
// backend, against the dense reference: `verify` on the GPU.
TEST_F(CudaOps, VerifyQwen2AndDeepSeekV3OnGpu) {
  for (const auto& [model, scale] :
       {std::pair{"qwen2-57b-a14b", 32}, std::pair{"deepseek-v3", 32}}) {
    SCOPED_TRACE(model);
    VerifyRequest req;
    req.model = load(model);
    // Plain weights here; the fp8 formats: CudaOps.VerifyFp8FormatsOnGpu.
    ASSERT_TRUE(models::apply_weights_choice(req.model, "bf16").ok());
    req.scale = scale;
    req.token_counts = {64, 300};
    req.dtypes = {DType::kFp32, DType::kBf16, DType::kFp16};
    req.layouts = {Layout::of(1, 1, RankMapping::kTpInnermost)};
    req.dispatchers = {std::begin(kKernelDispatchers), std::end(kKernelDispatchers)};
    req.backend = "cuda";
    ASSERT_TRUE(check_request(req, 1).ok());
    std::vector<VerifyRow> rows;
    run_in_process(1, [&](Communicator& world) { rows = run_verify(world, req); });
    ASSERT_EQ(rows.size(), 2U * 3U * 3U);
    for (const auto& r : rows) {
      EXPECT_TRUE(r.passed) << dispatcher_name(r.layout.dispatcher) << " " << dtype_name(r.dtype)
                            << " T=" << r.num_tokens << " bound use " << r.max_bound_use;
      EXPECT_GT(r.max_abs_ref, 0.0);
    }
  }
}

// DeepSeek-V3 (1/8 width: H 896, expert width 256) in its own fp8 format (128×128 blocks,
// 1×128 activation groups: cuBLASLt's block-scaled fp8 matmul) and in the channel (per-token)
// and tensor (static) formats, every dispatcher, against the reference whose bound adds the
// backend's fp8 accumulation (Backend::fp8_accumulation).
TEST_F(CudaOps, VerifyFp8FormatsOnGpu) {
  for (const char* weights : {"fp8-block", "fp8-channel", "fp8-tensor"}) {
    SCOPED_TRACE(weights);
    VerifyRequest req;
    req.model = load("deepseek-v3");
    ASSERT_TRUE(models::apply_weights_choice(req.model, weights).ok());
    req.scale = 8;
    req.token_counts = {64, 300};
    req.dtypes = {DType::kBf16};
    req.layouts = {Layout::of(1, 1, RankMapping::kTpInnermost)};
    req.dispatchers = {std::begin(kKernelDispatchers), std::end(kKernelDispatchers)};
    req.backend = "cuda";
    ASSERT_TRUE(check_request(req, 1).ok());
    std::vector<VerifyRow> rows;
    run_in_process(1, [&](Communicator& world) { rows = run_verify(world, req); });
    ASSERT_EQ(rows.size(), 2U * std::size(kKernelDispatchers));
    for (const auto& r : rows) {
      EXPECT_TRUE(r.passed) << dispatcher_name(r.layout.dispatcher) << " T=" << r.num_tokens
                            << " bound use " << r.max_bound_use;
      EXPECT_GT(r.max_abs_ref, 0.0);
    }
  }
}

TEST_F(CudaOps, VerifyTwoInProcessRanksShareTheGpu) {
  VerifyRequest req;
  req.model = load("qwen2-57b-a14b");
  req.scale = 32;
  req.token_counts = {128};
  req.dtypes = {DType::kBf16};
  const LayerSpec spec = *LayerSpec::from_model(req.model, req.scale, DType::kFp32, 1);
  req.layouts = legal_layouts(spec, 2);
  req.dispatchers = {std::begin(kKernelDispatchers), std::end(kKernelDispatchers)};
  req.backend = "cuda";
  std::vector<VerifyRow> rows;
  run_in_process(2, [&](Communicator& world) {
    auto r = run_verify(world, req);
    if (world.rank() == 0) rows = std::move(r);
  });
  ASSERT_EQ(rows.size(), req.layouts.size() * 3U);
  for (const auto& r : rows)
    EXPECT_TRUE(r.passed) << r.layout.short_name() << " " << r.max_bound_use;
}

#if MOEPLAN_HAVE_NCCL
TEST_F(CudaOps, NcclCollectivesAtGroupSizeOne) {
  run_in_process(1, [&](Communicator& boot) {
    auto nccl = cuda::make_nccl_communicator(boot, 0);
    ASSERT_TRUE(nccl.ok()) << nccl.error().message;
    EXPECT_EQ((*nccl)->kind(), "nccl");
    testing::check_collectives(**nccl);
    // The sharded layer over NCCL (group size 1: EP and TP groups from ncclCommSplit).
    VerifyRequest req;
    req.model = load("qwen2-57b-a14b");
    req.scale = 32;
    req.token_counts = {96};
    req.dtypes = {DType::kBf16};
    req.layouts = {Layout::of(1, 1, RankMapping::kTpInnermost)};
    req.dispatchers = {std::begin(kKernelDispatchers), std::end(kKernelDispatchers)};
    req.backend = "cuda";
    const auto rows = run_verify(**nccl, req);
    ASSERT_EQ(rows.size(), 3U);
    for (const auto& r : rows) EXPECT_TRUE(r.passed) << dispatcher_name(r.layout.dispatcher);
  });
}

TEST_F(CudaOps, NcclCollectivesOnTwoGpus) {
  const std::string second = cuda::cuda_unusable_reason(1);
  if (!second.empty()) {
    GTEST_SKIP() << "multi-GPU collectives need a multi-GPU machine (NCCL refuses two ranks on "
                    "one GPU): "
                 << second;
  }
  run_in_process(2, [&](Communicator& boot) {
    auto nccl = cuda::make_nccl_communicator(boot, boot.rank());
    ASSERT_TRUE(nccl.ok()) << nccl.error().message;
    testing::check_collectives(**nccl);
  });
}
#endif

}  // namespace
}  // namespace test_cuda_backend
}  // namespace moeplan::kernels
