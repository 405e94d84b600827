// 4-bit weights: e2m1 rounding, MXFP4, NVFP4 and int4-group quantization on the grids
// checkpoints store, their packing, and the layer's experts decoded on load.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "kernels/dtype_convert.hpp"
#include "kernels/four_bit.hpp"
#include "kernels/fp8.hpp"
#include "kernels/layer_spec.hpp"
#include "models/registry.hpp"

namespace moeplan::kernels {
namespace test_four_bit {
namespace {

TEST(E2m1, EveryCodeRoundTripsAndTiesGoToTheEvenCode) {
  for (std::uint8_t c = 0; c < 16; ++c) {
    if (c == 8) continue;  // −0 decodes to 0, which encodes as +0
    EXPECT_EQ(f32_to_e2m1(e2m1_to_f32(c)), c) << int(c);
  }
  EXPECT_EQ(e2m1_to_f32(0x7), 6.0F);
  EXPECT_EQ(e2m1_to_f32(0xd), -3.0F);
  // Midpoints between neighbours go to the code whose mantissa bit is 0.
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(0.25F)), 0.0F);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(0.75F)), 1.0F);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(1.25F)), 1.0F);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(1.75F)), 2.0F);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(2.5F)), 2.0F);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(3.5F)), 4.0F);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(5.0F)), 4.0F);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(-0.76F)), -1.0F);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(0.2F)), 0.0F);
  // Beyond 6: saturation, as the MX conversion does.
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(7.9F)), 6.0F);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(-1e6F)), -6.0F);
}

TEST(Mxfp4, SharedExponentCodesAndPacking) {
  // One column, two groups of 32 inputs: the first with amax 5 (floor(log2 5) = 2, scale 2^0),
  // the second with amax 0.1 (floor(log2 0.1) = −4, scale 2^−6); then an all-zero group.
  const int in = 96;
  std::vector<float> w(in, 0.0F);
  w[0] = 5.0F;     // a tie between 4 and 6: 4
  w[1] = -1.3F;    // → −1.5
  w[2] = 0.2F;     // → 0
  w[32] = 0.1F;    // 6.4 · 2^−6 saturates to 6 · 2^−6
  w[33] = -0.03F;  // −1.92 · 2^−6 → −2 · 2^−6
  const Mxfp4Groups q = quantize_mxfp4(w, in, 1, 32);
  ASSERT_EQ(q.scales.size(), 3U);
  EXPECT_EQ(q.scales[0], 127);
  EXPECT_EQ(q.scales[1], 127 - 6);
  EXPECT_EQ(q.scales[2], 0);  // 2^−127: an all-zero group
  EXPECT_EQ(q.code(0, 0), 0x6);
  EXPECT_EQ(q.code(1, 0), 0xb);
  EXPECT_EQ(q.code(2, 0), 0x0);
  // Input 2i in the low nibble, 2i + 1 in the high nibble of byte i.
  EXPECT_EQ(q.codes[0], 0xb6);
  std::vector<float> d(in);
  dequantize_mxfp4(q, DType::kFp32, d);
  EXPECT_EQ(d[0], 4.0F);
  EXPECT_EQ(d[1], -1.5F);
  EXPECT_EQ(d[32], 6.0F / 64.0F);
  EXPECT_EQ(d[33], -2.0F / 64.0F);
  EXPECT_EQ(d[64], 0.0F);
}

