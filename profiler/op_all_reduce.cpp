// all_reduce: S bytes of the storage dtype summed over the group, as the layer's TP reduction
// runs it. The CPU layer keeps partial sums in fp32 and reduces them as fp32 whatever the
// storage dtype, so S/b fp32 values are reduced (in place, as the layer does), each rounded to
// the storage dtype before and after the sum (what a GEMM writing bf16 and a bf16 all-reduce
// produce; kernels/moe_layer.cpp tp_reduce). busBw = algBw · 2(g − 1)/g (nccl-tests), with the
// two rounding passes inside the time.
#include "profiler/collective_common.hpp"
#include "profiler/ops.hpp"

namespace moeplan::profiler {

namespace {

class AllReduceCase final : public OpCase {
 public:
  AllReduceCase(kernels::Communicator& comm, std::size_t values, DType dtype,
                std::size_t cold_bytes)
      : comm_(comm), dtype_(dtype) {
    // Timing data is zero: an fp32 sum costs the same whatever the values, and in-place repeats
    // keep it zero (no growth to overflow). NOTE: the layer reduces its expert outputs after
    // the expert weights have streamed through the caches, so the buffer is cold; rotating over
    // copies that together exceed the caches measures that (a single hot buffer of 14.7 MB
    // reduced 2.5x faster than the layer's on the 2-core VM, docs/PROFILER.md).
    pool_.resize(cold_copies(values * sizeof(float), 64, cold_bytes));
    for (auto& b : pool_) b.assign(values, 0.0F);
  }

  void run() override {
    std::vector<float>& data = pool_[next_];
    next_ = (next_ + 1) % pool_.size();
    kernels::round_to(dtype_, data);
    comm_.all_reduce_sum(data);
    kernels::round_to(dtype_, data);
    if (fault_ && !data.empty()) data[data.size() / 2] += 1.0F;
  }

  Check verify() override {
    next_ = 0;
    std::vector<float>& data = pool_.front();
    // Small integers: every partial sum is exact in fp32; the inputs and the sum are rounded to
    // the storage dtype as run() does (integers above 256 are not all bf16 values).
    for (std::size_t i = 0; i < data.size(); ++i) {
      data[i] = static_cast<float>((comm_.rank() + 1) * static_cast<int>(i % 5 + 1));
    }
    run();
    const int g = comm_.size();
    Check c;
    for (std::size_t i = 0; i < data.size() && c.passed; ++i) {
      float sum = 0.0F;
      for (int r = 0; r < g; ++r) {
        sum += kernels::round_to(dtype_, static_cast<float>((r + 1) * static_cast<int>(i % 5 + 1)));
      }
      const float expected = kernels::round_to(dtype_, sum);
      if (data[i] != expected) {
        c = {false, "element " + std::to_string(i) + " = " + std::to_string(data[i]) +
                        ", expected " + std::to_string(expected)};
      }
    }
    std::fill(data.begin(), data.end(), 0.0F);
    return c;
  }

 private:
  kernels::Communicator& comm_;
  DType dtype_;
  std::vector<std::vector<float>> pool_;
  std::size_t next_ = 0;
};

}  // namespace

OpTable all_reduce_op() {
  return collective_table(
      "all_reduce", [](int g) { return 2.0 * (g - 1.0) / g; },
      [](kernels::Communicator& comm, const OpPoint& p,
         const SweepSpec& s) -> std::unique_ptr<OpCase> {
        return std::make_unique<AllReduceCase>(
            comm, static_cast<std::size_t>(p.bytes / dtype_bytes(p.dtype)), p.dtype, s.cold_bytes);
      });
}

}  // namespace moeplan::profiler
