// The NCCL communicator: collectives on the EP and TP groups (ncclCommSplit), all-to-all-v as
// grouped ncclSend/ncclRecv, errors with ncclGetErrorString and ncclGetLastError.
#include "kernels/cuda/nccl_communicator.hpp"

#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"

namespace moeplan::kernels::cuda {

namespace {

constexpr const char* kOneGpuHint =
    " (NCCL refuses two ranks on one GPU: multi-GPU collectives need a multi-GPU machine; on one "
    "GPU only groups of size 1 run)";

std::string nccl_message(ncclResult_t r, ncclComm_t comm) {
  std::string m = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') m += ": " + std::string(last);
  if (m.find("Duplicate GPU") != std::string::npos) m += kOneGpuHint;
  return m;
}

void check_nccl(ncclResult_t r, ncclComm_t comm, const char* expr, const char* file, int line) {
  if (r != ncclSuccess) throw_error(expr, file, line, nccl_message(r, comm));
}

#define MOEPLAN_NCCL_CHECK(comm, expr) check_nccl((expr), (comm), #expr, __FILE__, __LINE__)

// NOTE: ncclAlltoAll exists from NCCL 2.28 on. It is looked up at run time, so the same binary
// loads against an older libnccl.so.2 (as PyTorch wheels bring) and falls back to grouped
// ncclSend/ncclRecv there.
using AlltoAllFn = ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, ncclComm_t,
                                    cudaStream_t);
AlltoAllFn nccl_alltoall() {
  static const AlltoAllFn fn = [] {
    AlltoAllFn f = nullptr;
    void* sym = dlsym(RTLD_DEFAULT, "ncclAlltoAll");
    static_assert(sizeof(f) == sizeof(sym));
    std::memcpy(&f, &sym, sizeof(f));
    return f;
  }();
  return fn;
}

// A NCCL communicator's collectives on device memory, enqueued on its stream (what the host
// collectives stage through, and the profiler's DeviceCollectives), and device memory on its
// device.
class NcclDevice final : public DeviceCollectives {
 public:
  NcclDevice(ncclComm_t comm, cudaStream_t stream, int device, int size)
      : comm_(comm), stream_(stream), device_(device), size_(size) {}

  std::shared_ptr<void> allocate(std::size_t bytes) override {
    MOEPLAN_CUDA_CHECK(cudaSetDevice(device_));
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, std::max<std::size_t>(bytes, 1));
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      throw std::bad_alloc();
    }
    MOEPLAN_CUDA_CHECK(e);
    return {p, [](void* q) { cudaFree(q); }};
  }
  void upload(void* device, const void* host, std::size_t bytes) override {
    copy(device, host, bytes, cudaMemcpyHostToDevice);
  }
  void download(void* host, const void* device, std::size_t bytes) override {
    copy(host, device, bytes, cudaMemcpyDeviceToHost);
  }
  void synchronize() override { MOEPLAN_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  void all_reduce_sum(float* data, std::size_t count) override {
    MOEPLAN_NCCL_CHECK(comm_, ncclAllReduce(data, data, count, ncclFloat, ncclSum, comm_, stream_));
  }
  void all_gather(const void* send, std::size_t bytes, void* recv) override {
    MOEPLAN_NCCL_CHECK(comm_, ncclAllGather(send, recv, bytes, ncclUint8, comm_, stream_));
  }
  // NOTE: NCCL has no all-gather-v; one broadcast per root (of recv_bytes[root] bytes), grouped,
  // is the usual substitute.
  void all_gather_v(const void* send, std::size_t /*send_bytes*/, void* recv,
                    std::span<const std::size_t> recv_bytes,
                    std::span<const std::size_t> recv_offsets) override {
    MOEPLAN_NCCL_CHECK(comm_, ncclGroupStart());
    for (int r = 0; r < size_; ++r) {
      const auto i = static_cast<std::size_t>(r);
      if (recv_bytes[i] == 0) continue;
      MOEPLAN_NCCL_CHECK(comm_, ncclBroadcast(send, static_cast<char*>(recv) + recv_offsets[i],
                                              recv_bytes[i], ncclUint8, r, comm_, stream_));
    }
    MOEPLAN_NCCL_CHECK(comm_, ncclGroupEnd());
  }
  void all_to_all(const void* send, std::size_t bytes_per_rank, void* recv) override {
    if (AlltoAllFn fn = nccl_alltoall(); fn != nullptr) {
      MOEPLAN_NCCL_CHECK(comm_, fn(send, recv, bytes_per_rank, ncclUint8, comm_, stream_));
      return;
    }
    // NCCL before 2.28 has no ncclAlltoAll: the same exchange as grouped send/recv.
    std::vector<std::size_t> bytes(static_cast<std::size_t>(size_), bytes_per_rank);
    std::vector<std::size_t> offsets(bytes.size());
    for (std::size_t r = 0; r < offsets.size(); ++r) offsets[r] = r * bytes_per_rank;
    all_to_all_v(send, bytes, offsets, recv, bytes, offsets);
  }
  void all_to_all_v(const void* send, std::span<const std::size_t> send_bytes,
                    std::span<const std::size_t> send_offsets, void* recv,
                    std::span<const std::size_t> recv_bytes,
                    std::span<const std::size_t> recv_offsets) override {
    MOEPLAN_NCCL_CHECK(comm_, ncclGroupStart());
    for (int r = 0; r < size_; ++r) {
      const auto i = static_cast<std::size_t>(r);
      if (send_bytes[i] > 0) {
        MOEPLAN_NCCL_CHECK(comm_, ncclSend(static_cast<const char*>(send) + send_offsets[i],
                                           send_bytes[i], ncclUint8, r, comm_, stream_));
      }
      if (recv_bytes[i] > 0) {
        MOEPLAN_NCCL_CHECK(comm_, ncclRecv(static_cast<char*>(recv) + recv_offsets[i],
                                           recv_bytes[i], ncclUint8, r, comm_, stream_));
      }
    }
    MOEPLAN_NCCL_CHECK(comm_, ncclGroupEnd());
  }
  void reduce_scatter_sum(const float* send, float* recv, std::size_t count) override {
    MOEPLAN_NCCL_CHECK(comm_,
                       ncclReduceScatter(send, recv, count, ncclFloat, ncclSum, comm_, stream_));
  }

 private:
  void copy(void* to, const void* from, std::size_t bytes, cudaMemcpyKind kind) {
    MOEPLAN_CUDA_CHECK(cudaSetDevice(device_));
    if (bytes > 0) MOEPLAN_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, kind, stream_));
    synchronize();
  }

  ncclComm_t comm_;
  cudaStream_t stream_;
  int device_;
  int size_;
};

