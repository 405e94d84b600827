// The NCCL communicator, as plain C++ (no CUDA or NCCL headers): the Communicator collectives on
// host buffers (staged through device memory) for verify and the tests, and the same
// collectives on device pointers, enqueued on the communicator's stream, with device memory
// (device_collectives(), kernels::DeviceCollectives) for the profiler.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "kernels/communicator.hpp"
#include "models/result.hpp"

namespace moeplan::kernels::cuda {

class NcclCommunicator : public Communicator {
 public:
  /// The CUDA stream (cudaStream_t) the device collectives are enqueued on.
  virtual void* stream() const = 0;
  virtual int device() const = 0;
  /// Waits for every enqueued collective.
  virtual void synchronize() = 0;
  // The same collectives on device pointers, and device memory: device_collectives() (never
  // null here).
};

/// NCCL over the ranks of `bootstrap` (MPI under mpirun, as nccl-tests: rank 0 calls
/// ncclGetUniqueId, the id is broadcast, every rank calls ncclCommInitRank), on CUDA device
/// `device`. Collective over `bootstrap`. NCCL refuses two ranks on one GPU ("Duplicate GPU
/// detected"): the error then says that multi-GPU collectives need a multi-GPU machine.
Result<std::unique_ptr<NcclCommunicator>> make_nccl_communicator(Communicator& bootstrap,
                                                                 int device);

/// The device a process with launcher-local rank `local_rank` uses: local_rank mod the device
/// count (0 when no device is visible).
int device_for_local_rank(int local_rank);

}  // namespace moeplan::kernels::cuda
