// The elementwise work of the DeepEP dispatchers (kernels/moe_layer.cpp deepep_normal and
// deepep_ll), named as the cost model books it (planner/costs/cost_model_deepep.cpp):
// - quantize_fp8: each token to fp8 e4m3 with one fp32 scale per 128 values, into a fresh
//   buffer. Bytes per token as the cost model counts them: the bf16 row read (2·H) and the fp8
//   row with its scales written (H + 4·⌊H/128⌋).
// - dequantize_fp8: received fp8 rows back to values for the experts, stored in the dtype; the
//   same bytes per row.
// - combine_reduce: partial outputs summed on the way back (deepep_normal's expert rank and
//   forwarder), two rows into one per item, stored in the dtype: 3·H·b per item (two rows read,
//   one written).
#include <algorithm>
#include <cmath>

#include "kernels/fp8.hpp"
#include "kernels/uninit_vector.hpp"
#include "profiler/op_common.hpp"
#include "profiler/ops.hpp"

namespace moeplan::profiler {

namespace {

constexpr int kGroup = 128;

int groups_of(int hidden) { return (hidden + kGroup - 1) / kGroup; }

double fp8_row_bytes(const SweepSpec& s, DType) {
  return 3.0 * s.hidden + 4.0 * static_cast<double>(s.hidden / kGroup);
}

double reduce_item_bytes(const SweepSpec& s, DType dt) { return 3.0 * s.hidden * dtype_bytes(dt); }

void quantize(const std::vector<float>& x, int rows, int h, kernels::UninitVector<std::uint8_t>& q,
              kernels::UninitVector<float>& scales) {
  const int g = groups_of(h);
  for (int r = 0; r < rows; ++r) {
    kernels::quantize_blocks(std::span(x).subspan(usz(r) * usz(h), usz(h)), 1, h, 1, kGroup,
                             std::span(q.data() + usz(r) * usz(h), usz(h)),
                             std::span(scales.data() + usz(r) * usz(g), usz(g)));
  }
}

class QuantizeCase final : public OpCase {
 public:
  QuantizeCase(int rows, int hidden, DType dtype) : rows_(rows), h_(hidden) {
    x_ = random_values(dtype, usz(rows) * usz(hidden), 21);
  }

  void run() override {
    kernels::UninitVector<std::uint8_t> q(usz(rows_) * usz(h_));
    kernels::UninitVector<float> scales(usz(rows_) * usz(groups_of(h_)));
    quantize(x_, rows_, h_, q, scales);
    if (fault_) scales[0] *= 2.0F;
    q_ = std::move(q);
    scales_ = std::move(scales);
  }

  Check verify() override {
    run();
    // Each value within e4m3's rounding of its scaled value: 2⁻⁴ relative in the normal range,
    // 2⁻¹⁰ of the scale below it, plus a few fp32 ulps.
    const int g = groups_of(h_);
    for (int r = 0; r < rows_; ++r) {
      for (int c = 0; c < h_; ++c) {
        const std::size_t i = usz(r) * usz(h_) + usz(c);
        const double scale = scales_[usz(r) * usz(g) + usz(c / kGroup)];
        const double got = static_cast<double>(kernels::e4m3_to_f32(q_[i])) * scale;
        const double x = x_[i];
        const double tol = (0.0625 + 1e-6) * std::abs(x) + std::ldexp(1.0, -10) * scale * 1.001;
        if (!(std::abs(got - x) <= tol)) {
          return {false, "value " + std::to_string(i) + " = " + std::to_string(got) +
                             " after fp8 quantization, expected " + std::to_string(x) + " within " +
                             std::to_string(tol)};
        }
      }
    }
    return {};
  }

 private:
  int rows_, h_;
  std::vector<float> x_;
  kernels::UninitVector<std::uint8_t> q_;
  kernels::UninitVector<float> scales_;
};

class DequantizeCase final : public OpCase {
 public:
  DequantizeCase(int rows, int hidden, DType dtype)
      : rows_(rows),
        h_(hidden),
        dtype_(dtype),
        q_(usz(rows) * usz(hidden)),
        scales_(usz(rows) * usz(groups_of(hidden))) {
    quantize(random_values(dtype, usz(rows) * usz(hidden), 22), rows, hidden, q_, scales_);
  }

  void run() override {
    kernels::UninitVector<float> out(usz(rows_) * usz(h_));
    const int g = groups_of(h_);
    for (int r = 0; r < rows_; ++r) {
      kernels::dequantize_blocks(std::span(q_.data() + usz(r) * usz(h_), usz(h_)),
                                 std::span(scales_.data() + usz(r) * usz(g), usz(g)), 1, h_, 1,
                                 kGroup, std::span(out.data() + usz(r) * usz(h_), usz(h_)));
    }
    kernels::round_to(dtype_, std::span(out.data(), out.size()));  // for the dtype's experts
    if (fault_) out[out.size() / 2] += 1.0F;
    out_ = std::move(out);
  }

  Check verify() override {
    run();
    const int g = groups_of(h_);
    for (std::size_t i = 0; i < out_.size(); ++i) {
      const std::size_t r = i / usz(h_);
      const std::size_t c = i % usz(h_);
      const float expected =
          kernels::round_to(dtype_, kernels::e4m3_to_f32(q_[i]) *
                                        scales_[r * usz(g) + c / static_cast<std::size_t>(kGroup)]);
      if (out_[i] != expected) {
        return {false, "value " + std::to_string(i) + " = " + std::to_string(out_[i]) +
                           ", expected " + std::to_string(expected)};
      }
    }
    return {};
  }

