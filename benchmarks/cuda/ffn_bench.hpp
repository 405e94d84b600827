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

  /// Seconds per router (logit GEMM + fused top-k) and permute (histogram, scan, scatter, row
  /// gather) of `num_tokens` tokens over `total_experts` experts, top-k `top_k`, keeping the
  /// experts [0, num_experts) of this benchmark (softmax greedy routing).
  double time_router_permute(int num_tokens, int total_experts, int top_k, int reps);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace moeplan::kernels::cuda
