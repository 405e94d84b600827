// fp8 e4m3fn: every one of the 256 codes, rounding at every midpoint, saturation, NaN; and the
// block-scaled quantization of DeepSeek-V3's recipe.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/fp8.hpp"

namespace moeplan::kernels {
namespace {

bool is_nan_code(int c) { return (c & 0x7f) == 0x7f; }

// The value of code c from the format's definition (bias 7, 3 mantissa bits, subnormals at
// exponent 0), written independently of e4m3_to_f32.
double reference_value(int c) {
  const int e = (c >> 3) & 0xf;
  const int m = c & 7;
  const double v = e == 0 ? m * std::ldexp(1.0, -9) : (8 + m) * std::ldexp(1.0, e - 10);
  return (c & 0x80) != 0 ? -v : v;
}

float next_up(float f) { return std::nextafter(f, std::numeric_limits<float>::infinity()); }
float next_down(float f) { return std::nextafter(f, -std::numeric_limits<float>::infinity()); }

TEST(E4m3, EveryCodeDecodesAndRoundTrips) {
  int finite = 0;
  for (int c = 0; c < 256; ++c) {
    const float v = e4m3_to_f32(static_cast<std::uint8_t>(c));
    if (is_nan_code(c)) {
      EXPECT_TRUE(std::isnan(v)) << c;
      EXPECT_TRUE(std::isnan(e4m3_to_f32(f32_to_e4m3(v))));
      continue;
    }
    ++finite;
    EXPECT_EQ(static_cast<double>(v), reference_value(c)) << c;
    const int back = f32_to_e4m3(v);
    // -0 keeps its sign bit; every other code comes back as itself.
    EXPECT_EQ(back, c) << c << " = " << v;
  }
  EXPECT_EQ(finite, 254);
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0F);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0F, -9));
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.0F, -6));
}

TEST(E4m3, EveryMidpointRoundsToEvenAndItsNeighboursToNearest) {
  // Adjacent non-negative finite codes 0x00..0x7e: the midpoint goes to the even code (even
  // mantissa), and one float step either side goes to the nearer code.
  for (int c = 0; c < 0x7e; ++c) {
    const double lo = reference_value(c);
    const double hi = reference_value(c + 1);
    const auto mid = static_cast<float>((lo + hi) / 2.0);  // exact in fp32
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2.0);
    const int even = (c % 2 == 0) ? c : c + 1;
    EXPECT_EQ(f32_to_e4m3(mid), even) << "midpoint of " << lo << " and " << hi;
    EXPECT_EQ(f32_to_e4m3(next_down(mid)), c) << lo;
    EXPECT_EQ(f32_to_e4m3(next_up(mid)), c + 1) << hi;
    EXPECT_EQ(f32_to_e4m3(-mid), 0x80 | even);
    EXPECT_EQ(f32_to_e4m3(-next_up(mid)), 0x80 | (c + 1));
  }
}

TEST(E4m3, SaturatesAndKeepsNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const float v : {448.0F, next_up(448.0F), 464.0F, 480.0F, 1e6F, 3e38F, inf}) {
    EXPECT_EQ(f32_to_e4m3(v), 0x7e) << v;
    EXPECT_EQ(f32_to_e4m3(-v), 0xfe) << v;
  }
  // Just below 448: the midpoint of 416 and 448 (432) goes to the even mantissa, 448.
  EXPECT_EQ(f32_to_e4m3(432.0F), 0x7e);
  EXPECT_EQ(f32_to_e4m3(next_down(432.0F)), 0x7d);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(f32_to_e4m3(std::nanf("")))));
  EXPECT_EQ(f32_to_e4m3(std::nanf("")) & 0x7f, 0x7f);
  // Underflow: half the smallest subnormal is a tie to even (0); just above it rounds up.
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.0F, -10)), 0x00);
  EXPECT_EQ(f32_to_e4m3(next_up(std::ldexp(1.0F, -10))), 0x01);
  EXPECT_EQ(f32_to_e4m3(1e-30F), 0x00);
  EXPECT_EQ(f32_to_e4m3(-1e-30F), 0x80);
  EXPECT_EQ(f32_to_e4m3(0.0F), 0x00);
  EXPECT_EQ(f32_to_e4m3(-0.0F), 0x80);
  // The largest subnormal rounds up into the smallest normal across the boundary.
  EXPECT_EQ(f32_to_e4m3(next_down(std::ldexp(1.0F, -6))), 0x08);
}

TEST(E4m3, RelativeErrorWithinUnitRoundoff) {
  // In the normal range, |round(x) − x| ≤ 2^-4 |x| (half an ulp at 3 mantissa bits).
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> mant(1.0F, 2.0F);
  std::uniform_int_distribution<int> exp(-6, 7);
  for (int i = 0; i < 100000; ++i) {
    const float x = std::ldexp(mant(gen), exp(gen));
    const float r = e4m3_to_f32(f32_to_e4m3(x));
    EXPECT_LE(std::fabs(r - x), std::ldexp(1.0F, -4) * std::fabs(x)) << x;
  }
}

TEST(BlockQuant, ScalesPerBlockWithPartialEdges) {
  // 200 × 300 in 128 × 128 blocks: 2 × 3 scales, the edge blocks partial (as DeepSeek-V3's
  // weight_scale_inv tiles [576, 7168] into [5, 56]).
  const int rows = 200, cols = 300;
  std::vector<float> w(static_cast<std::size_t>(rows * cols));
  std::mt19937 gen(3);
  std::normal_distribution<float> nd(0.0F, 0.02F);
  for (float& v : w) v = nd(gen);
  w[static_cast<std::size_t>(150 * cols + 290)] = -0.9F;  // block (1, 2)'s amax
  std::vector<std::uint8_t> q(w.size());
  std::vector<float> s(6), back(w.size());
  quantize_blocks(w, rows, cols, 128, 128, q, s);
  EXPECT_FLOAT_EQ(s[5], 0.9F / 448.0F);
  EXPECT_EQ(q[static_cast<std::size_t>(150 * cols + 290)], 0xfe);  // −448 exactly
  dequantize_blocks(q, s, rows, cols, 128, 128, back);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const std::size_t i = static_cast<std::size_t>(r * cols + c);
      const float scale = s[static_cast<std::size_t>((r / 128) * 3 + c / 128)];
      // Each value within half an ulp of its scaled code: 2^-4 relative in the normal range,
      // and an absolute 2^-10 · scale below 2^-6 · scale (subnormals).
      const float bound =
          std::max(std::ldexp(1.0F, -4) * std::fabs(w[i]), std::ldexp(1.0F, -10) * scale);
      EXPECT_LE(std::fabs(back[i] - w[i]), bound * (1.0F + 1e-6F)) << r << "," << c;
    }
  }
  // An all-zero block gets scale 1 and zero codes.
  std::vector<float> zeros(16, 0.0F);
  std::vector<std::uint8_t> zq(16, 0xff);
  std::vector<float> zs(1, 0.0F);
  quantize_blocks(zeros, 4, 4, 128, 128, zq, zs);
  EXPECT_EQ(zs[0], 1.0F);
  for (const auto b : zq) EXPECT_EQ(b, 0);
}

}  // namespace
}  // namespace moeplan::kernels