TEST(Mxfp4, ErrorWithinTheGridOfItsGroup) {
  // A group's values lie below 8 · 2^e (amax < 2^(floor(log2 amax) + 1)); the widest e2m1 gap is
  // 2 (4 to 6), so rounding errs by at most 2^e, saturation (6 .. 8) by at most 2 · 2^e.
  const int in = 128;
  const int out = 16;
  std::vector<float> w(static_cast<std::size_t>(in * out));
  for (std::size_t i = 0; i < w.size(); ++i) {
    w[i] = uniform_value(7, 1, i) * std::ldexp(1.0F, static_cast<int>(i % 11) - 5);
  }
  const Mxfp4Groups q = quantize_mxfp4(w, in, out, 32);
  std::vector<float> d(w.size());
  dequantize_mxfp4(q, DType::kBf16, d);
  for (int r = 0; r < in; ++r) {
    for (int c = 0; c < out; ++c) {
      const std::size_t i = static_cast<std::size_t>(r * out + c);
      const int e = q.scales[static_cast<std::size_t>((r / 32) * out + c)] - 127;
      EXPECT_LE(std::fabs(d[i] - w[i]), std::ldexp(2.0F, e)) << r << "," << c;
      EXPECT_EQ(d[i], std::ldexp(e2m1_to_f32(static_cast<std::uint8_t>(q.code(r, c))), e));
    }
  }
}

TEST(Int4Groups, AwqZeroPointsAndGptqPacking) {
  // Eight inputs 0 .. 7 of one column, asymmetric: scale = fp16(7 / 15) = 0.466552734375,
  // zero 0, codes round(j / scale) = 0 2 4 6 9 11 13 15, packed low nibble first.
  std::vector<float> w(8);
  for (int j = 0; j < 8; ++j) w[static_cast<std::size_t>(j)] = static_cast<float>(j);
  const Int4Groups q = quantize_int4_groups(w, 8, 1, 8, true);
  EXPECT_EQ(q.scales[0], round_to(DType::kFp16, 7.0F / 15.0F));
  EXPECT_EQ(q.scales[0], 0.466552734375F);
  EXPECT_EQ(q.zeros[0], 0);
  EXPECT_EQ(q.qweight[0], 0xFDB96420U);
  std::vector<float> d(8);
  dequantize_int4_groups(q, DType::kFp32, d);
  EXPECT_EQ(d[4], 9.0F * 0.466552734375F);
}

TEST(Int4Groups, GptqSymmetricGridAndClamp) {
  // Symmetric: scale = fp16(2·amax / 15), zero 8, codes clamped to 0 .. 15 — so +amax lands on
  // 7 · scale (GPTQ's grid has one more step below zero than above).
  const int in = 256;
  const int out = 8;
  std::vector<float> w(static_cast<std::size_t>(in * out));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = uniform_value(11, 2, i);
  w[3] = 1.0F;  // column 3's first group: amax 1
  const Int4Groups q = quantize_int4_groups(w, in, out, 128, false);
  std::vector<float> d(w.size());
  dequantize_int4_groups(q, DType::kFp32, d);
  const float s = round_to(DType::kFp16, 2.0F / 15.0F);
  EXPECT_EQ(q.scales[3], s);
  EXPECT_EQ(q.code(0, 3), 15);
  EXPECT_EQ(d[3], 7.0F * s);
  for (int r = 0; r < in; ++r) {
    for (int c = 0; c < out; ++c) {
      const std::size_t i = static_cast<std::size_t>(r * out + c);
      const std::size_t g = static_cast<std::size_t>((r / 128) * out + c);
      EXPECT_EQ(q.zeros[g], 8);
      const float x = w[i] / q.scales[g];
      if (x >= -8.0F && x <= 7.0F) {
        EXPECT_LE(std::fabs(d[i] - w[i]), 0.5F * q.scales[g] * (1.0F + 1e-6F)) << r << "," << c;
      } else {
        EXPECT_NEAR(d[i], (x < 0.0F ? -8.0F : 7.0F) * q.scales[g], 1e-7F);
      }
    }
  }
}

// The set of values e2m1 · 2^e can take.
bool on_mxfp4_grid(float v, int e) {
  const float x = std::ldexp(std::fabs(v), -e);
  for (const float g : {0.0F, 0.5F, 1.0F, 1.5F, 2.0F, 3.0F, 4.0F, 6.0F}) {
    if (x == g) return true;
  }
  return false;
}

