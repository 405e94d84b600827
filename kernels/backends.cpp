// The backend registry.
#include "kernels/backends.hpp"

#include <cstdio>

#include "kernels/backend.hpp"
#include "kernels/mpi_info.hpp"
#if MOEPLAN_HAVE_CUDA
#include "kernels/cuda/cuda_backend.hpp"
#include "kernels/cuda/cuda_probe.hpp"
#endif

namespace moeplan::kernels {

namespace {

[[maybe_unused]] std::string version_text(int code, int major_div, int minor_div, int minor_mod) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%d.%d", code / major_div, (code / minor_div) % minor_mod);
  return buf;
}

}  // namespace

Result<std::unique_ptr<Backend>> make_backend(const std::string& name,
                                              [[maybe_unused]] int device) {
  if (name == "cpu") return make_cpu_backend();
  if (name == "cuda") {
#if MOEPLAN_HAVE_CUDA
    return cuda::make_cuda_backend(device);
#else
    return input_error("backend", " cuda: not compiled in (nvcc not found at build time)");
#endif
  }
  return input_error("backend", ": expected cpu or cuda, got '" + name + "'");
}

std::vector<BackendInfo> backend_inventory() {
  std::vector<BackendInfo> out;
  out.push_back({"cpu", true, true, "reference backend"});

#if MOEPLAN_HAVE_CUDA
  const cuda::CudaProbe probe = cuda::probe_cuda();
  std::string cuda_detail = "runtime " + version_text(probe.runtime_version, 1000, 10, 100);
  if (!probe.devices.empty()) {
    cuda_detail += ", " + std::to_string(probe.devices.size()) +
                   " device(s): " + probe.devices.front().name + " (sm_" +
                   std::to_string(probe.devices.front().compute_major) +
                   std::to_string(probe.devices.front().compute_minor) + ")";
  }
  if (!probe.kernel_ran) cuda_detail += "; not usable: " + probe.error;
  out.push_back({"cuda", true, probe.kernel_ran, cuda_detail});
#else
  out.push_back({"cuda", false, false, "not compiled in (nvcc not found at build time)"});
#endif

#if MOEPLAN_HAVE_MPI
  const std::string mpi_version = mpi_library_version();
  const int world = launcher_world_size();
  out.push_back({"mpi", true, !mpi_version.empty(),
                 (mpi_version.empty() ? std::string("library not loadable") : mpi_version) +
                     (world > 1 ? ", launched with " + std::to_string(world) + " ranks"
                                : ", not under a launcher (1 process)")});
#else
  out.push_back({"mpi", false, false, "not compiled in (MPI not found at build time)"});
#endif

#if MOEPLAN_HAVE_NCCL
  const int nccl = cuda::nccl_version();
  std::string nccl_detail = "NCCL " + std::to_string(nccl / 10000) + "." +
                            std::to_string((nccl / 100) % 100) + "." + std::to_string(nccl % 100);
  if (!probe.kernel_ran) nccl_detail += "; not usable: needs a usable CUDA device";
  out.push_back({"nccl", true, probe.kernel_ran && nccl > 0, nccl_detail});
#else
  out.push_back({"nccl", false, false, "not compiled in (NCCL not found at build time)"});
#endif
  return out;
}

}  // namespace moeplan::kernels