 private:
  int rows_, h_;
  DType dtype_;
  kernels::UninitVector<std::uint8_t> q_;
  kernels::UninitVector<float> scales_;
  kernels::UninitVector<float> out_;
};

class CombineReduceCase final : public OpCase {
 public:
  CombineReduceCase(int items, int hidden, DType dtype, kernels::Backend& backend)
      : items_(items), h_(hidden), dtype_(dtype), backend_(backend) {
    rows_ = random_values(dtype, 2 * usz(items) * usz(hidden), 23);
    pair_row_.resize(2 * usz(items));
    for (std::size_t i = 0; i < pair_row_.size(); ++i) {
      pair_row_[i] = static_cast<int>((i * 2654435761ULL) % pair_row_.size());
    }
    weights_.assign(pair_row_.size(), 1.0F);
  }

  void run() override {
    out_ = std::vector<float>(usz(items_) * usz(h_));
    backend_.combine(kernels::OpContext{}, rows_, pair_row_, weights_, {}, items_, 2, h_, dtype_,
                     out_);
    if (fault_) out_[out_.size() / 2] += 0.5F;
  }

  Check verify() override {
    run();
    for (std::size_t t = 0; t < usz(items_); ++t) {
      for (std::size_t c = 0; c < usz(h_); ++c) {
        const double a = rows_[usz(pair_row_[2 * t]) * usz(h_) + c];
        const double b = rows_[usz(pair_row_[2 * t + 1]) * usz(h_) + c];
        const double got = out_[t * usz(h_) + c];
        if (!(std::abs(got - (a + b)) <=
              sum_tolerance(dtype_, 2, std::abs(a) + std::abs(b), a + b))) {
          return {false, "out[" + std::to_string(t) + "," + std::to_string(c) +
                             "] = " + std::to_string(got) + ", expected " + std::to_string(a + b)};
        }
      }
    }
    return {};
  }

 private:
  int items_, h_;
  DType dtype_;
  kernels::Backend& backend_;
  std::vector<float> rows_, weights_, out_;
  std::vector<int> pair_row_;
};

OpTable fp8_table(const char* name, const char* kernel, bool quantize_op) {
  OpTable t;
  t.name = name;
  t.host_op = true;
  t.sweep = [name, kernel](const SweepSpec& s) {
    return byte_sweep(s, fp8_row_bytes, [&](DType dt, long rows) {
      OpPoint p;
      p.op = name;
      p.dtype = dt;
      p.bytes = static_cast<double>(rows) * fp8_row_bytes(s, dt);
      p.m = p.bytes;
      p.shape = shape_text(
          {{"bytes", p.bytes}, {"rows", static_cast<double>(rows)}, {"hidden", s.hidden}});
      p.kernel = kernel;
      return p;
    });
  };
  t.init = [quantize_op](const OpPoint& p, const SweepSpec& s, kernels::Communicator*,
                         kernels::Backend&) -> Result<std::unique_ptr<OpCase>> {
    if (p.dtype == DType::kFp8) return Error{"fp8 is not a storage dtype of the CPU backend"};
    const int rows = static_cast<int>(std::lround(p.bytes / fp8_row_bytes(s, p.dtype)));
    if (quantize_op)
      return std::unique_ptr<OpCase>(std::make_unique<QuantizeCase>(rows, s.hidden, p.dtype));
    return std::unique_ptr<OpCase>(std::make_unique<DequantizeCase>(rows, s.hidden, p.dtype));
  };
  return t;
}

}  // namespace

OpTable quantize_fp8_op() {
  return fp8_table("quantize_fp8", "quantize_blocks 1x128 (kernels/fp8)", true);
}

OpTable dequantize_fp8_op() {
  return fp8_table("dequantize_fp8", "dequantize_blocks 1x128 (kernels/fp8)", false);
}

OpTable combine_reduce_op() {
  OpTable t;
  t.name = "combine_reduce";
  t.sweep = [](const SweepSpec& s) {
    return byte_sweep(s, reduce_item_bytes, [&](DType dt, long items) {
      OpPoint p;
      p.op = "combine_reduce";
      p.dtype = dt;
      p.bytes = static_cast<double>(items) * reduce_item_bytes(s, dt);
      p.m = p.bytes;
      p.shape = shape_text(
          {{"bytes", p.bytes}, {"items", static_cast<double>(items)}, {"hidden", s.hidden}});
      p.kernel = s.backend + " combine (2 rows per item)";
      return p;
    });
  };
  t.init = [](const OpPoint& p, const SweepSpec& s, kernels::Communicator*,
              kernels::Backend& backend) -> Result<std::unique_ptr<OpCase>> {
    MOEPLAN_TRY_STATUS(backend_supports(backend, kernels::BackendOp::kCombine, p.dtype));
    return std::unique_ptr<OpCase>(std::make_unique<CombineReduceCase>(
        static_cast<int>(std::lround(p.bytes / reduce_item_bytes(s, p.dtype))), s.hidden, p.dtype,
        backend));
  };
  return t;
}

}  // namespace moeplan::profiler
