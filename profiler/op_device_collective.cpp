// The collective ops on a GPU communicator's device memory (NCCL): the same points, byte counts,
// patterns and checks as the host cases of op_all_gather.cpp, op_all_reduce.cpp,
// op_all_to_all.cpp and op_reduce_scatter.cpp, but the buffers live on the device and a run only
// enqueues the collective on the communicator's stream. A sample's back-to-back runs end with one
// synchronize (settle()), as nccl-tests times them, so its wall time is the collectives' own.
// The reductions sum fp32 values (S / dtype-size of them, as the host cases and the layer do),
// without the host cases' rounding passes to the storage dtype (no device kernel here does that
// rounding). Device buffers are not rotated: the GPU's L2 holds small messages between runs, as
// it does in nccl-tests.
#include <optional>

#include "profiler/collective_common.hpp"

namespace moeplan::profiler {

namespace {

enum class Kind { kAllReduce, kAllGather, kAllGatherV, kAllToAll, kAllToAllV, kReduceScatter };

std::optional<Kind> kind_of(const std::string& op) {
  if (op == "all_reduce") return Kind::kAllReduce;
  if (op == "all_gather") return Kind::kAllGather;
  if (op == "all_gather_v") return Kind::kAllGatherV;
  if (op == "all_to_all") return Kind::kAllToAll;
  if (op == "all_to_all_v") return Kind::kAllToAllV;
  if (op == "reduce_scatter") return Kind::kReduceScatter;
  return std::nullopt;
}

// The small integer rank r contributes at element i of a reduction (sums stay exact in fp32).
float reduce_value(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * static_cast<int>(i % 5 + 1));
}

class DeviceCollectiveCase final : public OpCase {
 public:
  DeviceCollectiveCase(Kind kind, kernels::Communicator& comm, kernels::DeviceCollectives& dev,
                       const OpPoint& p)
      : kind_(kind), dev_(dev), rank_(comm.rank()), g_(static_cast<std::size_t>(comm.size())) {
    const auto bytes = static_cast<std::size_t>(p.bytes);
    if (reduction()) {
      values_ = static_cast<std::size_t>(p.bytes / dtype_bytes(p.dtype));
      if (kind_ == Kind::kReduceScatter) values_ = values_ / g_ * g_;
      send_bytes_ = values_ * sizeof(float);
      recv_bytes_ = kind_ == Kind::kReduceScatter ? send_bytes_ / g_ : 0;
    } else {
      block_ = bytes / g_;
      const bool gather = kind_ == Kind::kAllGather || kind_ == Kind::kAllGatherV;
      send_bytes_ = gather ? block_ : block_ * g_;
      recv_bytes_ = block_ * g_;
      for (std::size_t r = 0; r < g_; ++r) {
        counts_.push_back(block_);
        offsets_.push_back(r * block_);
      }
    }
    send_ = dev_.allocate(send_bytes_);
    if (recv_bytes_ > 0) recv_ = dev_.allocate(recv_bytes_);
    // Timing data is zero: a sum costs the same whatever the values, and in-place repeats of
    // the all-reduce keep it zero.
    const std::vector<std::uint8_t> zeros(std::max(send_bytes_, recv_bytes_), 0);
    dev_.upload(send_.get(), zeros.data(), send_bytes_);
    if (recv_) dev_.upload(recv_.get(), zeros.data(), recv_bytes_);
  }

  void run() override {
    void* send = send_.get();
    void* recv = recv_.get();
    switch (kind_) {
      case Kind::kAllReduce: dev_.all_reduce_sum(static_cast<float*>(send), values_); break;
      case Kind::kAllGather: dev_.all_gather(send, block_, recv); break;
      case Kind::kAllGatherV: dev_.all_gather_v(send, block_, recv, counts_, offsets_); break;
      case Kind::kAllToAll: dev_.all_to_all(send, block_, recv); break;
      case Kind::kAllToAllV:
        dev_.all_to_all_v(send, counts_, offsets_, recv, counts_, offsets_);
        break;
      case Kind::kReduceScatter:
        dev_.reduce_scatter_sum(static_cast<const float*>(send), static_cast<float*>(recv),
                                values_ / g_);
        break;
    }
    if (fault_) corrupt();
  }

  void settle() override { dev_.synchronize(); }

  Check verify() override { return reduction() ? verify_reduction() : verify_bytes(); }

