// all_to_all and all_to_all_v: S bytes per rank, S/g to every rank of the group (the -v form
// through the variable API with equal counts, as the a2av dispatcher calls it).
// busBw = algBw · (g − 1)/g (nccl-tests).
#include "profiler/collective_common.hpp"
#include "profiler/ops.hpp"

namespace moeplan::profiler {

namespace {

class AllToAllCase final : public OpCase {
 public:
  AllToAllCase(kernels::Communicator& comm, std::size_t bytes, bool variable)
      : comm_(comm), variable_(variable) {
    const auto g = static_cast<std::size_t>(comm.size());
    block_ = bytes / g;
    send_.resize(block_ * g);
    recv_.assign(block_ * g, 0);
    for (std::size_t d = 0; d < g; ++d) {
      for (std::size_t i = 0; i < block_; ++i) {
        send_[d * block_ + i] = pattern_byte(comm.rank(), static_cast<int>(d), i);
      }
      counts_.push_back(block_);
      offsets_.push_back(d * block_);
    }
  }

  void run() override {
    if (variable_) {
      comm_.all_to_all_v(send_.data(), counts_, offsets_, recv_.data(), counts_, offsets_);
    } else {
      comm_.all_to_all(send_.data(), block_, recv_.data());
    }
    if (fault_ && !recv_.empty()) recv_[recv_.size() / 2] ^= 0x01U;
  }

  Check verify() override {
    std::fill(recv_.begin(), recv_.end(), std::uint8_t{0});
    run();
    for (std::size_t src = 0; src < counts_.size(); ++src) {
      for (std::size_t i = 0; i < block_; ++i) {
        if (recv_[src * block_ + i] != pattern_byte(static_cast<int>(src), comm_.rank(), i)) {
          return {false, "byte " + std::to_string(i) + " of the block from rank " +
                             std::to_string(src) + " is wrong"};
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
  std::vector<std::size_t> counts_, offsets_;
};

OpTable make(const std::string& name, bool variable) {
  return collective_table(
      name, [](int g) { return (g - 1.0) / g; },
      [variable](kernels::Communicator& comm, const OpPoint& p,
                 const SweepSpec&) -> std::unique_ptr<OpCase> {
        return std::make_unique<AllToAllCase>(comm, static_cast<std::size_t>(p.bytes), variable);
      });
}

}  // namespace

OpTable all_to_all_op() { return make("all_to_all", false); }
OpTable all_to_all_v_op() { return make("all_to_all_v", true); }

}  // namespace moeplan::profiler
