// The grouped expert FFN on device buffers: gate/up GEMM, SiLU-and-mul, down GEMM over the
// experts' row groups, by cuBLAS cublasGemmGroupedBatchedEx (one call per GEMM) or by a loop of
// cuBLASLt matmuls (one per expert); `pick` times both per shape and keeps the faster.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "models/dtype.hpp"

namespace moeplan::kernels::cuda {

enum class FfnAlgo : std::uint8_t {
  kGrouped,  ///< cublasGemmGroupedBatchedEx, dtype in and out, fp32 compute
  kLtLoop,   ///< one cublasLtMatmul per expert
};
std::string ffn_algo_name(FfnAlgo a);

/// One expert's weights on the device in `dtype` storage, row-major: gate_up [H][2w] (gate
/// columns first), down [w][H].
struct DeviceExpert {
  const void* gate_up = nullptr;
  const void* down = nullptr;
};

/// A grouped FFN call. `offsets` (host, num_experts + 1) group the rows; rows, gate_up (scratch
/// [rows][2w]), act (scratch [rows][w]) and out ([rows][H]) are device buffers in `dtype`.
struct FfnArgs {
  DType dtype = DType::kBf16;
  int hidden = 0;
  int width = 0;
  int num_experts = 0;
  const int* offsets = nullptr;
  const DeviceExpert* experts = nullptr;  ///< host array of num_experts
  const void* rows = nullptr;
  void* gate_up = nullptr;
  void* act = nullptr;
  void* out = nullptr;
};

class ExpertFfn {
 public:
  explicit ExpertFfn(cudaStream_t stream);
  ~ExpertFfn();
  ExpertFfn(const ExpertFfn&) = delete;
  ExpertFfn& operator=(const ExpertFfn&) = delete;

  /// Enqueues the FFN on the stream with algorithm `algo`.
  void run(FfnAlgo algo, const FfnArgs& args);
  /// The faster algorithm for this shape (dtype, H, w, experts, rows rounded up to a power of
  /// two): the first call per shape runs both, timed with events, and remembers the winner.
  FfnAlgo pick(const FfnArgs& args);

  /// y[rows][n] = x[rows][k] · w[k][n], row-major; x and w in `in`, y in `out` (fp32 or `in`),
  /// fp32 compute (no TF32): the router, the shared expert and the dense benchmark reference.
  void gemm(DType in, DType out, int rows, int n, int k, const void* x, const void* w, void* y);

  /// Milliseconds of `fn` run `reps` times on the stream (after one warm-up run).
  float time_ms(const std::function<void()>& fn, int reps);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace moeplan::kernels::cuda
