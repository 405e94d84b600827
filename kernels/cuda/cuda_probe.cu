// CUDA runtime probe: device inventory and a kernel that proves the device executes code.
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/cuda_probe.hpp"

namespace moeplan::kernels::cuda {

namespace {

// Each thread writes its global index times three; the host checks every element.
__global__ void probe_kernel(int* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = 3 * i;
}

std::string error_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

bool run_probe_kernel(std::string& error) {
  constexpr int kN = 1024;
  int* device = nullptr;
  cudaError_t e = cudaMalloc(&device, kN * sizeof(int));
  if (e != cudaSuccess) {
    error = "cudaMalloc: " + error_text(e);
    return false;
  }
  probe_kernel<<<(kN + 255) / 256, 256>>>(device, kN);
  e = cudaGetLastError();
  int host[kN] = {};
  if (e == cudaSuccess) e = cudaMemcpy(host, device, sizeof(host), cudaMemcpyDeviceToHost);
  cudaFree(device);
  if (e != cudaSuccess) {
    error = "probe kernel: " + error_text(e);
    return false;
  }
  for (int i = 0; i < kN; ++i) {
    if (host[i] != 3 * i) {
      error = "probe kernel wrote wrong values";
      return false;
    }
  }
  return true;
}

}  // namespace

CudaProbe probe_cuda() {
  CudaProbe p;
  cudaRuntimeGetVersion(&p.runtime_version);
  if (cudaDriverGetVersion(&p.driver_version) != cudaSuccess) p.driver_version = 0;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    p.error = error_text(e);
    cudaGetLastError();  // clear the sticky error state
    return p;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
    p.devices.push_back({prop.name, prop.major, prop.minor, prop.multiProcessorCount,
                         static_cast<double>(prop.totalGlobalMem)});
  }
  if (p.devices.empty()) {
    p.error = "no CUDA device";
    return p;
  }
  p.kernel_ran = run_probe_kernel(p.error);
  return p;
}

}  // namespace moeplan::kernels::cuda
