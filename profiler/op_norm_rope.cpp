// norm and rope: the attention block's elementwise passes through the profiled backend's own
// rms_norm and rope, by bytes as the cost model counts them — RMSNorm over rows of the hidden
// width (read and written: 2·rows·H·b), RoPE over a token's query and key heads read from the
// fused projection's rows and written out (2·rows·heads·head_dim·b).
#include <algorithm>

#include "kernels/norm_rope.hpp"
#include "profiler/op_common.hpp"
#include "profiler/ops.hpp"

namespace moeplan::profiler {

namespace {

/// Rows a case checks against the reference: up to 16 spread over the case.
std::vector<int> sample_rows(int rows) {
  std::vector<int> out;
  const int n = std::min(rows, 16);
  for (int i = 0; i < n; ++i) {
    out.push_back(static_cast<int>(static_cast<long>(i) * (rows - 1) / std::max(1, n - 1)));
  }
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

double norm_row_bytes(const SweepSpec& s, DType dt) { return 2.0 * s.hidden * dtype_bytes(dt); }

class NormCase final : public OpCase {
 public:
  NormCase(int rows, int width, float eps, DType dtype, kernels::Backend& backend)
      : rows_(rows), width_(width), eps_(eps), dtype_(dtype), backend_(backend) {
    x_ = random_values(dtype, usz(rows) * usz(width), 21, -2.0F, 2.0F);
    w_ = random_values(DType::kFp32, usz(width), 22, 0.5F, 1.5F);
    out_.assign(x_.size(), 0.0F);
  }

  void run() override {
    backend_.rms_norm(kernels::OpContext{}, x_, rows_, width_, width_, w_, eps_, dtype_, out_);
    if (fault_) out_[out_.size() / 2] = 2.0F * out_[out_.size() / 2] + 1.0F;
  }

  Check verify() override {
    run();
    for (const int r : sample_rows(rows_)) {
      const auto row = std::span<const float>(x_).subspan(usz(r) * usz(width_), usz(width_));
      const auto ref = kernels::rms_norm_reference(row, 1, width_, w_, eps_, dtype_);
      for (int c = 0; c < width_; ++c) {
        const double got = out_[usz(r) * usz(width_) + usz(c)];
        if (!(std::abs(got - ref.out[usz(c)]) <= ref.bound[usz(c)])) {
          return {false, "norm[" + std::to_string(r) + "," + std::to_string(c) + "] = " +
                             std::to_string(got) + ", expected " + std::to_string(ref.out[usz(c)]) +
                             " ± " + std::to_string(ref.bound[usz(c)])};
        }
      }
    }
    return {};
  }

 private:
  int rows_, width_;
  float eps_;
  DType dtype_;
  kernels::Backend& backend_;
  std::vector<float> x_, w_, out_;
};

double rope_row_bytes(const SweepSpec& s, DType dt) {
  return 2.0 * s.rope_heads * s.rope_head_dim * dtype_bytes(dt);
}

/// RoPE of `rows` tokens at positions 0..rows−1 (one prompt), read from rows of a fused
/// projection (the q/k heads, then as many again: the v part it skips).
class RopeCase final : public OpCase {
 public:
  RopeCase(int rows, const SweepSpec& s, DType dtype, kernels::Backend& backend)
      : rows_(rows),
        heads_(s.rope_heads),
        head_dim_(s.rope_head_dim),
        rot_dim_(s.rope_rot_dim),
        ld_(2 * s.rope_heads * s.rope_head_dim),
        dtype_(dtype),
        backend_(backend) {
    in_ = random_values(dtype, usz(rows) * usz(ld_), 23, -2.0F, 2.0F);
    cache_ = kernels::rope_cos_sin_cache(rows, rot_dim_, s.rope_theta);
    positions_.resize(usz(rows));
    for (int r = 0; r < rows; ++r) positions_[usz(r)] = r;
    out_.assign(usz(rows) * usz(heads_) * usz(head_dim_), 0.0F);
  }

  void run() override {
    backend_.rope(kernels::OpContext{}, in_, ld_, rows_, heads_, head_dim_, rot_dim_, positions_,
                  cache_, dtype_, out_);
    if (fault_) out_[out_.size() / 2] = 2.0F * out_[out_.size() / 2] + 1.0F;
  }

  Check verify() override {
    run();
    const std::size_t row_out = usz(heads_) * usz(head_dim_);
    for (const int r : sample_rows(rows_)) {
      const auto in = std::span<const float>(in_).subspan(usz(r) * usz(ld_), usz(ld_));
      const int pos = positions_[usz(r)];
      const auto ref = kernels::rope_reference(in, ld_, 1, heads_, head_dim_, rot_dim_,
                                               std::span<const int>(&pos, 1), cache_, dtype_);
      for (std::size_t i = 0; i < row_out; ++i) {
        const double got = out_[usz(r) * row_out + i];
        if (!(std::abs(got - ref.out[i]) <= ref.bound[i])) {
          return {false, "rope row " + std::to_string(r) + " value " + std::to_string(i) + " = " +
                             std::to_string(got) + ", expected " + std::to_string(ref.out[i]) +
                             " ± " + std::to_string(ref.bound[i])};
        }
      }
    }
    return {};
  }

 private:
  int rows_, heads_, head_dim_, rot_dim_, ld_;
  DType dtype_;
  kernels::Backend& backend_;
  std::vector<float> in_, cache_, out_;
  std::vector<int> positions_;
};

}  // namespace

OpTable norm_op() {
  OpTable t;
  t.name = "norm";
  t.sweep = [](const SweepSpec& s) {
    return byte_sweep(s, norm_row_bytes, [&](DType dt, long rows) {
      OpPoint p;
      p.op = "norm";
      p.dtype = dt;
      p.bytes = static_cast<double>(rows) * norm_row_bytes(s, dt);
      p.m = p.bytes;
      p.shape = shape_text(
          {{"bytes", p.bytes}, {"rows", static_cast<double>(rows)}, {"width", s.hidden}});
      p.kernel = s.backend + " rms_norm";
      return p;
    });
  };
  t.init = [](const OpPoint& p, const SweepSpec& s, kernels::Communicator*,
              kernels::Backend& backend) -> Result<std::unique_ptr<OpCase>> {
    MOEPLAN_TRY_STATUS(backend_supports(backend, kernels::BackendOp::kRmsNorm, p.dtype));
    const long rows = std::lround(p.bytes / norm_row_bytes(s, p.dtype));
    return std::unique_ptr<OpCase>(
        std::make_unique<NormCase>(static_cast<int>(rows), s.hidden, s.norm_eps, p.dtype, backend));
  };
  return t;
}

OpTable rope_op() {
  OpTable t;
  t.name = "rope";
  t.sweep = [](const SweepSpec& s) {
    if (s.rope_heads < 1) return std::vector<OpPoint>{};  // no attention heads
    return byte_sweep(s, rope_row_bytes, [&](DType dt, long rows) {
      OpPoint p;
      p.op = "rope";
      p.dtype = dt;
      p.bytes = static_cast<double>(rows) * rope_row_bytes(s, dt);
      p.m = p.bytes;
      p.shape = shape_text({{"bytes", p.bytes},
                            {"rows", static_cast<double>(rows)},
                            {"heads", s.rope_heads},
                            {"head_dim", s.rope_head_dim},
                            {"rot_dim", s.rope_rot_dim}});
      p.kernel = s.backend + " rope (NeoX, from the fused projection)";
      return p;
    });
  };
  t.init = [](const OpPoint& p, const SweepSpec& s, kernels::Communicator*,
              kernels::Backend& backend) -> Result<std::unique_ptr<OpCase>> {
    MOEPLAN_TRY_STATUS(backend_supports(backend, kernels::BackendOp::kRope, p.dtype));
    if (s.rope_heads < 1) return Error{"rope: the model has no attention heads"};
    const long rows = std::lround(p.bytes / rope_row_bytes(s, p.dtype));
    return std::unique_ptr<OpCase>(
        std::make_unique<RopeCase>(static_cast<int>(rows), s, p.dtype, backend));
  };
  return t;
}

}  // namespace moeplan::profiler
