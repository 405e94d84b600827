// all_gather and all_gather_v: each rank contributes S/g bytes, every rank receives S (the -v
// form through the variable API with equal sizes, as the allgather dispatcher calls it).
// busBw = algBw · (g − 1)/g (nccl-tests).
#include "profiler/collective_common.hpp"
#include "profiler/ops.hpp"

namespace moeplan::profiler {

namespace {

class AllGatherCase final : public OpCase {
 public:
  AllGatherCase(kernels::Communicator& comm, std::size_t bytes, bool variable)
      : comm_(comm), variable_(variable) {
    const auto g = static_cast<std::size_t>(comm.size());
    block_ = bytes / g;
    send_.resize(block_);
    for (std::size_t i = 0; i < block_; ++i) send_[i] = pattern_byte(comm.rank(), 0, i);
    recv_.assign(block_ * g, 0);
    for (std::size_t r = 0; r < g; ++r) {
      sizes_.push_back(block_);
      offsets_.push_back(r * block_);
    }
  }

  void run() override {
    if (variable_) {
      comm_.all_gather_v(send_.data(), block_, recv_.data(), sizes_, offsets_);
    } else {
      comm_.all_gather(send_.data(), block_, recv_.data());
    }
    if (fault_ && !recv_.empty()) recv_[recv_.size() / 2] ^= 0x01U;
  }

  Check verify() override {
    std::fill(recv_.begin(), recv_.end(), std::uint8_t{0});
    run();
    for (std::size_t src = 0; src < sizes_.size(); ++src) {
      for (std::size_t i = 0; i < block_; ++i) {
        if (recv_[src * block_ + i] != pattern_byte(static_cast<int>(src), 0, i)) {
          return {false, "byte " + std::to_string(i) + " of rank " + std::to_string(src) +
                             "'s block is wrong"};
        }
      }
    }
    return {};
  }

 private:
  kernels::Communicator& comm_;
  bool variable_;
  std::size_t block_ = 0;
  std::vector<std::uint8_t> send_, recv_;
  std::vector<std::size_t> sizes_, offsets_;
};

OpTable make(const std::string& name, bool variable) {
  return collective_table(
      name, [](int g) { return (g - 1.0) / g; },
      [variable](kernels::Communicator& comm, const OpPoint& p,
                 const SweepSpec&) -> std::unique_ptr<OpCase> {
        return std::make_unique<AllGatherCase>(comm, static_cast<std::size_t>(p.bytes), variable);
      });
}

}  // namespace

OpTable all_gather_op() { return make("all_gather", false); }
OpTable all_gather_v_op() { return make("all_gather_v", true); }

}  // namespace moeplan::profiler
