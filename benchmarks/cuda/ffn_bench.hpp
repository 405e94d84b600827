// Device timing of the MoE kernels for the CUDA kernel benchmark, as plain C++ (no CUDA
// headers): the grouped expert FFN by either implementation, dense cuBLAS GEMMs of the same
// FLOPs, and router + permute. Times are device times from CUDA events.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "models/dtype.hpp"

namespace moeplan::kernels::cuda {

enum class BenchAlgo : std::uint8_t {
  kGrouped,  ///< cublasGemmGroupedBatchedEx
  kLtLoop,   ///< cuBLASLt per expert
  kDense,    ///< two dense GEMMs over all rows (the same FLOPs, no grouping)
};

class FfnBenchmark {
 public:
  /// Random weights of `num_experts` experts [H][2w], [w][H] and buffers for `max_rows` rows,
  /// on the current device, in `dtype`.
  FfnBenchmark(DType dtype, int hidden, int width, int num_experts, int max_rows);
  ~FfnBenchmark();
  FfnBenchmark(const FfnBenchmark&) = delete;
  FfnBenchmark& operator=(const FfnBenchmark&) = delete;

  /// Seconds per FFN (gate/up, SiLU-and-mul, down) over rows grouped by `offsets` (host,
  /// num_experts + 1), averaged over `reps` runs after a warm-up.
  double time_ffn(std::span<const int> offsets, BenchAlgo algo, int reps);

  /// Seconds per fp8 expert FFN (DeepSeek-V3's recipe: e4m3 weights with 128×128 block scales,
  /// activations quantized in 1×128 groups on the fly; kernels/cuda/fp8_gemm.hpp) over the same
  /// row groups, averaged over `reps` runs after a warm-up; `emulated` gets how many of its
  /// GEMMs ran emulated in fp32 (0 when cuBLASLt's fp8 matmul took them all). The fp8 weights
  /// are made on first use (random codes, uniform scales).
  double time_fp8_ffn(std::span<const int> offsets, int reps, std::uint64_t* emulated);

  /// Seconds per router (logit GEMM + fused top-k) and permute (histogram, scan, scatter, row
  /// gather) of `num_tokens` tokens over `total_experts` experts, top-k `top_k`, keeping the
  /// experts [0, num_experts) of this benchmark (softmax greedy routing).
  double time_router_permute(int num_tokens, int total_experts, int top_k, int reps);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace moeplan::kernels::cuda
