// permute: activation rows gathered by index into a dispatcher's send buffer, packed to the
// storage dtype — the layer's pack_rows. Bytes as the cost model counts them: 2·rows·H·b (read
// and written).
#include "kernels/layer_ops.hpp"
#include "profiler/op_common.hpp"
#include "profiler/ops.hpp"

namespace moeplan::profiler {

namespace {

double row_bytes(const SweepSpec& s, DType dt) { return 2.0 * s.hidden * dtype_bytes(dt); }

class PermuteCase final : public OpCase {
 public:
  PermuteCase(int hidden, int rows, DType dtype) : h_(hidden), dtype_(dtype) {
    // Source rows: as many as gathered (a token's k pairs point at its row, so sources repeat).
    src_ = random_values(dtype, usz(rows) * usz(hidden), 4);
    index_.resize(usz(rows));
    for (std::size_t i = 0; i < index_.size(); ++i) {
      index_[i] = static_cast<int>((i * 2654435761ULL) % index_.size());
    }
  }

  void run() override {
    out_ = kernels::pack_rows(dtype_, src_, h_, index_);
    if (fault_) out_[out_.size() / 2] ^= 0x10U;
  }

  Check verify() override {
    run();
    std::vector<float> back(index_.size() * usz(h_));
    kernels::unpack(dtype_, out_.data(), back.size(), back.data());
    for (std::size_t i = 0; i < index_.size(); ++i) {
      for (std::size_t c = 0; c < usz(h_); ++c) {
        if (back[i * usz(h_) + c] != src_[usz(index_[i]) * usz(h_) + c]) {
          return {false, "row " + std::to_string(i) + " column " + std::to_string(c) +
                             " differs from source row " + std::to_string(index_[i])};
        }
      }
    }
    return {};
  }

 private:
  int h_;
  DType dtype_;
  std::vector<float> src_;
  std::vector<int> index_;
  kernels::UninitVector<std::uint8_t> out_;
};

}  // namespace

OpTable permute_op() {
  OpTable t;
  t.name = "permute";
  t.host_op = true;
  t.sweep = [](const SweepSpec& s) {
    return byte_sweep(s, row_bytes, [&](DType dt, long rows) {
      OpPoint p;
      p.op = "permute";
      p.dtype = dt;
      p.bytes = static_cast<double>(rows) * row_bytes(s, dt);
      p.m = p.bytes;
      p.shape = shape_text(
          {{"bytes", p.bytes}, {"rows", static_cast<double>(rows)}, {"hidden", s.hidden}});
      p.kernel = "layer pack_rows (gather + pack)";
      return p;
    });
  };
  t.init = [](const OpPoint& p, const SweepSpec& s, kernels::Communicator*,
              kernels::Backend&) -> Result<std::unique_ptr<OpCase>> {
    if (p.dtype == DType::kFp8)
      return Error{"permute: fp8 is not a storage dtype of the CPU backend"};
    const int rows = static_cast<int>(std::lround(p.bytes / row_bytes(s, p.dtype)));
    return std::unique_ptr<OpCase>(std::make_unique<PermuteCase>(s.hidden, rows, p.dtype));
  };
  return t;
}

}  // namespace moeplan::profiler
