// The backend registry: which compute backends and communicators were compiled in, and which
// are usable on this machine right now (a GPU driver present, an MPI library loadable).
#pragma once

#include <string>
#include <vector>

namespace moeplan::kernels {

/// One backend or communicator: "cpu", "cuda", "mpi", "nccl".
struct BackendInfo {
  std::string name;
  bool compiled = false;  ///< built into this binary
  bool usable = false;    ///< works on this machine now
  std::string detail;     ///< versions, devices, or why it is not usable
};

/// Every backend moeplan knows, in a fixed order (cpu, cuda, mpi, nccl). Probing CUDA runs a
/// tiny kernel on device 0 when a device exists.
std::vector<BackendInfo> backend_inventory();

}  // namespace moeplan::kernels
