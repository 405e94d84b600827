// RMSNorm and RoPE on the CPU and their references.
#include "kernels/norm_rope.hpp"

#include <Eigen/Core>
#include <cmath>

#include "kernels/dtype_convert.hpp"

namespace moeplan::kernels {

namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstStridedRows = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;
using Rows = Eigen::Map<RowMat>;

std::size_t zu(long v) { return static_cast<std::size_t>(v); }

/// γ_n = n·u/(1 − n·u) of fp32.
double gamma32(double n) {
  const double u = std::ldexp(1.0, -24);
  return n * u / (1.0 - n * u);
}

/// The storage rounding of a result: relative (u of the dtype; fp32 results are stored as
/// computed) and, for fp16, the absolute half-spacing of its subnormals.
double store_rel(DType d) { return d == DType::kFp32 ? 0.0 : unit_roundoff(d); }
double store_abs(DType d) { return d == DType::kFp16 ? std::ldexp(1.0, -25) : 0.0; }

}  // namespace

void rms_norm_cpu(std::span<const float> x, int rows, int width, int in_ld,
                  std::span<const float> weight, float eps, DType dtype, std::span<float> out) {
  if (rows <= 0) return;
  const ConstStridedRows xm(x.data(), rows, width, Eigen::OuterStride<>(in_ld));
  Rows om(out.data(), rows, width);
  const Eigen::Map<const Eigen::RowVectorXf> w(weight.data(), width);
  const auto n = static_cast<float>(width);
  for (int r = 0; r < rows; ++r) {
    const float inv = 1.0F / std::sqrt(xm.row(r).squaredNorm() / n + eps);
    om.row(r) = xm.row(r).cwiseProduct(w) * inv;
  }
  round_to(dtype, out.first(zu(rows) * zu(width)));
}

std::vector<float> rope_cos_sin_cache(int max_positions, int rot_dim, double theta) {
  const int half = rot_dim / 2;
  std::vector<float> cache(zu(max_positions) * zu(rot_dim));
  for (int p = 0; p < max_positions; ++p) {
    for (int i = 0; i < half; ++i) {
      const double angle = p * std::pow(theta, -2.0 * i / rot_dim);
      cache[zu(p) * zu(rot_dim) + zu(i)] = static_cast<float>(std::cos(angle));
      cache[zu(p) * zu(rot_dim) + zu(half + i)] = static_cast<float>(std::sin(angle));
    }
  }
  return cache;
}

void rope_cpu(std::span<const float> in, int in_ld, int rows, int heads, int head_dim, int rot_dim,
              std::span<const int> positions, std::span<const float> cos_sin, DType dtype,
              std::span<float> out) {
  const int half = rot_dim / 2;
  for (int r = 0; r < rows; ++r) {
    const float* cs = cos_sin.data() + zu(positions[zu(r)]) * zu(rot_dim);
    for (int h = 0; h < heads; ++h) {
      const float* x = in.data() + zu(r) * zu(in_ld) + zu(h) * zu(head_dim);
      float* o = out.data() + (zu(r) * zu(heads) + zu(h)) * zu(head_dim);
      for (int i = 0; i < half; ++i) {
        const float c = cs[i], s = cs[half + i];
        const float x1 = x[i], x2 = x[half + i];
        o[i] = x1 * c - x2 * s;
        o[half + i] = x2 * c + x1 * s;
      }
      for (int i = rot_dim; i < head_dim; ++i) o[i] = x[i];
    }
  }
  round_to(dtype, out.first(zu(rows) * zu(heads) * zu(head_dim)));
}

ElementwiseReference rms_norm_reference(std::span<const float> x, int rows, int width,
                                        std::span<const float> weight, float eps, DType dtype) {
  ElementwiseReference ref;
  ref.out.resize(zu(rows) * zu(width));
  ref.bound.resize(ref.out.size());
  // The fp32 sum of w squares (any order) is within γ_w of the exact sum of positive terms;
  // the division by w, the + eps and the square root keep the root within γ_{w+3}; its
  // reciprocal within γ_{2w+8} (1/(1+θ) for |θ| ≤ γ_{w+3}, one more rounding); the two
  // products of x·w·inv add two: γ_{2w+10} relative, then the dtype's rounding.
  const double g = gamma32(2.0 * width + 10.0);
  for (int r = 0; r < rows; ++r) {
    double ss = 0.0;
    for (int c = 0; c < width; ++c) {
      const double v = x[zu(r) * zu(width) + zu(c)];
      ss += v * v;
    }
    const double inv = 1.0 / std::sqrt(ss / width + static_cast<double>(eps));
    for (int c = 0; c < width; ++c) {
      const std::size_t i = zu(r) * zu(width) + zu(c);
      const double v = static_cast<double>(x[i]) * weight[zu(c)] * inv;
      ref.out[i] = v;
      ref.bound[i] =
          g * std::abs(v) + store_rel(dtype) * (1.0 + g) * std::abs(v) + store_abs(dtype);
    }
  }
  return ref;
}

ElementwiseReference rope_reference(std::span<const float> in, int in_ld, int rows, int heads,
                                    int head_dim, int rot_dim, std::span<const int> positions,
                                    std::span<const float> cos_sin, DType dtype) {
  ElementwiseReference ref;
  ref.out.resize(zu(rows) * zu(heads) * zu(head_dim));
  ref.bound.resize(ref.out.size());
  const int half = rot_dim / 2;
  // Each rotated value is a·c ∓ b·s from the cache's fp32 cos and sin: two products and a sum
  // in fp32 (or one fused multiply-add) stay within γ_2·(|a·c| + |b·s|); copied values are
  // exact. Then the dtype's rounding.
  const double g = gamma32(2.0);
  for (int r = 0; r < rows; ++r) {
    const float* cs = cos_sin.data() + zu(positions[zu(r)]) * zu(rot_dim);
    for (int h = 0; h < heads; ++h) {
      const float* x = in.data() + zu(r) * zu(in_ld) + zu(h) * zu(head_dim);
      const std::size_t o = (zu(r) * zu(heads) + zu(h)) * zu(head_dim);
      for (int i = 0; i < head_dim; ++i) {
        double v = x[i], mag = 0.0;
        if (i < rot_dim) {
          const int j = i < half ? i : i - half;
          const double c = cs[j], s = cs[half + j];
          const double x1 = x[j], x2 = x[half + j];
          v = i < half ? x1 * c - x2 * s : x2 * c + x1 * s;
          mag =
              i < half ? std::abs(x1 * c) + std::abs(x2 * s) : std::abs(x2 * c) + std::abs(x1 * s);
        }
        const double err = g * mag;
        ref.out[o + zu(i)] = v;
        ref.bound[o + zu(i)] = err + store_rel(dtype) * (std::abs(v) + err) + store_abs(dtype);
      }
    }
  }
  return ref;
}

}  // namespace moeplan::kernels
