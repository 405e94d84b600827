// all_reduce: S bytes of the storage dtype summed over the group. The CPU layer keeps partial
// sums in fp32 and reduces them as fp32 whatever the storage dtype, so S/b fp32 values are
// reduced (in place, as the layer does). busBw = algBw · 2(g − 1)/g (nccl-tests).
#include "profiler/collective_common.hpp"
#include "profiler/ops.hpp"

namespace moeplan::profiler {

namespace {

class AllReduceCase final : public OpCase {
 public:
  AllReduceCase(kernels::Communicator& comm, std::size_t values) : comm_(comm) {
    // Timing data is zero: an fp32 sum costs the same whatever the values, and in-place repeats
    // keep it zero (no growth to overflow).
    data_.assign(values, 0.0F);
  }

  void run() override {
    comm_.all_reduce_sum(data_);
    if (fault_ && !data_.empty()) data_[data_.size() / 2] += 1.0F;
  }

  Check verify() override {
    // Small integers: every partial sum is exact in fp32.
    for (std::size_t i = 0; i < data_.size(); ++i) {
      data_[i] = static_cast<float>((comm_.rank() + 1) * static_cast<int>(i % 5 + 1));
    }
    run();
    const int g = comm_.size();
    Check c;
    for (std::size_t i = 0; i < data_.size() && c.passed; ++i) {
      const float expected = static_cast<float>(g * (g + 1) / 2 * static_cast<int>(i % 5 + 1));
      if (data_[i] != expected) {
        c = {false, "element " + std::to_string(i) + " = " + std::to_string(data_[i]) +
                        ", expected " + std::to_string(expected)};
      }
    }
    std::fill(data_.begin(), data_.end(), 0.0F);
    return c;
  }

 private:
  kernels::Communicator& comm_;
  std::vector<float> data_;
};

}  // namespace

OpTable all_reduce_op() {
  return collective_table(
      "all_reduce", [](int g) { return 2.0 * (g - 1.0) / g; },
      [](kernels::Communicator& comm, const OpPoint& p) -> std::unique_ptr<OpCase> {
        return std::make_unique<AllReduceCase>(
            comm, static_cast<std::size_t>(p.bytes / dtype_size(p.dtype)));
      });
}

}  // namespace moeplan::profiler