// NVFP4 as ModelOpt quantizes it: global scale g = tensor amax / (6 · 448); per 16 inputs an
// e4m3 scale of amax / 6 / g (1 for an all-zero group); values e2m1(v / (scale · g)).
TEST(Nvfp4, TwoLevelScalesCodesAndPacking) {
  // [32 × 2]: column 0 holds group 0 = {6, 3, −1.5, 0.25, 0 …} (amax 6) and an all-zero group 1;
  // column 1 holds 6.5 then zeros in group 0 and −0.75 in group 1.
  std::vector<float> w(32 * 2, 0.0F);
  const auto set = [&](int r, int c, float v) { w[static_cast<std::size_t>(r * 2 + c)] = v; };
  set(0, 0, 6.0F);
  set(1, 0, 3.0F);
  set(2, 0, -1.5F);
  set(3, 0, 0.25F);  // a tie between 0 and 0.5: the even code, 0
  set(0, 1, 6.5F);
  set(16, 1, -0.75F);
  // tensor amax 2688 = 6 · 448: g = 1 exactly.
  const Nvfp4Groups q = quantize_nvfp4(w, 32, 2, 16, 2688.0F);
  EXPECT_EQ(q.global_scale, 1.0F);
  ASSERT_EQ(q.scales.size(), 4U);
  EXPECT_EQ(q.scales[0], f32_to_e4m3(1.0F));  // 6 / 6
  EXPECT_EQ(q.scales[2], f32_to_e4m3(1.0F));  // all zero: 1
  // 6.5 / 6 = 1.083… rounds to e4m3 1.125; 6.5 / 1.125 = 5.78 → 6 (code 7).
  EXPECT_EQ(e4m3_to_f32(q.scales[1]), 1.125F);
  EXPECT_EQ(q.code(0, 1), 7);
  // −0.75 / 6 = 0.125 exactly in e4m3; −0.75 / 0.125 = −6 → code 8 | 7.
  EXPECT_EQ(e4m3_to_f32(q.scales[3]), 0.125F);
  EXPECT_EQ(q.code(16, 1), 0xF);
  EXPECT_EQ(q.code(0, 0), 7);    // 6
  EXPECT_EQ(q.code(1, 0), 5);    // 3
  EXPECT_EQ(q.code(2, 0), 0xB);  // −1.5
  EXPECT_EQ(q.code(3, 0), 0);    // 0.25 → 0
  // Packing: input 2i in the low nibble, 2i + 1 in the high one (byte [0][0] = 6, 3).
  EXPECT_EQ(q.codes[0], 0x57);
  std::vector<float> d(w.size());
  dequantize_nvfp4(q, DType::kFp32, d);
  EXPECT_EQ(d[0], 6.0F);
  EXPECT_EQ(d[1], 6.0F * 1.125F);
  EXPECT_EQ(d[static_cast<std::size_t>(16 * 2 + 1)], -0.75F);
  EXPECT_EQ(d[static_cast<std::size_t>(3 * 2)], 0.0F);
  // A global scale below 1 scales every block: amax 26.88 gives g = 0.01; the same values
  // decode to the same multiples of 0.01 · e4m3(block / 0.01 / 6)·…
  const Nvfp4Groups small = quantize_nvfp4(w, 32, 2, 16, 26.88F);
  EXPECT_FLOAT_EQ(small.global_scale, 0.01F);
  dequantize_nvfp4(small, DType::kFp32, d);
  EXPECT_FLOAT_EQ(d[0], e2m1_to_f32(static_cast<std::uint8_t>(small.code(0, 0))) *
                            e4m3_to_f32(small.scales[0]) * 0.01F);
}

