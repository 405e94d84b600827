// fp8 e4m3fn conversion and block-scaled quantization.
#include "kernels/fp8.hpp"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "models/index.hpp"

namespace moeplan::kernels {

std::uint8_t f32_to_e4m3(float f) {
  std::uint32_t x = 0;
  std::memcpy(&x, &f, 4);
  const auto sign = static_cast<std::uint8_t>((x >> 24) & 0x80U);
  const std::uint32_t abs = x & 0x7fffffffU;
  if (abs > 0x7f800000U) return static_cast<std::uint8_t>(sign | 0x7fU);  // NaN
  if (abs < 0x3c800000U) {
    // Below 2^-6, the smallest normal: multiples of 2^-9 (subnormals), rounded to nearest even
    // (the scaling by 2^9 is exact; nearbyint rounds ties to even). A result of 8 is 2^-6,
    // whose code (exponent 1, mantissa 0) is 8 as well.
    float af = 0.0F;
    std::memcpy(&af, &abs, 4);
    const auto q = static_cast<std::uint32_t>(std::nearbyint(af * 512.0F));
    return static_cast<std::uint8_t>(sign | q);
  }
  if (abs >= 0x43e00000U) return static_cast<std::uint8_t>(sign | 0x7eU);  // ≥ 448 (and inf)
  // Normal: rebias the exponent (127 → 7), keep 3 mantissa bits, round to nearest even. A
  // carry out of the mantissa bumps the exponent, as it should; past 448 it saturates.
  const std::uint32_t rebased = abs - ((127U - 7U) << 23);
  const std::uint32_t rounding = 0x7ffffU + ((rebased >> 20) & 1U);
  const std::uint32_t code = (rebased + rounding) >> 20;
  return static_cast<std::uint8_t>(sign | std::min<std::uint32_t>(code, 0x7eU));
}

namespace {
// All 256 codes decoded at compile time (every step exact: a power of two times a value with at
// most 4 significant bits), so dequantizing a weight matrix is one load and one multiply per value
// instead of an ldexp call — which was most of an fp8 layer's weight set-up time.
constexpr float decode_e4m3(unsigned bits) {
  const bool negative = (bits & 0x80U) != 0;
  const unsigned exp = (bits >> 3) & 0xfU;
  const unsigned mant = bits & 0x7U;
  float v = 0.0F;
  if (exp == 0xfU && mant == 0x7U) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    v = static_cast<float>(mant) / 512.0F;  // subnormal: mant · 2^-9
  } else {
    v = 1.0F + static_cast<float>(mant) / 8.0F;
    for (unsigned e = exp; e > 7; --e) v *= 2.0F;
    for (unsigned e = exp; e < 7; ++e) v /= 2.0F;
  }
  return negative ? -v : v;
}

constexpr std::array<float, 256> make_e4m3_table() {
  std::array<float, 256> t{};
  for (unsigned c = 0; c < 256; ++c) t[c] = decode_e4m3(c);
  return t;
}
constexpr std::array<float, 256> kE4m3Table = make_e4m3_table();
}  // namespace

float e4m3_to_f32(std::uint8_t bits) { return kE4m3Table[bits]; }

namespace {
int blocks(int n, int b) { return (n + b - 1) / b; }
}  // namespace

