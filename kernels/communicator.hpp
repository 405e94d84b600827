// The Communicator interface: the collectives the sharded MoE layer needs, over a group of
// ranks, with sub-groups. Implementations: in-process threads (unit tests of any layout on one
// machine), MPI (real processes under mpirun), NCCL (the CUDA backend). Buffers are raw bytes
// except the reductions, which sum fp32 (or take the max of int64) element-wise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

namespace moeplan::kernels {

/// A GPU communicator's collectives on device memory, enqueued on its stream and not waited for:
/// what the profiler times, as nccl-tests does (device buffers, runs back to back, then one
/// synchronize). Same meaning as the Communicator collectives of the same name; pointers are
/// device memory from allocate().
class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  /// `bytes` of device memory (at least one byte), freed with the last copy of the handle.
  /// Throws std::bad_alloc (or a type derived from it) when the device cannot hold it.
  virtual std::shared_ptr<void> allocate(std::size_t bytes) = 0;
  /// Copies, waiting for them and for every collective enqueued before.
  virtual void upload(void* device, const void* host, std::size_t bytes) = 0;
  virtual void download(void* host, const void* device, std::size_t bytes) = 0;
  virtual void all_reduce_sum(float* data, std::size_t count) = 0;
  virtual void all_gather(const void* send, std::size_t bytes, void* recv) = 0;
  virtual void all_gather_v(const void* send, std::size_t send_bytes, void* recv,
                            std::span<const std::size_t> recv_bytes,
                            std::span<const std::size_t> recv_offsets) = 0;
  virtual void all_to_all(const void* send, std::size_t bytes_per_rank, void* recv) = 0;
  virtual void all_to_all_v(const void* send, std::span<const std::size_t> send_bytes,
                            std::span<const std::size_t> send_offsets, void* recv,
                            std::span<const std::size_t> recv_bytes,
                            std::span<const std::size_t> recv_offsets) = 0;
  virtual void reduce_scatter_sum(const float* send, float* recv, std::size_t count) = 0;
  /// Waits for every collective enqueued.
  virtual void synchronize() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string kind() const = 0;  ///< "inproc", "mpi", "nccl"

  virtual void barrier() = 0;
  /// In place: data[i] = Σ over ranks of data[i]; every rank gets the same values.
  virtual void all_reduce_sum(std::span<float> data) = 0;
  /// In place: data[i] = max over ranks.
  virtual void all_reduce_max(std::span<std::int64_t> data) = 0;
  /// send: this rank's block of `bytes`; recv: size()·bytes, block r from rank r.
  virtual void all_gather(const void* send, std::size_t bytes, void* recv) = 0;
  /// Variable all-gather: rank r contributes recv_bytes[r] bytes, placed at recv_offsets[r].
  virtual void all_gather_v(const void* send, std::size_t send_bytes, void* recv,
                            std::span<const std::size_t> recv_bytes,
                            std::span<const std::size_t> recv_offsets) = 0;
  /// Equal-split all-to-all: block r of `send` (bytes_per_rank) goes to rank r; block r of
  /// `recv` comes from rank r.
  virtual void all_to_all(const void* send, std::size_t bytes_per_rank, void* recv) = 0;
  /// Variable all-to-all: send_bytes[r] bytes at send_offsets[r] go to rank r; recv_bytes[r]
  /// bytes from rank r land at recv_offsets[r].
  virtual void all_to_all_v(const void* send, std::span<const std::size_t> send_bytes,
                            std::span<const std::size_t> send_offsets, void* recv,
                            std::span<const std::size_t> recv_bytes,
                            std::span<const std::size_t> recv_offsets) = 0;
  /// send: size()·count floats; recv[count] = Σ over ranks of send block rank().
  virtual void reduce_scatter_sum(std::span<const float> send, std::span<float> recv) = 0;
  /// Collective: ranks with the same color form a sub-group, ordered by key.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  /// The same group's collectives on device memory (NCCL), or null where the communicator
  /// moves host memory (in-process, MPI).
  virtual DeviceCollectives* device_collectives() { return nullptr; }
};

/// Runs `body(comm)` on `num_ranks` threads, each with an in-process communicator of that size,
/// and rethrows the first exception any rank threw (after all threads have stopped).
void run_in_process(int num_ranks, const std::function<void(Communicator&)>& body);

}  // namespace moeplan::kernels