// The layer's NVFP4 experts: every value on its group's grid, gate and up sharing one global
// scale, and a tp-slice cut from the full expert (the global scale is the whole matrix's).
TEST(FourBitLayer, Nvfp4ExpertsShareTheWholeMatrixsGlobalScale) {
  auto m = models::load_model("qwen3-30b-a3b");
  ASSERT_TRUE(m.ok());
  auto spec = LayerSpec::from_model(*m, 8, DType::kBf16, 5);  // H 256, I 96
  ASSERT_TRUE(spec.ok());
  auto plain = *spec;
  auto f = parse_weight_format("nvfp4", DType::kBf16);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(apply_weight_format(*spec, *f).ok());
  EXPECT_EQ(spec->four_bit, WeightScheme::kNvfp4);
  EXPECT_EQ(spec->four_bit_group, 16);
  // The kernels run it as W4A16: activations at the dtype, and say so.
  const WeightFormat run = kernel_run_format(*f);
  EXPECT_EQ(run.activations, ActivationScheme::kPlain);
  EXPECT_NE(kernel_run_note(run).find("runs as W4A16"), std::string::npos);
  const int h = spec->hidden, width = spec->intermediate;
  const ExpertWeights p = make_expert(plain, 4, 0, 1);
  const ExpertWeights q = make_expert(*spec, 4, 0, 1);
  // Re-quantize the plain gate/up with their shared amax: the layer's values are exactly those.
  float amax = 0.0F;
  for (const float v : p.gate_up) amax = std::max(amax, std::fabs(v));
  std::vector<float> gate(static_cast<std::size_t>(h * width));
  for (int r = 0; r < h; ++r) {
    for (int c = 0; c < width; ++c) {
      gate[static_cast<std::size_t>(r * width + c)] =
          p.gate_up[static_cast<std::size_t>(r * 2 * width + c)];
    }
  }
  std::vector<float> want(gate.size());
  dequantize_nvfp4(quantize_nvfp4(gate, h, width, 16, amax), DType::kBf16, want);
  for (int r = 0; r < h; ++r) {
    for (int c = 0; c < width; ++c) {
      ASSERT_EQ(q.gate_up[static_cast<std::size_t>(r * 2 * width + c)],
                want[static_cast<std::size_t>(r * width + c)])
          << r << "," << c;
    }
  }
  // Slice 1 of 2 (48 wide: 3 groups of the down projection's inputs) is the full expert's.
  EXPECT_FALSE(weight_slice_violation(*spec, 2).has_value());
  EXPECT_TRUE(weight_slice_violation(*spec, 4).has_value());  // 24: not whole groups of 16
  const ExpertWeights s = make_expert(*spec, 4, 1, 2);
  for (int r = 0; r < s.width; ++r) {
    for (int c = 0; c < h; ++c) {
      ASSERT_EQ(s.down[static_cast<std::size_t>(r * h + c)],
                q.down[static_cast<std::size_t>((48 + r) * h + c)]);
    }
  }
  for (int r = 0; r < h; ++r) {
    for (int c = 0; c < s.width; ++c) {
      ASSERT_EQ(s.gate_up[static_cast<std::size_t>(r * 2 * s.width + s.width + c)],
                q.gate_up[static_cast<std::size_t>(r * 2 * width + width + 48 + c)]);
    }
  }
}

