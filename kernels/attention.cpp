// The attention core on the CPU and its reference.
#include "kernels/attention.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/dtype_convert.hpp"

namespace moeplan::kernels {

namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using StridedMap = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;

/// Query rows per tile: the Q·Kᵀ tile of one K/V head is [rows × keys] floats.
constexpr int kTileRows = 256;

std::size_t zu(long v) { return static_cast<std::size_t>(v); }

/// γ_n = n·u/(1 − n·u) of fp32.
double gamma32(double n) {
  const double u = std::ldexp(1.0, -24);
  return n * u / (1.0 - n * u);
}

}  // namespace

void attention_cpu(const AttentionShape& s, std::span<const float> q, std::span<const float> k,
                   std::span<const float> v, DType dtype, std::span<float> out) {
  const int group = s.heads / s.kv_heads;
  const int tile_tokens = std::max(1, kTileRows / group);
  const int past = s.kv_len - s.q_len;  // cached keys before the first new token
  RowMat qt, sc, o;
  for (int b = 0; b < s.batch; ++b) {
    for (int g = 0; g < s.kv_heads; ++g) {
      const StridedMap kg(k.data() + (zu(b) * zu(s.kv_len) * zu(s.kv_heads) + zu(g)) * zu(s.qk_dim),
                          s.kv_len, s.qk_dim, Eigen::OuterStride<>(s.kv_heads * s.qk_dim));
      const StridedMap vg(v.data() + (zu(b) * zu(s.kv_len) * zu(s.kv_heads) + zu(g)) * zu(s.v_dim),
                          s.kv_len, s.v_dim, Eigen::OuterStride<>(s.kv_heads * s.v_dim));
      for (int t0 = 0; t0 < s.q_len; t0 += tile_tokens) {
        const int t1 = std::min(s.q_len, t0 + tile_tokens);
        const int rows = (t1 - t0) * group;
        const int keys = past + t1;  // the keys the tile's last token sees
        qt.resize(rows, s.qk_dim);
        for (int t = t0; t < t1; ++t) {
          const float* src =
              q.data() +
              ((zu(b) * zu(s.q_len) + zu(t)) * zu(s.heads) + zu(g) * zu(group)) * zu(s.qk_dim);
          std::memcpy(qt.data() + zu(t - t0) * zu(group) * zu(s.qk_dim), src,
                      zu(group) * zu(s.qk_dim) * sizeof(float));
        }
        sc.resize(rows, keys);
        sc.noalias() = qt * kg.topRows(keys).transpose();
        for (int r = 0; r < rows; ++r) {
          float* row = sc.data() + zu(r) * zu(keys);
          const int visible = past + t0 + r / group + 1;
          float mx = -std::numeric_limits<float>::infinity();
          for (int j = 0; j < visible; ++j) {
            row[j] *= s.scale;
            mx = std::max(mx, row[j]);
          }
          float sum = 0.0F;
          for (int j = 0; j < visible; ++j) {
            row[j] = std::exp(row[j] - mx);
            sum += row[j];
          }
          for (int j = 0; j < visible; ++j) row[j] = round_to(dtype, row[j] / sum);
          std::fill(row + visible, row + keys, 0.0F);
        }
        o.resize(rows, s.v_dim);
        o.noalias() = sc * vg.topRows(keys);
        for (int t = t0; t < t1; ++t) {
          float* dst =
              out.data() +
              ((zu(b) * zu(s.q_len) + zu(t)) * zu(s.heads) + zu(g) * zu(group)) * zu(s.v_dim);
          const float* src = o.data() + zu(t - t0) * zu(group) * zu(s.v_dim);
          for (std::size_t i = 0; i < zu(group) * zu(s.v_dim); ++i)
            dst[i] = round_to(dtype, src[i]);
        }
      }
    }
  }
}

