// The CUDA backend's fp8 GEMM (kernels/cuda/fp8_gemm.hpp): the device quantization against the
// CPU's bit for bit, and gemm_fp8 against the CPU backend within the derived bound, in each
// weight format (128×128 blocks with 1×128 activation groups, channel scales with per-token
// activations, a tensor scale with a static activation scale) and on a shape cuBLASLt's fp8
// matmul cannot take (the emulated path). Every test skips, saying why, without a usable device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/cuda/cuda_backend.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/expert_ffn.hpp"
#include "kernels/cuda/fp8_gemm.hpp"
#include "kernels/dtype_convert.hpp"
#include "kernels/fp8.hpp"
#include "kernels/reference.hpp"

namespace moeplan::kernels {
namespace test_cuda_fp8 {
namespace {

std::size_t sz(int v) { return static_cast<std::size_t>(v); }

std::vector<float> uniform(std::size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

class CudaFp8 : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = cuda::cuda_unusable_reason(0);
    if (!why.empty()) GTEST_SKIP() << "no usable CUDA device: " << why;
    cudaDeviceProp prop{};
    ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    major_ = prop.major;
    cpu_ = make_cpu_backend();
    auto g = cuda::make_cuda_backend(0, cuda::FfnChoice::kGrouped);
    ASSERT_TRUE(g.ok()) << g.error().message;
    gpu_ = std::move(*g);
  }
  int major_ = 0;
  std::unique_ptr<Backend> cpu_, gpu_;
  OpContext ctx_;
};

// Values that exercise the cast: zeros, an all-zero group, exact midpoints between e4m3 values
// (ties to even), and with a static scale magnitudes past ±448 (saturation).
std::vector<float> quantization_input(int rows, int k) {
  std::vector<float> x = uniform(sz(rows) * sz(k), -3.0F, 3.0F, 41);
  for (int c = 128; c < 256 && c < k; ++c) x[sz(1) * sz(k) + sz(c)] = 0.0F;  // row 1, group 1
  const float special[] = {0.0F, -0.0F, 1.0625F, 1.1875F, -1.0625F, 10.0F, -1e30F, 0.0019531F};
  for (int i = 0; i < 8; ++i) x[sz(2) * sz(k) + sz(i)] = special[i];
  return x;
}

TEST_F(CudaFp8, QuantizationIsTheCpusBitForBit) {
  const int rows = 5;
  const int k = 384;
  const std::vector<float> x = quantization_input(rows, k);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  {
    cuda::ExpertFfn ffn(stream);
    cuda::Fp8Gemm fp8(stream, ffn);
    cuda::DeviceBuffer dx;
    float* d = dx.reserve_as<float>(x.size());
    ASSERT_EQ(cudaMemcpy(d, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    for (const Fp8Act& act :
         {Fp8Act::groups(128), Fp8Act::token(), Fp8Act::fixed(0.01F), Fp8Act::fixed(1.0F)}) {
      SCOPED_TRACE(act.describe() + (act.kind == Fp8Act::Kind::kStatic
                                         ? " " + std::to_string(act.scale)
                                         : std::string()));
      const cuda::Fp8DeviceAct q = fp8.quantize(d, rows, k, act);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      std::vector<std::uint8_t> codes(x.size());
      ASSERT_EQ(cudaMemcpy(codes.data(), q.codes, codes.size(), cudaMemcpyDeviceToHost),
                cudaSuccess);
      if (act.kind == Fp8Act::Kind::kStatic) {
        for (std::size_t i = 0; i < x.size(); ++i) {
          ASSERT_EQ(codes[i], f32_to_e4m3(x[i] / act.scale)) << "value " << x[i];
        }
        continue;
      }
      const int group = act.kind == Fp8Act::Kind::kGroups ? act.group : k;
      const int groups = (k + group - 1) / group;
      std::vector<float> scales(sz(groups) * sz(rows));
      ASSERT_EQ(cudaMemcpy(scales.data(), q.scales, scales.size() * sizeof(float),
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
      for (int r = 0; r < rows; ++r) {
        std::vector<std::uint8_t> want(sz(k));
        std::vector<float> want_scales(sz(groups));
        quantize_blocks(std::span(x).subspan(sz(r) * sz(k), sz(k)), 1, k, 1, group, want,
                        want_scales);
        for (int c = 0; c < k; ++c) {
          ASSERT_EQ(codes[sz(r) * sz(k) + sz(c)], want[sz(c)]) << "row " << r << " col " << c;
        }
        for (int g = 0; g < groups; ++g) {
          // Outer-dimension major, as cuBLASLt reads VEC128 and OUTER_VEC scales.
          ASSERT_EQ(scales[sz(g) * sz(rows) + sz(r)], want_scales[sz(g)]) << "row " << r;
        }
      }
    }
  }
  cudaStreamDestroy(stream);
}

struct GemmCase {
  std::string name;
  int m, k, cols, parts, block_rows, block_cols;
  Fp8Act act;
  bool cublaslt;  ///< cuBLASLt's fp8 matmul takes it (sm_90)
};

// c = q(a) · [parts] on the GPU against the CPU backend. Both use the same codes and scales (the
// quantization is bit-exact, above), so they differ only in accumulation: the CPU sums the
// products in fp32 (γ_k·S, S = Σ|q(a)|·|w| per element), the GPU in fp32 too on the emulated
// path and, through cuBLASLt, in the tensor cores' accumulator within each chunk
// (Backend::fp8_accumulation) and fp32 beyond — |gpu − cpu| ≤ (2γ_k + extra(k))·S. The weights'
// blocks have scales 1, 2, 4, 8 in turn so that a scale laid out wrongly errs by far more.
TEST_F(CudaFp8, GemmMatchesCpuWithinTheAccumulationBound) {
  const std::vector<GemmCase> cases = {
      {"128x128 blocks, 1x128 groups", 37, 512, 256, 2, 128, 128, Fp8Act::groups(128), true},
      {"channel scales, per token", 37, 256, 192, 1, 256, 1, Fp8Act::token(), true},
      {"tensor scale, static", 21, 256, 160, 1, 256, 160, Fp8Act::fixed(0.02F), true},
      {"128x128 blocks, K 200 (emulated)", 9, 200, 128, 2, 128, 128, Fp8Act::groups(128), false},
  };
  for (const GemmCase& tc : cases) {
    SCOPED_TRACE(tc.name);
    const int ld = tc.parts * tc.cols;
    std::vector<float> w = uniform(sz(tc.k) * sz(ld), -1.0F, 1.0F, 51);
    for (int r = 0; r < tc.k; ++r) {
      for (int c = 0; c < ld; ++c) {
        w[sz(r) * sz(ld) + sz(c)] *= std::ldexp(1.0F, (r / 128 + c / 128) % 4);
      }
    }
    std::vector<std::uint8_t> codes(w.size());
    std::vector<std::vector<float>> scales(sz(tc.parts));
    std::vector<Fp8Part> parts;
    for (int p = 0; p < tc.parts; ++p) {
      quantize_part(w, ld, p * tc.cols, tc.k, tc.cols, tc.block_rows, tc.block_cols, codes,
                    scales[sz(p)]);
    }
    for (int p = 0; p < tc.parts; ++p) {
      parts.push_back({codes.data(), ld, p * tc.cols, tc.cols, scales[sz(p)].data(), tc.block_rows,
                       tc.block_cols});
    }
    std::vector<float> a = uniform(sz(tc.m) * sz(tc.k), -1.0F, 1.0F, 52);
    for (int c = 0; c < tc.k; ++c) a[sz(3) * sz(tc.k) + sz(c)] *= 8.0F;
    std::vector<float> ref(sz(tc.m) * sz(ld)), out(ref.size(), -1.0F);
    cpu_->gemm_fp8(ctx_, a, tc.m, tc.k, tc.act, parts, ref);
    const auto before = *cuda::fp8_path_counts(*gpu_);
    gpu_->gemm_fp8(ctx_, a, tc.m, tc.k, tc.act, parts, out);
    const auto after = *cuda::fp8_path_counts(*gpu_);
    const auto lt = after.cublaslt - before.cublaslt;
    const auto emulated = after.emulated - before.emulated;
    EXPECT_EQ(lt + emulated, static_cast<std::uint64_t>(tc.parts));
    if (tc.cublaslt && major_ == 9) {
      EXPECT_EQ(lt, static_cast<std::uint64_t>(tc.parts))
          << "cuBLASLt refused the format: " << after.refusal;
    }
    if (!tc.cublaslt) {
      EXPECT_EQ(emulated, static_cast<std::uint64_t>(tc.parts));
    }
    std::cout << "[ fp8 ] " << tc.name << ": " << lt << " cuBLASLt, " << emulated << " emulated\n";

    std::vector<float> qa = a;
    fake_quantize_activations(qa.data(), tc.m, tc.k, tc.act);
    const bool blocks = tc.block_rows == 128 && tc.block_cols == 128;
    const Fp8Accumulation acc = gpu_->fp8_accumulation(tc.act, blocks ? 128 : 0, blocks ? 128 : 0);
    const double u = std::ldexp(1.0, -24);
    const double gamma = tc.k * u / (1.0 - tc.k * u);
    const double rel = 2.0 * gamma + acc.extra(tc.k);
    double worst = 0.0;
    for (int i = 0; i < tc.m; ++i) {
      for (int j = 0; j < ld; ++j) {
        double s = 0.0;
        for (int l = 0; l < tc.k; ++l) {
          s += std::fabs(double{qa[sz(i) * sz(tc.k) + sz(l)]}) *
               std::fabs(double{w[sz(l) * sz(ld) + sz(j)]});
        }
        const std::size_t e = sz(i) * sz(ld) + sz(j);
        const double diff = std::fabs(double{out[e]} - double{ref[e]});
        ASSERT_LE(diff, rel * s + 1e-30)
            << "c[" << i << "][" << j << "]: gpu " << out[e] << ", cpu " << ref[e] << ", S " << s;
        if (s > 0.0) worst = std::max(worst, diff / (rel * s));
      }
    }
    std::cout << "[ fp8 ] " << tc.name << ": worst use of the bound " << worst << "\n";
  }
}

// The fp8 expert MLP on the GPU (the grouped FFN over three experts, one empty, and the shared
// expert) against the reference MLP and its derived bound, which adds the backend's fp8
// accumulation (mlp_reference with Backend::fp8_accumulation): each row, stored in the dtype as
// the layer stores it, within the bound. The shared expert's gate: the GPU's gated rows equal
// the CPU's gate applied to the GPU's ungated rows within the dot product's order (the same
// NMSE bound as CudaOps' tests: (2√H·u₃₂)²).
TEST_F(CudaFp8, ExpertFfnAndSharedExpertWithinTheReferenceBound) {
  const int h = 256;
  const int width = 128;
  const DType dtype = DType::kBf16;
  std::vector<ExpertWeights> experts(3);
  for (int e = 0; e < 3; ++e) {
    ExpertWeights& x = experts[sz(e)];
    x.width = width;
    x.gate_up = uniform(sz(h) * 2 * sz(width), -0.1F, 0.1F, static_cast<unsigned>(60 + e));
    x.down = uniform(sz(width) * sz(h), -0.1F, 0.1F, static_cast<unsigned>(70 + e));
    Fp8ExpertWeights f;
    f.gate_up_block_rows = f.gate_up_block_cols = f.down_block_rows = f.down_block_cols = 128;
    f.act = Fp8Act::groups(128);
    f.gate_up.resize(x.gate_up.size());
    f.down.resize(x.down.size());
    // quantize_part replaces the values by their dequantized ones (what the reference reads).
    quantize_part(x.gate_up, 2 * width, 0, h, width, 128, 128, f.gate_up, f.gate_scales);
    quantize_part(x.gate_up, 2 * width, width, h, width, 128, 128, f.gate_up, f.up_scales);
    quantize_part(x.down, h, 0, width, h, 128, 128, f.down, f.down_scales);
    x.fp8.push_back(std::move(f));
  }
  const Fp8Accumulation acc = gpu_->fp8_accumulation(Fp8Act::groups(128), 128, 128);
  const std::vector<int> offsets = {0, 19, 19, 52};
  const auto rows = uniform(sz(52) * sz(h), -1.0F, 1.0F, 61);
  std::vector<float> out(rows.size(), std::nanf(""));
  gpu_->expert_ffn(ctx_, rows, offsets, experts, h, dtype, out);
  const auto check = [&](std::span<const float> x, std::span<const float> y, int m,
                         const ExpertWeights& w, const std::string& what) {
    const MlpReference ref = mlp_reference(x, m, h, w, dtype, {}, {}, acc);
    for (std::size_t i = 0; i < ref.y.size(); ++i) {
      const float v = round_to(dtype, y[i]);
      ASSERT_LE(std::fabs(double{v} - ref.y[i]), ref.bound[i])
          << what << " row " << i / sz(h) << ": gpu " << y[i] << ", reference " << ref.y[i];
    }
  };
  for (int e = 0; e < 3; ++e) {
    const int r0 = offsets[sz(e)];
    const int m = offsets[sz(e) + 1] - r0;
    if (m == 0) continue;
    const std::size_t off = sz(r0) * sz(h), n = sz(m) * sz(h);
    check(std::span(rows).subspan(off, n), std::span(out).subspan(off, n), m, experts[sz(e)],
          "expert " + std::to_string(e));
  }
  const int t = 19;
  const std::span<const float> x(rows.data(), sz(t) * sz(h));
  std::vector<float> plain(x.size(), std::nanf("")), gated(x.size(), std::nanf(""));
  gpu_->shared_expert(ctx_, x, t, h, experts[0], {}, dtype, plain);
  check(x, plain, t, experts[0], "shared expert");
  const auto gate = uniform(sz(h), -0.05F, 0.05F, 62);
  gpu_->shared_expert(ctx_, x, t, h, experts[0], gate, dtype, gated);
  std::vector<float> want = plain;
  cpu_->sigmoid_gate(ctx_, x, t, h, gate, want);
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    num += (double{gated[i]} - want[i]) * (double{gated[i]} - want[i]);
    den += double{want[i]} * want[i];
  }
  ASSERT_GT(den, 0.0);
  const double r = 2.0 * std::sqrt(double{h}) * std::ldexp(1.0, -24);
  EXPECT_LE(num / den, r * r);
}

}  // namespace
}  // namespace test_cuda_fp8
}  // namespace moeplan::kernels