TEST(FourBitLayer, ExpertsAreDecodedAlongTheirInputsAndSlicesMatch) {
  auto m = models::load_model("qwen3-30b-a3b");
  ASSERT_TRUE(m.ok());
  auto plain = LayerSpec::from_model(*m, 8, DType::kBf16, 5);  // H 256, I 96
  ASSERT_TRUE(plain.ok());
  auto f = parse_weight_format("mxfp4", DType::kBf16);
  ASSERT_TRUE(f.ok());
  LayerSpec spec = *plain;
  ASSERT_TRUE(apply_weight_format(spec, *f).ok());
  EXPECT_EQ(spec.four_bit, WeightScheme::kMxfp4);
  const ExpertWeights p = make_expert(*plain, 3, 0, 1);
  const ExpertWeights q = make_expert(spec, 3, 0, 1);
  const int h = spec.hidden;
  const int width = spec.intermediate;
  // Groups of 32 along the inputs: H for gate and up (column c of [H][2·width]), the width for
  // down ([width][H]). Each group's exponent follows from the plain values' amax.
  auto check = [](const std::vector<float>& plain_w, const std::vector<float>& quant, int rows,
                  int ld, int c0, int cols) {
    for (int c = c0; c < c0 + cols; ++c) {
      for (int g = 0; g < rows / 32; ++g) {
        float amax = 0.0F;
        for (int r = 32 * g; r < 32 * (g + 1); ++r) {
          amax = std::max(amax, std::fabs(plain_w[static_cast<std::size_t>(r * ld + c)]));
        }
        const int e = static_cast<int>(std::floor(std::log2(amax))) - 2;
        for (int r = 32 * g; r < 32 * (g + 1); ++r) {
          const float v = quant[static_cast<std::size_t>(r * ld + c)];
          ASSERT_TRUE(on_mxfp4_grid(v, e)) << r << "," << c << ": " << v << " 2^" << e;
          ASSERT_LE(std::fabs(v - plain_w[static_cast<std::size_t>(r * ld + c)]),
                    std::ldexp(2.0F, e));
        }
      }
    }
  };
  check(p.gate_up, q.gate_up, h, 2 * width, 0, 2 * width);
  check(p.down, q.down, width, h, 0, h);
  // A tp slice holds whole groups of the full expert: 2 slices (48 wide) are refused; slice 1
  // of 3 holds rows [32, 64) of down and columns [32, 64) of gate and of up, decoded alike.
  EXPECT_TRUE(weight_slice_violation(spec, 2).has_value());
  EXPECT_FALSE(weight_slice_violation(spec, 3).has_value());  // 32 wide
  const ExpertWeights s = make_expert(spec, 3, 1, 3);
  for (int r = 0; r < s.width; ++r) {
    for (int c = 0; c < h; ++c) {
      ASSERT_EQ(s.down[static_cast<std::size_t>(r * h + c)],
                q.down[static_cast<std::size_t>((32 + r) * h + c)]);
    }
  }
  for (int r = 0; r < h; ++r) {
    for (int c = 0; c < s.width; ++c) {
      ASSERT_EQ(s.gate_up[static_cast<std::size_t>(r * 2 * s.width + c)],
                q.gate_up[static_cast<std::size_t>(r * 2 * width + 32 + c)]);
      ASSERT_EQ(s.gate_up[static_cast<std::size_t>(r * 2 * s.width + s.width + c)],
                q.gate_up[static_cast<std::size_t>(r * 2 * width + width + 32 + c)]);
    }
  }
}

TEST(FourBitLayer, W4a16ZeroPointsComeFromTheFormat) {
  auto m = models::load_model("mixtral-8x7b");
  ASSERT_TRUE(m.ok());
  auto spec = LayerSpec::from_model(*m, 8, DType::kFp16, 5);  // H 512, I 1792
  ASSERT_TRUE(spec.ok());
  auto f = parse_weight_format("w4a16", DType::kFp16);
  ASSERT_TRUE(f.ok());
  f->zero_points = true;
  ASSERT_TRUE(apply_weight_format(*spec, *f).ok());
  EXPECT_TRUE(spec->four_bit_zero_points);
  EXPECT_EQ(spec->four_bit_group, 128);
  const ExpertWeights e = make_expert(*spec, 0, 0, 1);
  // Every group of 128 inputs of a column takes at most 16 distinct values.
  const int h = spec->hidden;
  for (int c = 0; c < h; c += 97) {
    for (int g = 0; g < spec->intermediate / 128; ++g) {
      std::set<float> values;
      for (int r = 128 * g; r < 128 * (g + 1); ++r) {
        values.insert(e.down[static_cast<std::size_t>(r * h + c)]);
      }
      EXPECT_LE(values.size(), 16U) << c << "," << g;
      EXPECT_GE(values.size(), 8U) << c << "," << g;  // uniform values use most of the grid
    }
  }
  f->group_size = 0;  // per channel (group_size −1 in a config)
  const Status st = apply_weight_format(*spec, *f);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("has no CPU kernel"), std::string::npos);
}

}  // namespace
}  // namespace test_four_bit
}  // namespace moeplan::kernels
