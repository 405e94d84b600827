// CUDA kernel throughput on one GPU: the grouped expert FFN (cuBLAS grouped GEMM and the cuBLASLt
// per-expert loop) at the expert shapes of Qwen2-57B-A14B, Qwen3-30B-A3B and DeepSeek-V3, EP 8
// (E/8 local experts, tokens·k rows spread evenly), for decode and prefill token counts per GPU,
// next to dense cuBLAS GEMMs of the same FLOPs; DeepSeek-V3's fp8 expert FFN (128×128 block
// scales, cuBLASLt's fp8 matmul) at the same token counts; and router + permute at 4096 tokens.
// Counters: TFLOPs (per second), of_989 (fraction of H100/H200 SXM dense bf16 peak, 989 TFLOP/s),
// vs_dense (dense time / this time: ≥ 0.6 is the target at prefill), of_layer (router and
// permute time over router + permute + grouped FFN); fp8: of_1979 (fraction of the H100/H200
// dense fp8 peak), vs_bf16 (the bf16 grouped FFN's time / this time), emulated (GEMMs that ran
// emulated in fp32: then the figure is not the fp8 tensor cores'). Without a usable device it
// prints why and exits 0.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "benchmarks/cuda/ffn_bench.hpp"
#include "kernels/cuda/cuda_backend.hpp"
#include "models/registry.hpp"

