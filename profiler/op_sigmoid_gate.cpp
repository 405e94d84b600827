// sigmoid_gate: the shared expert's gate, out[t] *= sigmoid(x[t]·g) — the profiled backend's
// sigmoid_gate. Bytes as the cost model counts them: 3·T·H·b.
#include "profiler/op_common.hpp"
#include "profiler/ops.hpp"

namespace moeplan::profiler {

namespace {

double gate_token_bytes(const SweepSpec& s, DType dt) { return 3.0 * s.hidden * dtype_bytes(dt); }

class GateCase final : public OpCase {
 public:
  GateCase(int tokens, int hidden, kernels::Backend& backend)
      : t_(tokens), h_(hidden), backend_(backend) {
    // x·g ≈ 10: the gate is ≈ 0.99995, so repeated runs in place keep `out` far from underflow
    // while every run still changes it measurably.
    x_ = random_values(DType::kFp32, usz(tokens) * usz(hidden), 7, 0.5F, 1.5F);
    gate_.assign(usz(hidden), 10.0F / static_cast<float>(hidden));
    out0_ = random_values(DType::kFp32, x_.size(), 8, 1.0F, 2.0F);
    out_ = out0_;
  }

  void run() override {
    backend_.sigmoid_gate(kernels::OpContext{}, x_, t_, h_, gate_, out_);
    if (fault_) out_[out_.size() / 2] *= 0.5F;
  }

  Check verify() override {
    out_ = out0_;
    run();
    for (std::size_t t = 0; t < usz(t_); ++t) {
      double z = 0.0, z_abs = 0.0;
      for (std::size_t c = 0; c < usz(h_); ++c) {
        z += static_cast<double>(x_[t * usz(h_) + c]) * gate_[c];
        z_abs += std::abs(static_cast<double>(x_[t * usz(h_) + c]) * gate_[c]);
      }
      const double sig = 1.0 / (1.0 + std::exp(-z));
      // fp32 dot (h·u·Σ|x·g|, times the sigmoid's slope ≤ 1/4) and a few roundings.
      const double tol_rel = 0.25 * h_ * std::ldexp(1.0, -24) * z_abs + 8.0 * std::ldexp(1.0, -24);
      for (std::size_t c = 0; c < usz(h_); ++c) {
        const std::size_t i = t * usz(h_) + c;
        const double ref = out0_[i] * sig;
        if (!(std::abs(out_[i] - ref) <= tol_rel * std::abs(ref))) {
          return {false, "out[" + std::to_string(t) + "," + std::to_string(c) + "] = " +
                             std::to_string(out_[i]) + ", expected " + std::to_string(ref)};
        }
      }
    }
    out_ = out0_;
    return {};
  }

 private:
  int t_, h_;
  kernels::Backend& backend_;
  std::vector<float> x_, gate_, out0_, out_;
};

}  // namespace

OpTable sigmoid_gate_op() {
  OpTable t;
  t.name = "sigmoid_gate";
  t.sweep = [](const SweepSpec& s) {
    if (!s.shared_gated) return std::vector<OpPoint>{};
    return byte_sweep(s, gate_token_bytes, [&](DType dt, long tokens) {
      OpPoint p;
      p.op = "sigmoid_gate";
      p.dtype = dt;
      p.bytes = static_cast<double>(tokens) * gate_token_bytes(s, dt);
      p.m = p.bytes;
      p.shape = shape_text(
          {{"bytes", p.bytes}, {"tokens", static_cast<double>(tokens)}, {"hidden", s.hidden}});
      p.kernel = s.backend + " sigmoid_gate";
      return p;
    });
  };
  t.init = [](const OpPoint& p, const SweepSpec& s, kernels::Communicator*,
              kernels::Backend& backend) -> Result<std::unique_ptr<OpCase>> {
    MOEPLAN_TRY_STATUS(backend_supports(backend, kernels::BackendOp::kSigmoidGate, p.dtype));
    return std::unique_ptr<OpCase>(std::make_unique<GateCase>(
        static_cast<int>(std::lround(p.bytes / gate_token_bytes(s, p.dtype))), s.hidden, backend));
  };
  return t;
}

}  // namespace moeplan::profiler