void attention_reference_row(const AttentionShape& s, std::span<const float> q,
                             std::span<const float> k, std::span<const float> v, DType dtype, int b,
                             int t, int h, std::span<double> out, std::span<double> bound) {
  const double u32 = std::ldexp(1.0, -24);
  const double ud = unit_roundoff(dtype);
  const int group = s.heads / s.kv_heads;
  const int g = h / group;
  const int visible = s.kv_len - s.q_len + t + 1;
  const float* qr = q.data() + ((zu(b) * zu(s.q_len) + zu(t)) * zu(s.heads) + zu(h)) * zu(s.qk_dim);
  std::vector<double> z(zu(visible)), p(zu(visible));
  double zmax = -std::numeric_limits<double>::infinity(), zmax_abs = 0.0, delta = 0.0;
  for (int j = 0; j < visible; ++j) {
    const float* kr =
        k.data() + ((zu(b) * zu(s.kv_len) + zu(j)) * zu(s.kv_heads) + zu(g)) * zu(s.qk_dim);
    double dot = 0.0, dabs = 0.0;
    for (int i = 0; i < s.qk_dim; ++i) {
      dot += static_cast<double>(qr[i]) * kr[i];
      dabs += std::abs(static_cast<double>(qr[i]) * kr[i]);
    }
    z[zu(j)] = s.scale * dot;
    zmax = std::max(zmax, z[zu(j)]);
    zmax_abs = std::max(zmax_abs, std::abs(z[zu(j)]));
    // The fp32 score's error: its qk-term sum, then the product with the scale.
    delta = std::max(delta, s.scale * gamma32(s.qk_dim) * dabs + u32 * std::abs(z[zu(j)]));
  }
  double sum = 0.0;
  for (int j = 0; j < visible; ++j) {
    p[zu(j)] = std::exp(z[zu(j)] - zmax);
    sum += p[zu(j)];
  }
  for (double& pj : p) pj /= sum;
  // Each exponent is off by the score's error plus the rounding of its shift by the max
  // (≤ 2·u·max|z|), so a probability is off by a factor within e^(±2E); the fp32 exps (≤ 2u
  // each) and the L-term sum and division of the normalization add γ(L + 6).
  const double big_e = delta + 2.0 * u32 * zmax_abs;
  const double eps_p = (1.0 + std::expm1(2.0 * big_e)) * (1.0 + gamma32(visible + 6.0)) - 1.0;
  const double eps = (1.0 + eps_p) * (1.0 + ud) - 1.0;  // then rounded to the dtype
  // P·V sums L products in fp32; an online softmax also rescales its partial sums once per key
  // tile and divides once: γ(2L + 8) covers both forms.
  const double g_acc = gamma32(2.0 * visible + 8.0);
  for (int c = 0; c < s.v_dim; ++c) {
    double acc = 0.0, a = 0.0;
    for (int j = 0; j < visible; ++j) {
      const double vj =
          v[((zu(b) * zu(s.kv_len) + zu(j)) * zu(s.kv_heads) + zu(g)) * zu(s.v_dim) + zu(c)];
      acc += p[zu(j)] * vj;
      a += p[zu(j)] * std::abs(vj);
    }
    const double e_acc = eps * a + g_acc * (1.0 + eps) * a;
    out[zu(c)] = acc;
    bound[zu(c)] = e_acc + ud * (std::abs(acc) + e_acc) + 1e-30;
  }
}

AttentionReference attention_reference(const AttentionShape& s, std::span<const float> q,
                                       std::span<const float> k, std::span<const float> v,
                                       DType dtype) {
  AttentionReference ref;
  ref.out.assign(s.out_size(), 0.0);
  ref.bound.assign(s.out_size(), 0.0);
  const std::span<double> out(ref.out), bound(ref.bound);
  for (int b = 0; b < s.batch; ++b) {
    for (int t = 0; t < s.q_len; ++t) {
      for (int h = 0; h < s.heads; ++h) {
        const std::size_t at = ((zu(b) * zu(s.q_len) + zu(t)) * zu(s.heads) + zu(h)) * zu(s.v_dim);
        attention_reference_row(s, q, k, v, dtype, b, t, h, out.subspan(at, zu(s.v_dim)),
                                bound.subspan(at, zu(s.v_dim)));
      }
    }
  }
  return ref;
}

}  // namespace moeplan::kernels
