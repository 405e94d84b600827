// Host-side view of the CUDA and NCCL runtimes, callable from plain C++ (no CUDA headers here).
#pragma once

#include <string>
#include <vector>

namespace moeplan::kernels::cuda {

struct CudaDeviceInfo {
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int num_sms = 0;
  double memory_bytes = 0.0;
};

struct CudaProbe {
  int runtime_version = 0;  ///< e.g. 13000
  int driver_version = 0;   ///< 0 when no driver is installed
  std::vector<CudaDeviceInfo> devices;
  bool kernel_ran = false;  ///< a probe kernel ran on device 0 and wrote the expected values
  std::string error;        ///< why no device is usable, when none is
};

/// Queries the runtime, lists devices and runs one small kernel on device 0 to prove it works.
CudaProbe probe_cuda();

/// NCCL's version code (e.g. 22809), or 0 when NCCL is not compiled in.
int nccl_version();

}  // namespace moeplan::kernels::cuda
