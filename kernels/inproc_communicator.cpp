// The in-process communicator: ranks are threads sharing memory. Every collective posts this
// rank's pointers, meets the others at a barrier, copies or reduces straight from their
// buffers, and meets them again so no buffer is released while another rank still reads it.
#include <algorithm>
#include <barrier>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/communicator.hpp"
#include "models/result.hpp"

namespace moeplan::kernels {

namespace {

struct Slot {
  const void* send = nullptr;
  void* recv = nullptr;
  std::span<const std::size_t> offsets;  // send offsets of all-to-all-v
  std::size_t bytes = 0;
  int color = 0;
  int key = 0;
};

struct Group;

// State shared by the threads of one group.
struct Group {
  explicit Group(int n) : size(n), sync(n), slots(static_cast<std::size_t>(n)) {}
  int size;
  std::barrier<> sync;
  std::vector<Slot> slots;
  std::mutex mutex;
  std::map<std::pair<int, int>, std::shared_ptr<Group>> children;  // (split number, color)
};

class InProcCommunicator final : public Communicator {
 public:
  InProcCommunicator(std::shared_ptr<Group> group, int rank)
      : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size; }
  std::string kind() const override { return "inproc"; }

  void barrier() override { group_->sync.arrive_and_wait(); }

  void all_reduce_sum(std::span<float> data) override {
    post().recv = data.data();
    barrier();
    // Every rank sums in rank order into a private buffer, so all get identical results.
    std::vector<float> sum(data.size(), 0.0F);
    for (int r = 0; r < size(); ++r) {
      const auto* src = static_cast<const float*>(slot(r).recv);
      for (std::size_t i = 0; i < data.size(); ++i) sum[i] += src[i];
    }
    barrier();
    std::copy(sum.begin(), sum.end(), data.begin());
  }

  void all_reduce_max(std::span<std::int64_t> data) override {
    post().recv = data.data();
    barrier();
    std::vector<std::int64_t> mx(data.begin(), data.end());
    for (int r = 0; r < size(); ++r) {
      const auto* src = static_cast<const std::int64_t*>(slot(r).recv);
      for (std::size_t i = 0; i < data.size(); ++i) mx[i] = std::max(mx[i], src[i]);
    }
    barrier();
    std::copy(mx.begin(), mx.end(), data.begin());
  }

  void all_gather(const void* send, std::size_t bytes, void* recv) override {
    post().send = send;
    barrier();
    for (int r = 0; r < size(); ++r) {
      copy(static_cast<char*>(recv) + static_cast<std::size_t>(r) * bytes, slot(r).send, bytes);
    }
    barrier();
  }

  void all_gather_v(const void* send, std::size_t send_bytes, void* recv,
                    std::span<const std::size_t> recv_bytes,
                    std::span<const std::size_t> recv_offsets) override {
    post().send = send;
    slot(rank_).bytes = send_bytes;
    barrier();
    for (int r = 0; r < size(); ++r) {
      const auto ru = static_cast<std::size_t>(r);
      MOEPLAN_ASSERT(slot(r).bytes == recv_bytes[ru], "all_gather_v: byte counts disagree");
      copy(static_cast<char*>(recv) + recv_offsets[ru], slot(r).send, recv_bytes[ru]);
    }
    barrier();
  }

  void all_to_all(const void* send, std::size_t bytes_per_rank, void* recv) override {
    post().send = send;
    barrier();
    const auto me = static_cast<std::size_t>(rank_);
    for (int r = 0; r < size(); ++r) {
      copy(static_cast<char*>(recv) + static_cast<std::size_t>(r) * bytes_per_rank,
           static_cast<const char*>(slot(r).send) + me * bytes_per_rank, bytes_per_rank);
    }
    barrier();
  }

  void all_to_all_v(const void* send, std::span<const std::size_t> send_bytes,
                    std::span<const std::size_t> send_offsets, void* recv,
                    std::span<const std::size_t> recv_bytes,
                    std::span<const std::size_t> recv_offsets) override {
    (void)send_bytes;
    Slot& mine = post();
    mine.send = send;
    mine.offsets = send_offsets;
    barrier();
    const auto me = static_cast<std::size_t>(rank_);
    for (int r = 0; r < size(); ++r) {
      const auto ru = static_cast<std::size_t>(r);
      copy(static_cast<char*>(recv) + recv_offsets[ru],
           static_cast<const char*>(slot(r).send) + slot(r).offsets[me], recv_bytes[ru]);
    }
    barrier();
  }

  void reduce_scatter_sum(std::span<const float> send, std::span<float> recv) override {
    post().send = send.data();
    barrier();
    const std::size_t n = recv.size();
    std::fill(recv.begin(), recv.end(), 0.0F);
    for (int r = 0; r < size(); ++r) {
      const auto* src =
          static_cast<const float*>(slot(r).send) + static_cast<std::size_t>(rank_) * n;
      for (std::size_t i = 0; i < n; ++i) recv[i] += src[i];
    }
    barrier();
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    Slot& mine = post();
    mine.color = color;
    mine.key = key;
    barrier();
    std::vector<std::pair<int, int>> members;  // (key, parent rank)
    for (int r = 0; r < size(); ++r) {
      if (slot(r).color == color) members.emplace_back(slot(r).key, r);
    }
    std::sort(members.begin(), members.end());
    const int new_rank =
        static_cast<int>(std::find_if(members.begin(), members.end(),
                                      [&](const auto& m) { return m.second == rank_; }) -
                         members.begin());
    std::shared_ptr<Group> child;
    {
      std::lock_guard<std::mutex> lock(group_->mutex);
      auto& entry = group_->children[{splits_, color}];
      if (!entry) entry = std::make_shared<Group>(static_cast<int>(members.size()));
      child = entry;
    }
    ++splits_;
    barrier();
    return std::make_unique<InProcCommunicator>(std::move(child), new_rank);
  }

 private:
  Slot& post() { return slot(rank_); }
  Slot& slot(int r) { return group_->slots[static_cast<std::size_t>(r)]; }
  static void copy(void* dst, const void* src, std::size_t bytes) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }

  std::shared_ptr<Group> group_;
  int rank_;
  int splits_ = 0;  // identical on every rank: splits are collective
};

}  // namespace

void run_in_process(int num_ranks, const std::function<void(Communicator&)>& body) {
  auto group = std::make_shared<Group>(num_ranks);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(num_ranks));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(num_ranks));
  for (int r = 0; r < num_ranks; ++r) {
    threads.emplace_back([&, r] {
      InProcCommunicator comm(group, r);
      try {
        body(comm);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace moeplan::kernels
