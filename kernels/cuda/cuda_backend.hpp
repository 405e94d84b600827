// The CUDA backend as plain C++ (no CUDA headers): the Backend ops on one device, taking host
// spans (copy in, run the device kernels, copy out); CUDA events around each op's kernels give
// the kernel-only time the profiler records (Backend::device_seconds).
#pragma once

#include <cstdint>
#include <memory>
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

}  // namespace moeplan::kernels::cuda
