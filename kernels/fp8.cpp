// fp8 e4m3fn conversion and block-scaled quantization.
#include "kernels/fp8.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

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

float e4m3_to_f32(std::uint8_t bits) {
  const bool negative = (bits & 0x80U) != 0;
  const unsigned exp = (bits >> 3) & 0xfU;
  const unsigned mant = bits & 0x7U;
  float v = 0.0F;
  if (exp == 0xfU && mant == 0x7U) {
    v = std::nanf("");
  } else if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -9);
  } else {
    v = std::ldexp(1.0F + static_cast<float>(mant) / 8.0F, static_cast<int>(exp) - 7);
  }
  return negative ? -v : v;
}

namespace {
int blocks(int n, int b) { return (n + b - 1) / b; }
/// Row-major index of (r, c) in a matrix of `cols` columns.
std::size_t at(int r, int c, int cols) {
  return static_cast<std::size_t>(r) * static_cast<std::size_t>(cols) + static_cast<std::size_t>(c);
}
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
          amax = std::max(amax, std::fabs(values[at(r, c, cols)]));
        }
      }
      const float scale = amax > 0.0F ? amax / kE4m3Max : 1.0F;
      scales[at(r0 / block_rows, c0 / block_cols, bc)] = scale;
      for (int r = r0; r < r1; ++r) {
        for (int c = c0; c < c1; ++c) {
          const std::size_t i = at(r, c, cols);
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
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const std::size_t i = at(r, c, cols);
      values[i] = e4m3_to_f32(q[i]) * scales[at(r / block_rows, c / block_cols, bc)];
    }
  }
}

}  // namespace moeplan::kernels
