// CPU kernel throughput: the grouped expert FFN at Qwen2-57B-A14B's shapes (H 3584, I 2560) for
// uniform and skewed per-expert token counts, next to one Eigen dense GEMM of the same FLOPs.
// Counters: GFLOP (per second) and of_peak, the fraction of this core's peak fp32 FMA rate (64
// FLOP/cycle with two 512-bit FMA pipes, at the clock /proc/cpuinfo reports).
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <cmath>
#include <fstream>
#include <numeric>
#include <string>

#include "kernels/backend.hpp"
#include "kernels/layer_spec.hpp"

namespace {

using moeplan::kernels::ExpertWeights;

constexpr int kHidden = 3584;
constexpr int kWidth = 2560;
constexpr int kLocalExperts = 8;

double cpu_ghz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu MHz", 0) == 0) return std::stod(line.substr(line.find(':') + 1)) / 1000.0;
  }
  return 0.0;
}

void set_counters(benchmark::State& state, double flops_per_iter) {
  state.counters["GFLOP"] =
      benchmark::Counter(flops_per_iter * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  const double peak = 64.0 * cpu_ghz() * 1e9;
  if (peak > 0.0) {
    state.counters["of_peak"] =
        benchmark::Counter(flops_per_iter / peak, benchmark::Counter::kIsIterationInvariantRate);
  }
}

std::vector<ExpertWeights> make_experts(moeplan::DType dtype, bool fp8) {
  moeplan::kernels::LayerSpec s;
  s.hidden = kHidden;
  s.intermediate = kWidth;
  s.num_experts = kLocalExperts;
  s.dtype = dtype;
  s.seed = 1;
  if (fp8) {  // DeepSeek-V3's recipe: 128 × 128 weight blocks, 1 × 128 activation groups
    s.fp8_scheme = moeplan::WeightScheme::kFp8Block;
    s.fp8_block_out = s.fp8_block_in = 128;
    s.fp8_act = moeplan::kernels::Fp8Act::groups(128);
  }
  std::vector<ExpertWeights> out;
  for (int e = 0; e < kLocalExperts; ++e) out.push_back(moeplan::kernels::make_expert(s, e, 0, 1));
  return out;
}

const std::vector<ExpertWeights>& experts() {
  static const std::vector<ExpertWeights> w = make_experts(moeplan::DType::kFp32, false);
  return w;
}

// Rows per local expert: uniform, or power-law (α = 1.2 over expert rank) with the same total.
std::vector<int> offsets_for(int total_rows, bool skewed) {
  std::vector<double> share(kLocalExperts, 1.0);
  if (skewed) {
    for (int e = 0; e < kLocalExperts; ++e)
      share[static_cast<std::size_t>(e)] = std::pow(e + 1.0, -1.2);
  }
  const double sum = std::accumulate(share.begin(), share.end(), 0.0);
  std::vector<int> offsets(kLocalExperts + 1, 0);
  for (int e = 0; e < kLocalExperts; ++e) {
    const int rows =
        e + 1 == kLocalExperts
            ? total_rows - offsets[static_cast<std::size_t>(e)]
            : static_cast<int>(std::lround(total_rows * share[static_cast<std::size_t>(e)] / sum));
    offsets[static_cast<std::size_t>(e) + 1] = offsets[static_cast<std::size_t>(e)] + rows;
  }
  return offsets;
}

void BM_GroupedExpertFfn(benchmark::State& state) {
  const int total = static_cast<int>(state.range(0));
  const bool skewed = state.range(1) != 0;
  const auto offsets = offsets_for(total, skewed);
  std::vector<float> rows(static_cast<std::size_t>(total) * kHidden, 0.25F);
  std::vector<float> out(rows.size());
  auto be = moeplan::kernels::make_cpu_backend();
  const auto& weights = experts();  // generated once, outside the timing
  for (auto _ : state) {
    be->expert_ffn(moeplan::kernels::OpContext{}, rows, offsets, weights, kHidden,
                   moeplan::DType::kFp32, out);
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(state, 2.0 * 3.0 * kHidden * kWidth * total);
  state.SetLabel(skewed ? "power-law 1.2" : "uniform");
}
BENCHMARK(BM_GroupedExpertFfn)
    ->ArgsProduct({{512, 4096}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// bf16 storage (plain weights) against fp8 block-scaled weights with bf16 storage: the weights
// read from their e4m3 codes and block scales each call, the rows and the activation quantized
// in 1 × 128 groups (issue 17's target: fp8 at ≥ 0.7× the bf16 path's speed).
void grouped_ffn_at(benchmark::State& state, const std::vector<ExpertWeights>& weights,
                    const char* label) {
  const int total = static_cast<int>(state.range(0));
  const auto offsets = offsets_for(total, false);
  std::vector<float> rows(static_cast<std::size_t>(total) * kHidden, 0.25F);
  std::vector<float> out(rows.size());
  auto be = moeplan::kernels::make_cpu_backend();
  for (auto _ : state) {
    be->expert_ffn(moeplan::kernels::OpContext{}, rows, offsets, weights, kHidden,
                   moeplan::DType::kBf16, out);
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(state, 2.0 * 3.0 * kHidden * kWidth * total);
  state.SetLabel(label);
}

void BM_GroupedExpertFfnBf16(benchmark::State& state) {
  static const std::vector<ExpertWeights> w = make_experts(moeplan::DType::kBf16, false);
  grouped_ffn_at(state, w, "bf16, uniform");
}
BENCHMARK(BM_GroupedExpertFfnBf16)
    ->Arg(64)
    ->Arg(512)
    ->Arg(4096)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_GroupedExpertFfnFp8Block(benchmark::State& state) {
  static const std::vector<ExpertWeights> w = make_experts(moeplan::DType::kBf16, true);
  grouped_ffn_at(state, w, "fp8 128x128 blocks, bf16 storage, uniform");
}
BENCHMARK(BM_GroupedExpertFfnFp8Block)
    ->Arg(64)
    ->Arg(512)
    ->Arg(4096)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The same FLOPs as one dense GEMM: [rows × H] · [H × 3I].
void BM_EigenDenseGemm(benchmark::State& state) {
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int total = static_cast<int>(state.range(0));
  const RowMat a = RowMat::Constant(total, kHidden, 0.25F);
  const RowMat b = RowMat::Constant(kHidden, 3 * kWidth, 0.01F);
  RowMat c(total, 3 * kWidth);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  set_counters(state, 2.0 * 3.0 * kHidden * kWidth * total);
}
BENCHMARK(BM_EigenDenseGemm)->Arg(512)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
