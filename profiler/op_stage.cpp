// stage: activations copied into a collective's wire buffer (packed to the storage dtype) and
// out of a received one (unpacked), each into a fresh buffer (not zero-filled) as the layer
// allocates them.
// Bytes: 2·b per value (the wire bytes written plus the wire bytes read), so a value that is
// received (copied into the receive buffer, then unpacked) counts 2·b as one packed and
// unpacked does.
#include "kernels/uninit_vector.hpp"
#include "profiler/op_common.hpp"
#include "profiler/ops.hpp"

namespace moeplan::profiler {

namespace {

double value_bytes(const SweepSpec&, DType dt) { return 2.0 * dtype_bytes(dt); }

class StageCase final : public OpCase {
 public:
  StageCase(long n, DType dtype) : dtype_(dtype) { in_ = random_values(dtype, usz(n), 5); }

  void run() override {
    kernels::UninitVector<std::uint8_t> wire(kernels::storage_bytes(dtype_, in_.size()));
    kernels::pack(dtype_, in_.data(), in_.size(), wire.data());
    if (fault_) wire[wire.size() / 2] ^= 0x10U;
    kernels::UninitVector<float> out(in_.size());
    kernels::unpack(dtype_, wire.data(), in_.size(), out.data());
    out_ = std::move(out);  // a fresh buffer every run, as the layer allocates its own
  }

  Check verify() override {
    run();
    for (std::size_t i = 0; i < in_.size(); ++i) {
      if (out_[i] != in_[i]) {
        return {false, "value " + std::to_string(i) + " = " + std::to_string(out_[i]) +
                           " after the round trip, expected " + std::to_string(in_[i])};
      }
    }
    return {};
  }

 private:
  DType dtype_;
  std::vector<float> in_;
  kernels::UninitVector<float> out_;
};

}  // namespace

OpTable stage_op() {
  OpTable t;
  t.name = "stage";
  t.host_op = true;
  t.sweep = [](const SweepSpec& s) {
    return byte_sweep(s, value_bytes, [&](DType dt, long n) {
      OpPoint p;
      p.op = "stage";
      p.dtype = dt;
      p.bytes = static_cast<double>(n) * value_bytes(s, dt);
      p.m = p.bytes;
      p.shape = shape_text({{"bytes", p.bytes}, {"values", static_cast<double>(n)}});
      p.kernel = "pack + unpack (dtype_convert)";
      return p;
    });
  };
  t.init = [](const OpPoint& p, const SweepSpec& s, kernels::Communicator*,
              kernels::Backend&) -> Result<std::unique_ptr<OpCase>> {
    if (p.dtype == DType::kFp8)
      return Error{"stage: fp8 is not a storage dtype of the CPU backend"};
    return std::unique_ptr<OpCase>(
        std::make_unique<StageCase>(std::lround(p.bytes / value_bytes(s, p.dtype)), p.dtype));
  };
  return t;
}

}  // namespace moeplan::profiler
