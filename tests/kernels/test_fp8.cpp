// fp8 e4m3fn: every one of the 256 codes, rounding at every midpoint, saturation, NaN; and the
// block-scaled quantization of DeepSeek-V3's recipe.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/dtype_convert.hpp"
#include "kernels/fp8.hpp"
#include "kernels/layer_spec.hpp"
#include "kernels/reference.hpp"
#include "models/registry.hpp"

namespace moeplan::kernels {
namespace test_fp8 {
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

TEST(Fp8Quant, FakeQuantizedRowsAndDequantizedPartsMatchTheBlockFunctions) {
  std::mt19937 gen(11);
  std::normal_distribution<float> nd(0.0F, 2.0F);
  const int rows = 3, cols = 300;
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (float& v : x) v = nd(gen);
  std::vector<float> y = x;
  fake_quantize_rows(y.data(), rows, cols, 128);
  for (int r = 0; r < rows; ++r) {
    std::vector<float> row(x.begin() + r * cols, x.begin() + (r + 1) * cols), back(row.size());
    std::vector<std::uint8_t> q(row.size());
    std::vector<float> s(3);
    quantize_blocks(row, 1, cols, 1, 128, q, s);
    dequantize_blocks(q, s, 1, cols, 1, 128, back);
    for (int c = 0; c < cols; ++c) {
      EXPECT_EQ(y[static_cast<std::size_t>(r * cols + c)], back[static_cast<std::size_t>(c)]);
      EXPECT_LE(std::fabs(back[static_cast<std::size_t>(c)] - row[static_cast<std::size_t>(c)]),
                e4m3_error_bound(std::fabs(row[static_cast<std::size_t>(c)]),
                                 s[static_cast<std::size_t>(c / 128)]));
    }
  }
  // Every finite code through dequantize_part: e4m3_to_f32(code) · scale exactly.
  std::vector<std::uint8_t> codes;
  for (int c = 0; c < 256; ++c) {
    if (!is_nan_code(c)) codes.push_back(static_cast<std::uint8_t>(c));
  }
  const int n = static_cast<int>(codes.size());
  for (const float scale : {1.0F, 0.0123F, 3.5F, 1e-20F}) {
    std::vector<float> dec(codes.size());
    dequantize_part(codes.data(), n, 0, 1, n, 1, n, &scale, dec.data(), n, 0);
    for (int i = 0; i < n; ++i) {
      const float want = e4m3_to_f32(codes[static_cast<std::size_t>(i)]) * scale;
      EXPECT_EQ(std::memcmp(&dec[static_cast<std::size_t>(i)], &want, 4), 0)
          << int{codes[static_cast<std::size_t>(i)]} << " at scale " << scale;
    }
  }
  // A [5 × 200] part at column 40 of a [5 × 300] store.
  std::vector<float> part(5 * 200), deq(part.size()), out(5 * 300, -1.0F);
  for (float& v : part) v = nd(gen);
  std::vector<std::uint8_t> q(part.size()), store(5 * 300, 0);
  std::vector<float> s(2);
  quantize_blocks(part, 5, 200, 128, 128, q, s);
  dequantize_blocks(q, s, 5, 200, 128, 128, deq);
  for (int r = 0; r < 5; ++r) {
    for (int c = 0; c < 200; ++c)
      store[static_cast<std::size_t>(r * 300 + 40 + c)] = q[static_cast<std::size_t>(r * 200 + c)];
  }
  dequantize_part(store.data(), 300, 40, 5, 200, 128, 128, s.data(), out.data(), 300, 40);
  for (int r = 0; r < 5; ++r) {
    EXPECT_EQ(out[static_cast<std::size_t>(r * 300 + 39)], -1.0F);  // outside the part
    for (int c = 0; c < 200; ++c) {
      EXPECT_EQ(out[static_cast<std::size_t>(r * 300 + 40 + c)],
                deq[static_cast<std::size_t>(r * 200 + c)]);
    }
  }
  // One scale per column (per output channel: [5 × 1] blocks), decoded in panels of 64 columns
  // from column 8 of the part, as the CPU GEMM reads them.
  std::vector<float> cs(200);
  quantize_blocks(part, 5, 200, 5, 1, q, cs);
  dequantize_blocks(q, cs, 5, 200, 5, 1, deq);
  std::vector<float> panel(5 * 64);
  for (int first = 8; first < 200; first += 64) {
    const int width = std::min(64, 200 - first);
    dequantize_panel(q.data(), 200, 0, 5, first, width, 5, 1, cs.data(), 200, panel.data(), 64, 0);
    for (int r = 0; r < 5; ++r) {
      for (int c = 0; c < width; ++c) {
        ASSERT_EQ(panel[static_cast<std::size_t>(r * 64 + c)],
                  deq[static_cast<std::size_t>(r * 200 + first + c)])
            << r << ", " << first + c;
      }
    }
  }
}

// The CPU backend's fp8 MLP in each fp8 format — DeepSeek-V3's 128×128 blocks with the rows and
// the activation quantized in 1 × 128 groups; per-channel weights with per-token activations;
// per-tensor weights with static activation scales: within the reference's derived bound at
// every storage dtype, and, in fp32 (where the bound has no dtype rounding to cover), a wrong
// weight scale — what a kernel reading another block's or channel's scale would do — breaks it,
// as does a wrong static activation scale.
TEST(Fp8Quant, BackendMlpWithinTheReferenceBoundAndAWrongScaleIsCaught) {
  auto m = models::load_model("deepseek-v3");
  ASSERT_TRUE(m.ok());
  for (const char* name : {"", "fp8-channel", "fp8-tensor"}) {
    SCOPED_TRACE(*name != 0 ? name : "the model's fp8-block");
    WeightFormat format = m->weights;
    if (*name != 0) {
      auto f = parse_weight_format(name, DType::kBf16);
      ASSERT_TRUE(f.ok());
      format = *f;
    }
    for (const DType dtype : {DType::kFp32, DType::kBf16, DType::kFp16}) {
      SCOPED_TRACE(dtype_name(dtype));
      auto spec = LayerSpec::from_model(*m, 8, dtype, 3);
      ASSERT_TRUE(spec.ok());
      ASSERT_TRUE(apply_weight_format(*spec, format).ok());
      ASSERT_TRUE(spec->fp8());
      if (*name == 0) {
        EXPECT_EQ(spec->fp8_block_out, 128);
        EXPECT_EQ(spec->fp8_act.kind, Fp8Act::Kind::kGroups);
        EXPECT_EQ(spec->fp8_act.group, 128);
      }
      const ExpertWeights w = make_expert(*spec, 5, 0, 1);
      ASSERT_EQ(w.fp8.size(), 1U);
      // gate_up holds the exact dequantized values of the fp8 form: (0, 1) is in the first
      // block, in the second channel, in the one tensor.
      const auto& f = w.fp8.front();
      const std::size_t scale_of_1 =
          spec->fp8_scheme == WeightScheme::kFp8Channel ? std::size_t{1} : std::size_t{0};
      EXPECT_EQ(w.gate_up[1], e4m3_to_f32(f.gate_up[1]) * f.gate_scales[scale_of_1]);
      const int h = spec->hidden, rows = 12;
      const std::vector<float> x = make_input(*spec, 0, rows);
      const std::vector<int> offsets{0, rows};
      auto cpu = make_cpu_backend();
      const MlpReference ref = mlp_reference(x, rows, h, w, dtype);
      const auto bound_use = [&](const ExpertWeights& weights) {
        std::vector<float> out(static_cast<std::size_t>(rows * h));
        cpu->expert_ffn(OpContext{}, x, offsets, std::span(&weights, 1), h, dtype, out);
        double use = 0.0;
        for (std::size_t i = 0; i < out.size(); ++i) {
          const double stored = static_cast<double>(round_to(dtype, out[i]));
          use = std::max(use, std::fabs(stored - ref.y[i]) / ref.bound[i]);
        }
        return use;
      };
      EXPECT_LE(bound_use(w), 1.0);
      if (dtype == DType::kFp32) {
        // The second column block of up (per channel: its first 128 channels, as a block of
        // them — one channel alone may feed activations SiLU all but zeroes on these rows),
        // the fourth block (or output channel) of down; per tensor, the one scale of each.
        const bool channel = spec->fp8_scheme == WeightScheme::kFp8Channel;
        const std::size_t down = f.down_scales.size() > 3 ? 3 : 0;
        ExpertWeights wrong = w;
        if (channel) {
          for (std::size_t c = 0; c < 128; ++c) wrong.fp8.front().up_scales[c] *= 1.25F;
        } else {
          wrong.fp8.front().up_scales[f.up_scales.size() > 1 ? 1 : 0] *= 1.25F;
        }
        EXPECT_GT(bound_use(wrong), 1.0);
        wrong = w;
        wrong.fp8.front().down_scales[down] *= 1.25F;
        EXPECT_GT(bound_use(wrong), 1.0);
        if (f.act.kind == Fp8Act::Kind::kStatic) {
          wrong = w;
          wrong.fp8.front().mid_scale *= 1.25F;
          EXPECT_GT(bound_use(wrong), 1.0);
        }
      }
    }
  }
}

// Per-channel and per-tensor scales are amax / 448 of the whole channel or matrix — its largest
// value decodes to exactly 448 · scale — and a tp-slice keeps the whole matrix's scales (a down
// channel spans every slice's inputs), so its values and codes are the full expert's; static
// activation scales are calibrated on the calibration tokens through the full expert.
TEST(Fp8Quant, ChannelAndTensorScalesAreTheWholeMatrixs) {
  auto m = models::load_model("qwen2-57b-a14b");
  ASSERT_TRUE(m.ok());
  for (const char* name : {"fp8-channel", "fp8-tensor"}) {
    SCOPED_TRACE(name);
    const bool channel = std::string(name) == "fp8-channel";
    auto spec = LayerSpec::from_model(*m, 8, DType::kBf16, 11);  // H 448, I 320
    ASSERT_TRUE(spec.ok());
    auto fmt = parse_weight_format(name, DType::kBf16);
    ASSERT_TRUE(fmt.ok() && apply_weight_format(*spec, *fmt).ok());
    EXPECT_EQ(spec->fp8_act.kind, channel ? Fp8Act::Kind::kToken : Fp8Act::Kind::kStatic);
    EXPECT_FALSE(weight_slice_violation(*spec, 4).has_value());  // 80-wide slices run
    const int h = spec->hidden, width = spec->intermediate;
    const ExpertWeights full = make_expert(*spec, 2, 0, 1);
    const Fp8ExpertWeights& f = full.fp8.front();
    ASSERT_EQ(f.gate_scales.size(), channel ? static_cast<std::size_t>(width) : 1U);
    ASSERT_EQ(f.down_scales.size(), channel ? static_cast<std::size_t>(h) : 1U);
    // gate: columns 0..width of gate_up [H][2·width]; down [width][H].
    const auto gate_at = [&](int r, int c) {
      return full.gate_up[static_cast<std::size_t>(r * 2 * width + c)];
    };
    const auto down_at = [&](int r, int c) {
      return full.down[static_cast<std::size_t>(r * h + c)];
    };
    float tensor_amax = 0.0F;
    for (int c = 0; c < width; ++c) {
      float amax = 0.0F;
      for (int r = 0; r < h; ++r) amax = std::max(amax, std::fabs(gate_at(r, c)));
      tensor_amax = std::max(tensor_amax, amax);
      if (channel) {
        EXPECT_FLOAT_EQ(amax, 448.0F * f.gate_scales[static_cast<std::size_t>(c)]);
      }
    }
    if (!channel) {
      EXPECT_FLOAT_EQ(tensor_amax, 448.0F * f.gate_scales[0]);
    }
    tensor_amax = 0.0F;
    for (int c = 0; c < h; ++c) {
      float amax = 0.0F;
      for (int r = 0; r < width; ++r) amax = std::max(amax, std::fabs(down_at(r, c)));
      tensor_amax = std::max(tensor_amax, amax);
      if (channel) {
        EXPECT_FLOAT_EQ(amax, 448.0F * f.down_scales[static_cast<std::size_t>(c)]);
      }
    }
    if (!channel) {
      EXPECT_FLOAT_EQ(tensor_amax, 448.0F * f.down_scales[0]);
    }
    // Slice 1 of 2: columns and rows [160, 320) of the full expert, its scales kept.
    const ExpertWeights half = make_expert(*spec, 2, 1, 2);
    const Fp8ExpertWeights& g = half.fp8.front();
    ASSERT_EQ(half.width, width / 2);
    for (int r = 0; r < h; ++r) {
      for (int c = 0; c < width / 2; ++c) {
        const auto i = static_cast<std::size_t>(r * width + c);  // half's row is `width` wide
        ASSERT_EQ(half.gate_up[i], gate_at(r, width / 2 + c));
        ASSERT_EQ(g.gate_up[i], f.gate_up[static_cast<std::size_t>(r * 2 * width + width / 2 + c)]);
        ASSERT_EQ(half.gate_up[i + static_cast<std::size_t>(width / 2)],
                  gate_at(r, width + width / 2 + c));
      }
    }
    for (int r = 0; r < width / 2; ++r) {
      for (int c = 0; c < h; ++c) {
        ASSERT_EQ(half.down[static_cast<std::size_t>(r * h + c)], down_at(width / 2 + r, c));
      }
    }
    EXPECT_EQ(g.down_scales, f.down_scales);
    if (channel) {
      EXPECT_EQ(g.gate_scales,
                std::vector<float>(f.gate_scales.begin() + width / 2, f.gate_scales.end()));
    } else {
      EXPECT_EQ(g.gate_scales, f.gate_scales);
      EXPECT_EQ(f.input_scale,
                calibrated_scale(make_input(*spec, kCalibrationToken, kCalibrationTokens)));
      EXPECT_GT(f.mid_scale, 0.0F);
      EXPECT_EQ(g.input_scale, f.input_scale);
      EXPECT_EQ(g.mid_scale, f.mid_scale);
    }
  }
}

TEST(Fp8Quant, UnsupportedFormatsAndSplitBlocksAreNamed) {
  auto m = models::load_model("qwen2-57b-a14b");
  ASSERT_TRUE(m.ok());
  auto spec = LayerSpec::from_model(*m, 8, DType::kBf16, 3);
  ASSERT_TRUE(spec.ok());
  {
    // int4 per output channel (a W4A16 without groups): no kernel.
    auto f = parse_weight_format("w4a16", DType::kBf16);
    ASSERT_TRUE(f.ok());
    f->group_size = 0;
    const Status st = apply_weight_format(*spec, *f);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().input, "weights");
    EXPECT_NE(st.error().message.find("has no CPU kernel"), std::string::npos)
        << st.error().message;
  }
  {
    // fp8 weights whose GEMMs would take unquantized activations (W8A16): no kernel.
    auto f = parse_weight_format("fp8-channel", DType::kBf16);
    ASSERT_TRUE(f.ok());
    f->activations = ActivationScheme::kPlain;
    const Status st = apply_weight_format(*spec, *f);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().input, "weights");
    EXPECT_NE(st.error().message.find("has no kernel yet (the CPU fp8 GEMMs take fp8"),
              std::string::npos)
        << st.error().message;
  }
  // W4A16 groups of 128 inputs do not divide the 1/8-width hidden size (448): no partial groups.
  auto w4 = parse_weight_format("w4a16", DType::kBf16);
  ASSERT_TRUE(w4.ok());
  const Status st = apply_weight_format(*spec, *w4);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().input, "weights");
  EXPECT_NE(st.error().message.find("do not divide hidden_size = 448"), std::string::npos)
      << st.error().message;
  auto f = parse_weight_format("fp8-block", DType::kBf16);
  ASSERT_TRUE(f.ok() && apply_weight_format(*spec, *f).ok());
  EXPECT_FALSE(weight_slice_violation(*spec, 1).has_value());  // 320 wide: a partial edge block
  const auto v = weight_slice_violation(*spec, 2);             // 160: a block split over 2 ranks
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("320 / 2 = 160"), std::string::npos);
}

}  // namespace
}  // namespace test_fp8
}  // namespace moeplan::kernels