 private:
  bool reduction() const { return kind_ == Kind::kAllReduce || kind_ == Kind::kReduceScatter; }
  // Where a run's result lands, and its size.
  void* result() const { return kind_ == Kind::kAllReduce ? send_.get() : recv_.get(); }
  std::size_t result_bytes() const { return kind_ == Kind::kAllReduce ? send_bytes_ : recv_bytes_; }

  // A wrong value in the middle of the result, written after the collective (tests prove the
  // check fails).
  void corrupt() {
    const std::size_t n = result_bytes();
    if (n == 0) return;
    dev_.synchronize();
    std::vector<std::uint8_t> host(n);
    dev_.download(host.data(), result(), n);
    if (reduction()) {
      auto* f = reinterpret_cast<float*>(host.data());
      f[n / sizeof(float) / 2] += 1.0F;
    } else {
      host[n / 2] ^= 0x01U;
    }
    dev_.upload(result(), host.data(), n);
  }

  Check verify_reduction() {
    std::vector<float> in(values_);
    for (std::size_t i = 0; i < values_; ++i) in[i] = reduce_value(rank_, i);
    dev_.upload(send_.get(), in.data(), send_bytes_);
    run();
    settle();
    const std::size_t out_values = result_bytes() / sizeof(float);
    std::vector<float> out(out_values);
    dev_.download(out.data(), result(), result_bytes());
    // Rank rank_'s slice of the reduce-scatter; the whole array of the all-reduce.
    const std::size_t base =
        kind_ == Kind::kReduceScatter ? out_values * static_cast<std::size_t>(rank_) : 0;
    Check c;
    for (std::size_t i = 0; i < out_values && c.passed; ++i) {
      float expected = 0.0F;
      for (std::size_t r = 0; r < g_; ++r) expected += reduce_value(static_cast<int>(r), base + i);
      if (out[i] != expected) {
        c = {false, "element " + std::to_string(i) + " = " + std::to_string(out[i]) +
                        ", expected " + std::to_string(expected)};
      }
    }
    // Back to zeros for timing.
    const std::vector<std::uint8_t> zeros(send_bytes_, 0);
    dev_.upload(send_.get(), zeros.data(), send_bytes_);
    return c;
  }

  Check verify_bytes() {
    const bool gather = kind_ == Kind::kAllGather || kind_ == Kind::kAllGatherV;
    std::vector<std::uint8_t> in(send_bytes_);
    for (std::size_t d = 0; d < (gather ? 1 : g_); ++d) {
      for (std::size_t i = 0; i < block_; ++i) {
        in[d * block_ + i] = pattern_byte(rank_, static_cast<int>(d), i);
      }
    }
    dev_.upload(send_.get(), in.data(), send_bytes_);
    std::vector<std::uint8_t> out(recv_bytes_, 0);
    dev_.upload(recv_.get(), out.data(), recv_bytes_);
    run();
    settle();
    dev_.download(out.data(), recv_.get(), recv_bytes_);
    for (std::size_t src = 0; src < g_; ++src) {
      for (std::size_t i = 0; i < block_; ++i) {
        const std::uint8_t expected = pattern_byte(static_cast<int>(src), gather ? 0 : rank_, i);
        if (out[src * block_ + i] != expected) {
          return {false, "byte " + std::to_string(i) + " of the block from rank " +
                             std::to_string(src) + " is wrong"};
        }
      }
    }
    return {};
  }

  Kind kind_;
  kernels::DeviceCollectives& dev_;
  int rank_;
  std::size_t g_;
  std::size_t values_ = 0;  // reductions: fp32 values per rank
  std::size_t block_ = 0;   // byte collectives: bytes per (source, destination) block
  std::size_t send_bytes_ = 0, recv_bytes_ = 0;
  std::vector<std::size_t> counts_, offsets_;
  std::shared_ptr<void> send_, recv_;
};

}  // namespace

Result<std::unique_ptr<OpCase>> device_collective_case(const std::string& op,
                                                       kernels::Communicator& comm,
                                                       kernels::DeviceCollectives& dev,
                                                       const OpPoint& p) {
  const auto kind = kind_of(op);
  if (!kind) return Error{op + ": no device form of this collective"};
  return std::unique_ptr<OpCase>(std::make_unique<DeviceCollectiveCase>(*kind, comm, dev, p));
}

}  // namespace moeplan::profiler
