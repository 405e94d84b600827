// silu_mul: SiLU(gate)·up over the gate/up GEMM output, stored in the dtype — the profiled
// backend's silu_mul. Bytes as the cost model counts them: 3·rows·width·b.
#include "profiler/op_common.hpp"
#include "profiler/ops.hpp"

namespace moeplan::profiler {

namespace {

double row_bytes(const SweepSpec& s, DType dt) { return 3.0 * s.intermediate * dtype_bytes(dt); }

class SiluCase final : public OpCase {
 public:
  SiluCase(long rows, int width, DType dtype, kernels::Backend& backend)
      : rows_(rows), width_(width), dtype_(dtype), backend_(backend) {
    gu_ = random_values(DType::kFp32, usz(rows) * 2 * usz(width), 6, -4.0F, 4.0F);
    act_.assign(usz(rows) * usz(width), 0.0F);
  }

  void run() override {
    backend_.silu_mul(kernels::OpContext{}, gu_, static_cast<int>(rows_), width_, dtype_, act_);
    if (fault_) act_[act_.size() / 2] = -act_[act_.size() / 2] + 1.0F;
  }

  Check verify() override {
    run();
    const double tol_rel = kernels::unit_roundoff(dtype_) + 8.0 * std::ldexp(1.0, -24);
    const auto w = usz(width_);
    for (std::size_t r = 0; r < usz(rows_); ++r) {
      for (std::size_t c = 0; c < w; ++c) {
        const double g = kernels::round_to(dtype_, gu_[r * 2 * w + c]);
        const double u = kernels::round_to(dtype_, gu_[r * 2 * w + w + c]);
        const double ref = g / (1.0 + std::exp(-g)) * u;
        const double got = act_[r * w + c];
        if (!(std::abs(got - ref) <= tol_rel * std::abs(ref) + 1e-30)) {
          return {false, "act[" + std::to_string(r) + "," + std::to_string(c) +
                             "] = " + std::to_string(got) + ", expected " + std::to_string(ref)};
        }
      }
    }
    return {};
  }

 private:
  long rows_;
  int width_;
  DType dtype_;
  kernels::Backend& backend_;
  std::vector<float> gu_, act_;
};

}  // namespace

OpTable silu_mul_op() {
  OpTable t;
  t.name = "silu_mul";
  t.sweep = [](const SweepSpec& s) {
    return byte_sweep(s, row_bytes, [&](DType dt, long rows) {
      OpPoint p;
      p.op = "silu_mul";
      p.dtype = dt;
      p.bytes = static_cast<double>(rows) * row_bytes(s, dt);
      p.m = p.bytes;
      p.shape = shape_text(
          {{"bytes", p.bytes}, {"rows", static_cast<double>(rows)}, {"width", s.intermediate}});
      p.kernel = s.backend + " silu_mul";
      return p;
    });
  };
  t.init = [](const OpPoint& p, const SweepSpec& s, kernels::Communicator*,
              kernels::Backend& backend) -> Result<std::unique_ptr<OpCase>> {
    MOEPLAN_TRY_STATUS(backend_supports(backend, kernels::BackendOp::kSiluMul, p.dtype));
    return std::unique_ptr<OpCase>(std::make_unique<SiluCase>(
        std::lround(p.bytes / row_bytes(s, p.dtype)), s.intermediate, p.dtype, backend));
  };
  return t;
}

}  // namespace moeplan::profiler
