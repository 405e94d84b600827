// combine_sum: each token's k expert outputs weighted and summed with the shared expert's
// output, stored in the dtype — the profiled backend's combine. Bytes as the cost model counts
// them: (T·k + T)·H·b.
#include "profiler/op_common.hpp"
#include "profiler/ops.hpp"

namespace moeplan::profiler {

namespace {

double combine_token_bytes(const SweepSpec& s, DType dt) {
  return (s.top_k + 1.0) * s.hidden * dtype_bytes(dt);
}

class CombineCase final : public OpCase {
 public:
  CombineCase(const SweepSpec& s, int tokens, DType dtype, kernels::Backend& backend)
      : t_(tokens), k_(s.top_k), h_(s.hidden), dtype_(dtype), backend_(backend) {
    const std::size_t pairs = usz(tokens) * usz(s.top_k);
    y_ = random_values(dtype, pairs * usz(s.hidden), 9);
    weights_ = random_values(DType::kFp32, pairs, 10, 0.0F, 1.0F);
    if (s.shared_width > 0) shared_ = random_values(dtype, usz(tokens) * usz(s.hidden), 11);
    pair_row_.resize(pairs);
    for (std::size_t i = 0; i < pairs; ++i) {
      pair_row_[i] = static_cast<int>((i * 2654435761ULL) % pairs);
    }
  }

  void run() override {
    // The layer allocates its output for every forward: so does this case.
    out_ = std::vector<float>(usz(t_) * usz(h_));
    backend_.combine(kernels::OpContext{}, y_, pair_row_, weights_, shared_, t_, k_, h_, dtype_,
                     out_);
    if (fault_) out_[out_.size() / 2] += 0.5F;
  }

  Check verify() override {
    run();
    for (std::size_t t = 0; t < usz(t_); ++t) {
      for (std::size_t c = 0; c < usz(h_); ++c) {
        double ref = 0.0, abs_sum = 0.0;
        for (std::size_t j = 0; j < usz(k_); ++j) {
          const std::size_t pair = t * usz(k_) + j;
          const double v =
              static_cast<double>(weights_[pair]) * y_[usz(pair_row_[pair]) * usz(h_) + c];
          ref += v;
          abs_sum += std::abs(v);
        }
        if (!shared_.empty()) {
          ref += shared_[t * usz(h_) + c];
          abs_sum += std::abs(shared_[t * usz(h_) + c]);
        }
        const double got = out_[t * usz(h_) + c];
        if (!(std::abs(got - ref) <= sum_tolerance(dtype_, 2 * (k_ + 1), abs_sum, ref))) {
          return {false, "out[" + std::to_string(t) + "," + std::to_string(c) +
                             "] = " + std::to_string(got) + ", expected " + std::to_string(ref)};
        }
      }
    }
    return {};
  }

 private:
  int t_, k_, h_;
  DType dtype_;
  kernels::Backend& backend_;
  std::vector<float> y_, weights_, shared_, out_;
  std::vector<int> pair_row_;
};

}  // namespace

OpTable combine_sum_op() {
  OpTable t;
  t.name = "combine_sum";
  t.sweep = [](const SweepSpec& s) {
    return byte_sweep(s, combine_token_bytes, [&](DType dt, long tokens) {
      OpPoint p;
      p.op = "combine_sum";
      p.dtype = dt;
      p.bytes = static_cast<double>(tokens) * combine_token_bytes(s, dt);
      p.m = p.bytes;
      p.shape = shape_text({{"bytes", p.bytes},
                            {"tokens", static_cast<double>(tokens)},
                            {"top_k", s.top_k},
                            {"hidden", s.hidden}});
      p.kernel = s.backend + " combine";
      return p;
    });
  };
  t.init = [](const OpPoint& p, const SweepSpec& s, kernels::Communicator*,
              kernels::Backend& backend) -> Result<std::unique_ptr<OpCase>> {
    MOEPLAN_TRY_STATUS(backend_supports(backend, kernels::BackendOp::kCombine, p.dtype));
    return std::unique_ptr<OpCase>(std::make_unique<CombineCase>(
        s, static_cast<int>(std::lround(p.bytes / combine_token_bytes(s, p.dtype))), p.dtype,
        backend));
  };
  return t;
}

}  // namespace moeplan::profiler