namespace {

using moeplan::DType;
using moeplan::kernels::cuda::BenchAlgo;
using moeplan::kernels::cuda::FfnBenchmark;

constexpr double kPeakBf16 = 989e12;
constexpr double kPeakFp8 = 1979e12;
constexpr int kEpSize = 8;
constexpr int kTimedReps = 10;
const char* const kModels[] = {"qwen2-57b-a14b", "qwen3-30b-a3b", "deepseek-v3"};
const int kTokens[] = {64, 256, 4096, 16384};  // per GPU: two decode batches, two prefill chunks

struct Shape {
  int hidden = 0;
  int width = 0;
  int num_experts = 0;  // total routed experts
  int local = 0;        // experts on one EP rank
  int top_k = 0;
};

Shape shape_of(const std::string& model) {
  const auto m = moeplan::models::load_model(model);
  if (!m) throw std::runtime_error(m.error().message);
  return {static_cast<int>(m->hidden_size), static_cast<int>(m->moe_intermediate_size),
          m->num_experts, m->num_experts / kEpSize, m->num_experts_per_tok};
}

// One benchmark fixture per model, allocated on first use and kept (weights are large).
FfnBenchmark& bench_for(const std::string& model, const Shape& s) {
  static std::map<std::string, std::unique_ptr<FfnBenchmark>> cache;
  auto& b = cache[model];
  if (!b) {
    const int max_rows = kTokens[std::size(kTokens) - 1] * s.top_k;
    b = std::make_unique<FfnBenchmark>(DType::kBf16, s.hidden, s.width, s.local, max_rows);
  }
  return *b;
}

std::vector<int> even_offsets(int rows, int experts) {
  std::vector<int> off(static_cast<std::size_t>(experts) + 1, 0);
  for (int e = 0; e < experts; ++e) {
    off[static_cast<std::size_t>(e) + 1] =
        static_cast<int>(static_cast<long long>(rows) * (e + 1) / experts);
  }
  return off;
}

// One FFN benchmark's case: the model's EP-8 rank at `tokens` tokens per GPU, rows spread
// evenly over its local experts, and the FFN's FLOPs.
struct FfnCase {
  FfnCase(const std::string& model, int tokens)
      : shape(shape_of(model)),
        bench(bench_for(model, shape)),
        rows(tokens * shape.top_k),
        offsets(even_offsets(rows, shape.local)),
        flops(2.0 * 3.0 * rows * static_cast<double>(shape.hidden) * shape.width) {}
  Shape shape;
  FfnBenchmark& bench;
  int rows;
  std::vector<int> offsets;
  double flops;
};

// TFLOP/s, the fraction of `peak` (counter `peak_name`) and the rows of an FFN case.
void rate_counters(benchmark::State& state, const FfnCase& c, const char* peak_name, double peak) {
  state.counters["TFLOPs"] =
      benchmark::Counter(c.flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
  state.counters[peak_name] =
      benchmark::Counter(c.flops / peak, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["rows"] = c.rows;
}

void bm_ffn(benchmark::State& state, const std::string& model, BenchAlgo algo, int tokens) {
  const FfnCase c(model, tokens);
  double seconds = 0.0;
  for (auto _ : state) {
    seconds = c.bench.time_ffn(c.offsets, algo, kTimedReps);
    state.SetIterationTime(seconds);
  }
  rate_counters(state, c, "of_989", kPeakBf16);
  if (algo != BenchAlgo::kDense) {
    const double dense = c.bench.time_ffn(c.offsets, BenchAlgo::kDense, kTimedReps);
    state.counters["vs_dense"] = dense / seconds;
  }
}

void bm_fp8_ffn(benchmark::State& state, const std::string& model, int tokens) {
  const FfnCase c(model, tokens);
  double seconds = 0.0;
  std::uint64_t emulated = 0;
  for (auto _ : state) {
    seconds = c.bench.time_fp8_ffn(c.offsets, kTimedReps, &emulated);
    state.SetIterationTime(seconds);
  }
  rate_counters(state, c, "of_1979", kPeakFp8);
  state.counters["vs_bf16"] =
      c.bench.time_ffn(c.offsets, BenchAlgo::kGrouped, kTimedReps) / seconds;
  state.counters["emulated"] = static_cast<double>(emulated);
}

void bm_router_permute(benchmark::State& state, const std::string& model, int tokens) {
  const Shape s = shape_of(model);
  FfnBenchmark& b = bench_for(model, s);
  double seconds = 0.0;
  for (auto _ : state) {
    seconds = b.time_router_permute(tokens, s.num_experts, s.top_k, kTimedReps);
    state.SetIterationTime(seconds);
  }
  const std::vector<int> off = even_offsets(tokens * s.top_k, s.local);
  const double ffn = b.time_ffn(off, BenchAlgo::kGrouped, kTimedReps);
  state.counters["of_layer"] = seconds / (seconds + ffn);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const std::string why = moeplan::kernels::cuda::cuda_unusable_reason(0);
  if (!why.empty()) {
    std::printf("bench_cuda_kernels: skipped: no usable CUDA device: %s\n", why.c_str());
    return 0;
  }
  for (const char* model : kModels) {
    for (const int tokens : kTokens) {
      for (const auto& [name, algo] :
           {std::pair{"grouped", BenchAlgo::kGrouped}, std::pair{"lt_loop", BenchAlgo::kLtLoop},
            std::pair{"dense", BenchAlgo::kDense}}) {
        const std::string label =
            std::string("ffn_bf16/") + model + "/" + name + "/" + std::to_string(tokens);
        benchmark::RegisterBenchmark(
            label.c_str(),
            [model, algo, tokens](benchmark::State& st) { bm_ffn(st, model, algo, tokens); })
            ->UseManualTime()
            ->Iterations(5)
            ->Unit(benchmark::kMicrosecond);
      }
    }
    if (std::string(model) == "deepseek-v3") {  // its published format
      for (const int tokens : kTokens) {
        benchmark::RegisterBenchmark(
            (std::string("ffn_fp8_block/") + model + "/" + std::to_string(tokens)).c_str(),
            [model, tokens](benchmark::State& st) { bm_fp8_ffn(st, model, tokens); })
            ->UseManualTime()
            ->Iterations(5)
            ->Unit(benchmark::kMicrosecond);
      }
    }
    benchmark::RegisterBenchmark(
        (std::string("router_permute/") + model + "/4096").c_str(),
        [model](benchmark::State& st) { bm_router_permute(st, model, 4096); })
        ->UseManualTime()
        ->Iterations(5)
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