// A new non-blocking stream on `device`.
cudaStream_t new_stream(int device) {
  MOEPLAN_CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  MOEPLAN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream;
}

int comm_rank(ncclComm_t comm) {
  int r = 0;
  MOEPLAN_NCCL_CHECK(comm, ncclCommUserRank(comm, &r));
  return r;
}

int comm_size(ncclComm_t comm) {
  int n = 1;
  MOEPLAN_NCCL_CHECK(comm, ncclCommCount(comm, &n));
  return n;
}

class NcclComm final : public NcclCommunicator {
 public:
  NcclComm(ncclComm_t comm, int device)
      : comm_(comm),
        device_id_(device),
        stream_(new_stream(device)),
        rank_(comm_rank(comm)),
        size_(comm_size(comm)),
        device_(comm, stream_, device, size_) {}
  ~NcclComm() override {
    if (stream_ != nullptr) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
    ncclCommDestroy(comm_);
  }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string kind() const override { return "nccl"; }
  void* stream() const override { return stream_; }
  int device() const override { return device_id_; }
  void synchronize() override { device_.synchronize(); }
  DeviceCollectives* device_collectives() override { return &device_; }

  // ---- host collectives (staged through device memory) ---------------------------------------

  void barrier() override {
    MOEPLAN_CUDA_CHECK(cudaSetDevice(device_id_));
    float* d = send_.reserve_as<float>(1);
    MOEPLAN_CUDA_CHECK(cudaMemsetAsync(d, 0, sizeof(float), stream_));
    device_.all_reduce_sum(d, 1);
    synchronize();
  }

  void all_reduce_sum(std::span<float> data) override {
    float* d = to_device(send_, data.data(), data.size_bytes());
    device_.all_reduce_sum(d, data.size());
    to_host(data.data(), d, data.size_bytes());
  }

  void all_reduce_max(std::span<std::int64_t> data) override {
    auto* d = static_cast<std::int64_t*>(to_device_raw(send_, data.data(), data.size_bytes()));
    MOEPLAN_NCCL_CHECK(comm_, ncclAllReduce(d, d, data.size(), ncclInt64, ncclMax, comm_, stream_));
    to_host(data.data(), d, data.size_bytes());
  }

  void all_gather(const void* send, std::size_t bytes, void* recv) override {
    const void* ds = to_device_raw(send_, send, bytes);
    void* dr = recv_.reserve(bytes * static_cast<std::size_t>(size_));
    device_.all_gather(ds, bytes, dr);
    to_host(recv, dr, bytes * static_cast<std::size_t>(size_));
  }

  void all_gather_v(const void* send, std::size_t send_bytes, void* recv,
                    std::span<const std::size_t> recv_bytes,
                    std::span<const std::size_t> recv_offsets) override {
    std::size_t total = 0;
    for (int r = 0; r < size_; ++r) {
      const auto i = static_cast<std::size_t>(r);
      total = std::max(total, recv_offsets[i] + recv_bytes[i]);
    }
    const void* ds = to_device_raw(send_, send, send_bytes);
    void* dr = recv_.reserve(std::max<std::size_t>(total, 1));
    device_.all_gather_v(ds, send_bytes, dr, recv_bytes, recv_offsets);
    to_host(recv, dr, total);
  }

