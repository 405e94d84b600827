// The MPI communicator.
#include "kernels/mpi_communicator.hpp"

#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <vector>

#if MOEPLAN_HAVE_MPI
#include <mpi.h>
#endif

namespace moeplan::kernels {

#if MOEPLAN_HAVE_MPI

namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(std::string(what) + ": " + text);
}

int as_count(std::size_t bytes, const char* what) {
  if (bytes > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw std::runtime_error(std::string(what) + ": message of " + std::to_string(bytes) +
                             " bytes exceeds MPI's int count");
  }
  return static_cast<int>(bytes);
}

std::vector<int> as_counts(std::span<const std::size_t> v, const char* what) {
  std::vector<int> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = as_count(v[i], what);
  return out;
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && finalized == 0) MPI_Comm_free(&comm_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string kind() const override { return "mpi"; }

  void barrier() override { check(MPI_Barrier(comm_), "MPI_Barrier"); }

  void all_reduce_sum(std::span<float> data) override {
    check(MPI_Allreduce(MPI_IN_PLACE, data.data(), as_count(data.size(), "MPI_Allreduce"),
                        MPI_FLOAT, MPI_SUM, comm_),
          "MPI_Allreduce");
  }

  void all_reduce_max(std::span<std::int64_t> data) override {
    check(MPI_Allreduce(MPI_IN_PLACE, data.data(), as_count(data.size(), "MPI_Allreduce"),
                        MPI_INT64_T, MPI_MAX, comm_),
          "MPI_Allreduce");
  }

  void all_gather(const void* send, std::size_t bytes, void* recv) override {
    const int n = as_count(bytes, "MPI_Allgather");
    check(MPI_Allgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, comm_), "MPI_Allgather");
  }

  void all_gather_v(const void* send, std::size_t send_bytes, void* recv,
                    std::span<const std::size_t> recv_bytes,
                    std::span<const std::size_t> recv_offsets) override {
    const auto counts = as_counts(recv_bytes, "MPI_Allgatherv");
    const auto displs = as_counts(recv_offsets, "MPI_Allgatherv");
    check(MPI_Allgatherv(send, as_count(send_bytes, "MPI_Allgatherv"), MPI_BYTE, recv,
                         counts.data(), displs.data(), MPI_BYTE, comm_),
          "MPI_Allgatherv");
  }

  void all_to_all(const void* send, std::size_t bytes_per_rank, void* recv) override {
    const int n = as_count(bytes_per_rank, "MPI_Alltoall");
    check(MPI_Alltoall(send, n, MPI_BYTE, recv, n, MPI_BYTE, comm_), "MPI_Alltoall");
  }

  void all_to_all_v(const void* send, std::span<const std::size_t> send_bytes,
                    std::span<const std::size_t> send_offsets, void* recv,
                    std::span<const std::size_t> recv_bytes,
                    std::span<const std::size_t> recv_offsets) override {
    const auto sc = as_counts(send_bytes, "MPI_Alltoallv");
    const auto sd = as_counts(send_offsets, "MPI_Alltoallv");
    const auto rc = as_counts(recv_bytes, "MPI_Alltoallv");
    const auto rd = as_counts(recv_offsets, "MPI_Alltoallv");
    check(MPI_Alltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(), MPI_BYTE,
                        comm_),
          "MPI_Alltoallv");
  }

  void reduce_scatter_sum(std::span<const float> send, std::span<float> recv) override {
    check(MPI_Reduce_scatter_block(send.data(), recv.data(),
                                   as_count(recv.size(), "MPI_Reduce_scatter_block"), MPI_FLOAT,
                                   MPI_SUM, comm_),
          "MPI_Reduce_scatter_block");
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm sub = MPI_COMM_NULL;
    check(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split");
    return std::make_unique<MpiCommunicator>(sub, true);
  }

 private:
  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0;
  int size_ = 1;
};

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized == 0) MPI_Finalize();
}

}  // namespace

bool mpi_available() { return true; }

std::unique_ptr<Communicator> mpi_world() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    std::atexit(finalize_at_exit);
  }
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, false);
}

int mpi_shared_memory_domain() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm shared = MPI_COMM_NULL;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared),
        "MPI_Comm_split_type");
  int leader = rank;  // the world rank of the first rank of this shared-memory domain
  check(MPI_Bcast(&leader, 1, MPI_INT, 0, shared), "MPI_Bcast");
  MPI_Comm_free(&shared);
  return leader;
}

void abort_world(int code) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized != 0 && finalized == 0) MPI_Abort(MPI_COMM_WORLD, code);
}

#else

bool mpi_available() { return false; }
std::unique_ptr<Communicator> mpi_world() { return nullptr; }
int mpi_shared_memory_domain() { return 0; }
void abort_world(int) {}

#endif

}  // namespace moeplan::kernels
