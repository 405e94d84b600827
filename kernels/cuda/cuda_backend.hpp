// The CUDA backend as plain C++ (no CUDA headers): the Backend ops on one device, taking host
// spans (copy in, run the device kernels, copy out); CUDA events around each op's kernels give
// the kernel-only time the profiler records (Backend::device_seconds).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kernels/backend.hpp"
#include "models/result.hpp"

namespace moeplan::kernels::cuda {

/// Which grouped-FFN implementation the backend runs.
enum class FfnChoice : std::uint8_t {
  kAuto,     ///< time both per shape on first use, keep the faster
  kGrouped,  ///< cublasGemmGroupedBatchedEx
  kLtLoop,   ///< one cuBLASLt matmul per expert
};

/// Empty when CUDA device `device` is usable (a probe kernel ran), else why not — e.g.
/// "cudaErrorInsufficientDriver (CUDA driver version is insufficient for CUDA runtime version)".
std::string cuda_unusable_reason(int device = 0);

/// The CUDA backend on `device`; an error when no usable device exists.
Result<std::unique_ptr<Backend>> make_cuda_backend(int device = 0,
                                                   FfnChoice ffn = FfnChoice::kAuto);

/// The fp8 GEMMs a CUDA backend has run, by path (kernels/cuda/fp8_gemm.hpp): through
/// cuBLASLt's fp8 matmul, or emulated in fp32 where cuBLASLt has no algorithm for the format or
/// shape. Empty for a backend that is not the CUDA one.
struct Fp8PathCounts {
  std::uint64_t cublaslt = 0;
  std::uint64_t emulated = 0;
  std::string refusal;  ///< why cuBLASLt last refused a matmul its heuristic offered, if it did
};
std::optional<Fp8PathCounts> fp8_path_counts(const Backend& backend);

}  // namespace moeplan::kernels::cuda