void quantize_blocks(std::span<const float> values, int rows, int cols, int block_rows,
                     int block_cols, std::span<std::uint8_t> q, std::span<float> scales) {
  const int br = blocks(rows, block_rows);
  const int bc = blocks(cols, block_cols);
  assert(values.size() == static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  assert(q.size() == values.size());
  assert(scales.size() == static_cast<std::size_t>(br) * static_cast<std::size_t>(bc));
  (void)br;
  for (int r0 = 0; r0 < rows; r0 += block_rows) {
    const int r1 = std::min(rows, r0 + block_rows);
    for (int c0 = 0; c0 < cols; c0 += block_cols) {
      const int c1 = std::min(cols, c0 + block_cols);
      float amax = 0.0F;
      for (int r = r0; r < r1; ++r) {
        for (int c = c0; c < c1; ++c) {
          amax = std::max(amax, std::fabs(values[row_major(r, c, cols)]));
        }
      }
      const float scale = amax > 0.0F ? amax / kE4m3Max : 1.0F;
      scales[row_major(r0 / block_rows, c0 / block_cols, bc)] = scale;
      for (int r = r0; r < r1; ++r) {
        for (int c = c0; c < c1; ++c) {
          const std::size_t i = row_major(r, c, cols);
          q[i] = f32_to_e4m3(values[i] / scale);
        }
      }
    }
  }
}

void dequantize_blocks(std::span<const std::uint8_t> q, std::span<const float> scales, int rows,
                       int cols, int block_rows, int block_cols, std::span<float> values) {
  const int bc = blocks(cols, block_cols);
  assert(values.size() == q.size());
  const float* table = kE4m3Table.data();
  for (int r = 0; r < rows; ++r) {
    const float* row_scales = scales.data() + row_major(r / block_rows, 0, bc);
    const std::uint8_t* qr = q.data() + row_major(r, 0, cols);
    float* out = values.data() + row_major(r, 0, cols);
    for (int c0 = 0, b = 0; c0 < cols; c0 += block_cols, ++b) {
      const int c1 = std::min(cols, c0 + block_cols);
      const float scale = row_scales[b];
      for (int c = c0; c < c1; ++c) out[c] = table[qr[c]] * scale;
    }
  }
}

void fake_quantize_rows(float* x, int rows, int cols, int group) {
  const int g = blocks(cols, group);
  std::vector<std::uint8_t> q(static_cast<std::size_t>(cols));
  std::vector<float> scales(static_cast<std::size_t>(g));
  for (int r = 0; r < rows; ++r) {
    const std::span<float> row(x + static_cast<std::ptrdiff_t>(r) * cols,
                               static_cast<std::size_t>(cols));
    quantize_blocks(row, 1, cols, 1, group, q, scales);
    dequantize_blocks(q, scales, 1, cols, 1, group, row);
  }
}

std::string Fp8Act::describe() const {
  switch (kind) {
    case Kind::kGroups: return "1×" + std::to_string(group) + " groups";
    case Kind::kToken: return "per token";
    case Kind::kStatic: return "static per tensor";
  }
  return "?";
}

void fake_quantize_activations(float* x, int rows, int cols, const Fp8Act& act) {
  if (rows <= 0 || cols <= 0) return;
  if (act.kind == Fp8Act::Kind::kGroups) {
    fake_quantize_rows(x, rows, cols, act.group);
    return;
  }
  if (act.kind == Fp8Act::Kind::kToken) {
    fake_quantize_rows(x, rows, cols, cols);
    return;
  }
  const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  for (std::size_t i = 0; i < n; ++i) x[i] = e4m3_to_f32(f32_to_e4m3(x[i] / act.scale)) * act.scale;
}

float calibrated_scale(std::span<const float> values) {
  float amax = 0.0F;
  for (const float v : values) amax = std::max(amax, std::fabs(v));
  return amax > 0.0F ? amax / kE4m3Max : 1.0F;
}

void dequantize_panel(const std::uint8_t* q, int ld, int c0, int rows, int first_col, int cols,
                      int block_rows, int block_cols, const float* scales, int scale_ld, float* out,
                      int out_ld, int out_c0) {
  // Branch-free decode (vectorizes): the 7 magnitude bits shifted into an fp32 exponent and
  // mantissa (bias 7 becomes bias 0: the value / 2^120, subnormals included), times 2^120
  // (exact), times the block scale (one rounding, as e4m3_to_f32(q) · scale), sign last. The NaN
  // codes (0x7f, 0xff) never come out of quantize_blocks for finite weights.
  const float k2p120 = std::ldexp(1.0F, 120);
  const auto decode = [k2p120](std::uint32_t bits, float sc, float* o) {
    const std::uint32_t mag = (bits & 0x7fU) << 20;
    float v = 0.0F;
    std::memcpy(&v, &mag, sizeof v);
    v = v * k2p120 * sc;
    std::uint32_t vb = 0;
    std::memcpy(&vb, &v, sizeof vb);
    vb |= (bits & 0x80U) << 24;
    std::memcpy(o, &vb, sizeof vb);
  };
  const int b0 = first_col / block_cols;
  const int b1 = blocks(first_col + cols, block_cols);
  for (int r = 0; r < rows; ++r) {
    const std::uint8_t* in = q + static_cast<std::ptrdiff_t>(r) * ld + c0;
    float* o = out + static_cast<std::ptrdiff_t>(r) * out_ld + out_c0 - first_col;
    const float* srow = scales + static_cast<std::ptrdiff_t>(r / block_rows) * scale_ld;
    if (block_cols == 1) {  // one scale per column (per output channel): one loop, vectorized
      for (int c = first_col; c < first_col + cols; ++c) decode(in[c], srow[c], &o[c]);
      continue;
    }
    for (int b = b0; b < b1; ++b) {
      const float sc = srow[b];
      const int begin = std::max(first_col, b * block_cols);
      const int end = std::min(first_col + cols, (b + 1) * block_cols);
      for (int c = begin; c < end; ++c) decode(in[c], sc, &o[c]);
    }
  }
}

void dequantize_part(const std::uint8_t* q, int ld, int c0, int rows, int cols, int block_rows,
                     int block_cols, const float* scales, float* out, int out_ld, int out_c0) {
  dequantize_panel(q, ld, c0, rows, 0, cols, block_rows, block_cols, scales,
                   blocks(cols, block_cols), out, out_ld, out_c0);
}

double e4m3_error_bound(double abs_value, double scale) {
  const double u32 = std::ldexp(1.0, -24);
  return (std::ldexp(1.0, -4) + 4.0 * u32) * abs_value +
         std::ldexp(1.0, -10) * scale * (1.0 + 4.0 * u32);
}

void quantize_part(std::vector<float>& values, int ld, int c0, int rows, int cols, int block_rows,
                   int block_cols, std::vector<std::uint8_t>& q, std::vector<float>& scales) {
  const auto n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  std::vector<float> part(n), deq(n);
  std::vector<std::uint8_t> bits(n);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      part[static_cast<std::size_t>(r * cols + c)] =
          values[static_cast<std::size_t>(r) * static_cast<std::size_t>(ld) +
                 static_cast<std::size_t>(c0 + c)];
    }
  }
  scales.assign(static_cast<std::size_t>(blocks(rows, block_rows) * blocks(cols, block_cols)),
                0.0F);
  quantize_blocks(part, rows, cols, block_rows, block_cols, bits, scales);
  dequantize_blocks(bits, scales, rows, cols, block_rows, block_cols, deq);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const auto src = static_cast<std::size_t>(r * cols + c);
      const auto dst = static_cast<std::size_t>(r) * static_cast<std::size_t>(ld) +
                       static_cast<std::size_t>(c0 + c);
      values[dst] = deq[src];
      q[dst] = bits[src];
    }
  }
}

}  // namespace moeplan::kernels