  void all_to_all(const void* send, std::size_t bytes_per_rank, void* recv) override {
    const std::size_t total = bytes_per_rank * static_cast<std::size_t>(size_);
    const void* ds = to_device_raw(send_, send, total);
    void* dr = recv_.reserve(total);
    device_.all_to_all(ds, bytes_per_rank, dr);
    to_host(recv, dr, total);
  }

  void all_to_all_v(const void* send, std::span<const std::size_t> send_bytes,
                    std::span<const std::size_t> send_offsets, void* recv,
                    std::span<const std::size_t> recv_bytes,
                    std::span<const std::size_t> recv_offsets) override {
    std::size_t send_total = 0;
    std::size_t recv_total = 0;
    for (int r = 0; r < size_; ++r) {
      const auto i = static_cast<std::size_t>(r);
      send_total = std::max(send_total, send_offsets[i] + send_bytes[i]);
      recv_total = std::max(recv_total, recv_offsets[i] + recv_bytes[i]);
    }
    const void* ds = to_device_raw(send_, send, send_total);
    void* dr = recv_.reserve(recv_total);
    device_.all_to_all_v(ds, send_bytes, send_offsets, dr, recv_bytes, recv_offsets);
    to_host(recv, dr, recv_total);
  }

  void reduce_scatter_sum(std::span<const float> send, std::span<float> recv) override {
    const float* ds = to_device(send_, send.data(), send.size_bytes());
    float* dr = recv_.reserve_as<float>(recv.size());
    device_.reduce_scatter_sum(ds, dr, recv.size());
    to_host(recv.data(), dr, recv.size_bytes());
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    ncclComm_t sub = nullptr;
    MOEPLAN_NCCL_CHECK(comm_, ncclCommSplit(comm_, color, key, &sub, nullptr));
    return std::make_unique<NcclComm>(sub, device_id_);
  }

 private:
  // NOTE: every host collective starts here or in barrier(): the calling thread may have another
  // current device (in-process ranks on several GPUs), and the staging copies need this one.
  void* to_device_raw(DeviceBuffer& buf, const void* host, std::size_t bytes) {
    MOEPLAN_CUDA_CHECK(cudaSetDevice(device_id_));
    void* d = buf.reserve(bytes);
    if (bytes > 0) {
      MOEPLAN_CUDA_CHECK(cudaMemcpyAsync(d, host, bytes, cudaMemcpyHostToDevice, stream_));
    }
    return d;
  }
  template <class T>
  T* to_device(DeviceBuffer& buf, const T* host, std::size_t bytes) {
    return static_cast<T*>(to_device_raw(buf, host, bytes));
  }
  void to_host(void* host, const void* dev, std::size_t bytes) {
    if (bytes > 0) {
      MOEPLAN_CUDA_CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, stream_));
    }
    synchronize();
  }

  ncclComm_t comm_;
  int device_id_;
  cudaStream_t stream_;
  int rank_;
  int size_;
  DeviceBuffer send_, recv_;
  NcclDevice device_;
};

}  // namespace

int device_for_local_rank(int local_rank) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return 0;
  }
  return local_rank % count;
}

Result<std::unique_ptr<NcclCommunicator>> make_nccl_communicator(Communicator& bootstrap,
                                                                 int device) {
  // Rank 0's id (and whether it got one) reaches every rank through the bootstrap group.
  struct Packet {
    int ok = 0;
    char reason[124] = {};
    ncclUniqueId id{};
  };
  Packet mine;
  if (bootstrap.rank() == 0) {
    const ncclResult_t r = ncclGetUniqueId(&mine.id);
    mine.ok = r == ncclSuccess ? 1 : 0;
    if (r != ncclSuccess) {
      std::strncpy(mine.reason, ncclGetErrorString(r), sizeof(mine.reason) - 1);
    }
  }
  std::vector<Packet> all(static_cast<std::size_t>(bootstrap.size()));
  bootstrap.all_gather(&mine, sizeof(Packet), all.data());
  if (all[0].ok == 0) {
    return Error{std::string("NCCL: ncclGetUniqueId failed on rank 0: ") + all[0].reason};
  }
  if (cudaSetDevice(device) != cudaSuccess) {
    const cudaError_t e = cudaGetLastError();
    return Error{"NCCL: cudaSetDevice(" + std::to_string(device) + "): " + cudaGetErrorString(e)};
  }
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRank(&comm, bootstrap.size(), all[0].id, bootstrap.rank());
  if (r != ncclSuccess) {
    return Error{"NCCL: ncclCommInitRank(rank " + std::to_string(bootstrap.rank()) + " of " +
                 std::to_string(bootstrap.size()) + ", device " + std::to_string(device) +
                 "): " + nccl_message(r, comm)};
  }
  try {
    return std::unique_ptr<NcclCommunicator>(std::make_unique<NcclComm>(comm, device));
  } catch (const std::exception& e) {
    return Error{std::string("NCCL: ") + e.what()};
  }
}

}  // namespace moeplan::kernels::cuda
