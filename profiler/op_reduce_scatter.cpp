// reduce_scatter: S bytes of the storage dtype per rank (fp32 partial sums, as the CPU layer
// keeps them), each rank receiving the sum of its 1/g slice. busBw = algBw · (g − 1)/g.
#include "profiler/collective_common.hpp"
#include "profiler/ops.hpp"

namespace moeplan::profiler {

namespace {

class ReduceScatterCase final : public OpCase {
 public:
  ReduceScatterCase(kernels::Communicator& comm, std::size_t values) : comm_(comm) {
    const auto g = static_cast<std::size_t>(comm.size());
    send_.resize(values / g * g);
    for (std::size_t i = 0; i < send_.size(); ++i) {
      send_[i] = static_cast<float>((comm.rank() + 1) * static_cast<int>(i % 5 + 1));
    }
    recv_.assign(values / g, 0.0F);
  }

  void run() override {
    comm_.reduce_scatter_sum(send_, recv_);
    if (fault_ && !recv_.empty()) recv_[recv_.size() / 2] += 1.0F;
  }

  Check verify() override {
    std::fill(recv_.begin(), recv_.end(), 0.0F);
    run();
    const int g = comm_.size();
    const std::size_t base = recv_.size() * static_cast<std::size_t>(comm_.rank());
    for (std::size_t i = 0; i < recv_.size(); ++i) {
      const float expected =
          static_cast<float>(g * (g + 1) / 2 * static_cast<int>((base + i) % 5 + 1));
      if (recv_[i] != expected) {
        return {false, "element " + std::to_string(i) + " = " + std::to_string(recv_[i]) +
                           ", expected " + std::to_string(expected)};
      }
    }
    return {};
  }

 private:
  kernels::Communicator& comm_;
  std::vector<float> send_, recv_;
};

}  // namespace

OpTable reduce_scatter_op() {
  return collective_table(
      "reduce_scatter", [](int g) { return (g - 1.0) / g; },
      [](kernels::Communicator& comm, const OpPoint& p,
         const SweepSpec&) -> std::unique_ptr<OpCase> {
        return std::make_unique<ReduceScatterCase>(
            comm, static_cast<std::size_t>(p.bytes / dtype_bytes(p.dtype)));
      });
}

}  // namespace moeplan::profiler
