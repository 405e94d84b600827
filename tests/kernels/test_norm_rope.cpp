// RMSNorm and RoPE of the CPU backend against their double-precision references and derived
// bounds, every storage dtype; cases worked by hand; the bounds catch a kernel that forgets the
// epsilon's place, the weight, or rotates by the wrong position.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/dtype_convert.hpp"
#include "kernels/norm_rope.hpp"

namespace moeplan::kernels {
namespace test_norm_rope {
namespace {

constexpr DType kDtypes[] = {DType::kFp32, DType::kBf16, DType::kFp16};

std::vector<float> values(std::size_t n, unsigned seed, DType dtype, float lo = -2.0F,
                          float hi = 2.0F) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = round_to(dtype, dist(rng));
  return v;
}

std::size_t zu(int v) { return static_cast<std::size_t>(v); }

TEST(RmsNorm, WithinTheReferenceBound) {
  const auto cpu = make_cpu_backend();
  for (const int width : {1, 7, 128, 2048, 7168}) {
    for (const DType dt : kDtypes) {
      SCOPED_TRACE("width " + std::to_string(width) + " " + std::string(dtype_name(dt)));
      const int rows = 5;
      const auto x = values(zu(rows) * zu(width), 3, dt);
      const auto w = values(zu(width), 4, DType::kFp32, 0.5F, 1.5F);
      std::vector<float> out(x.size(), std::nanf(""));
      cpu->rms_norm({}, x, rows, width, width, w, 1e-6F, dt, out);
      const auto ref = rms_norm_reference(x, rows, width, w, 1e-6F, dt);
      for (std::size_t i = 0; i < out.size(); ++i) {
        ASSERT_LE(std::abs(out[i] - ref.out[i]), ref.bound[i]) << "element " << i;
        ASSERT_EQ(out[i], round_to(dt, out[i])) << "stored in the dtype, element " << i;
      }
    }
  }
}

TEST(RmsNorm, ReadsStridedRowsAndWritesThemContiguous) {
  // MLA's latent norm: the first kv_lora_rank = 512 values of each kv_a row of 512 + 64; the
  // rope part after them must be neither read into the sum nor written.
  const auto cpu = make_cpu_backend();
  const int rows = 6, width = 512, ld = 576;
  for (const DType dt : kDtypes) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    auto x = values(zu(rows) * zu(ld), 7, dt);
    for (int r = 0; r < rows; ++r) {
      for (int c = width; c < ld; ++c) x[zu(r) * zu(ld) + zu(c)] = 1e6F;  // poison the tail
    }
    const auto w = values(zu(width), 8, DType::kFp32, 0.5F, 1.5F);
    std::vector<float> out(zu(rows) * zu(width), std::nanf(""));
    cpu->rms_norm({}, x, rows, width, ld, w, 1e-6F, dt, out);
    for (int r = 0; r < rows; ++r) {
      const auto row = std::span<const float>(x).subspan(zu(r) * zu(ld), zu(width));
      const auto ref = rms_norm_reference(row, 1, width, w, 1e-6F, dt);
      for (int c = 0; c < width; ++c) {
        ASSERT_LE(std::abs(out[zu(r) * zu(width) + zu(c)] - ref.out[zu(c)]), ref.bound[zu(c)])
            << "row " << r << " value " << c;
      }
    }
  }
}

TEST(RmsNorm, HandWorked) {
  // x = (3, 4): mean of squares 12.5, eps 0.5 → 1/√13; weights (1, 2).
  const std::vector<float> x = {3.0F, 4.0F}, w = {1.0F, 2.0F};
  std::vector<float> out(2);
  rms_norm_cpu(x, 1, 2, 2, w, 0.5F, DType::kFp32, out);
  EXPECT_NEAR(out[0], 3.0 / std::sqrt(13.0), 1e-6);
  EXPECT_NEAR(out[1], 8.0 / std::sqrt(13.0), 1e-6);
}

TEST(RmsNorm, BoundCatchesAMissingWeightOrEpsilon) {
  const int rows = 4, width = 256;
  const auto x = values(zu(rows) * zu(width), 5, DType::kBf16, -0.01F, 0.01F);
  const auto w = values(zu(width), 6, DType::kFp32, 0.5F, 1.5F);
  const std::vector<float> ones(zu(width), 1.0F);
  const float eps = 1e-4F;  // comparable with the tiny inputs' mean square
  const auto ref = rms_norm_reference(x, rows, width, w, eps, DType::kBf16);
  auto any_outside = [&](const std::vector<float>& out) {
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (std::abs(out[i] - ref.out[i]) > ref.bound[i]) return true;
    }
    return false;
  };
  std::vector<float> no_weight(x.size()), no_eps(x.size());
  rms_norm_cpu(x, rows, width, width, ones, eps, DType::kBf16, no_weight);
  rms_norm_cpu(x, rows, width, width, w, 0.0F, DType::kBf16, no_eps);
  EXPECT_TRUE(any_outside(no_weight));
  EXPECT_TRUE(any_outside(no_eps));
}

TEST(Rope, CacheHoldsTheAnglesOfEachPosition) {
  const auto cs = rope_cos_sin_cache(3, 4, 10000.0);
  ASSERT_EQ(cs.size(), 12U);
  // Position 2: θ_0 = 1, θ_1 = 10000^(−1/2) = 0.01.
  EXPECT_FLOAT_EQ(cs[8], static_cast<float>(std::cos(2.0)));
  EXPECT_FLOAT_EQ(cs[9], static_cast<float>(std::cos(0.02)));
  EXPECT_FLOAT_EQ(cs[10], static_cast<float>(std::sin(2.0)));
  EXPECT_FLOAT_EQ(cs[11], static_cast<float>(std::sin(0.02)));
  EXPECT_FLOAT_EQ(cs[0], 1.0F);  // position 0 does not rotate
  EXPECT_FLOAT_EQ(cs[2], 0.0F);
}

TEST(Rope, HandWorkedRotationAndCopy) {
  // One head of 6 values, rot_dim 4: pairs (0, 2) and (1, 3) rotate, 4 and 5 are copied.
  const auto cs = rope_cos_sin_cache(2, 4, 10000.0);
  const std::vector<float> in = {1.0F, 2.0F, 3.0F, 4.0F, 5.0F, 6.0F};
  const std::vector<int> pos = {1};
  std::vector<float> out(6);
  rope_cpu(in, 6, 1, 1, 6, 4, pos, cs, DType::kFp32, out);
  const double c0 = std::cos(1.0), s0 = std::sin(1.0), c1 = std::cos(0.01), s1 = std::sin(0.01);
  EXPECT_NEAR(out[0], 1.0 * c0 - 3.0 * s0, 1e-6);
  EXPECT_NEAR(out[2], 3.0 * c0 + 1.0 * s0, 1e-6);
  EXPECT_NEAR(out[1], 2.0 * c1 - 4.0 * s1, 1e-6);
  EXPECT_NEAR(out[3], 4.0 * c1 + 2.0 * s1, 1e-6);
  EXPECT_EQ(out[4], 5.0F);
  EXPECT_EQ(out[5], 6.0F);
}

TEST(Rope, StridedInputWithinTheReferenceBound) {
  // The k part of a fused q/k/v row: 3 rows, 2 heads of 128 (rot 128) or 192 with a 64-wide
  // rope part (MLA's layout: rot_dim < head_dim), read with the fused row's stride.
  const auto cs = rope_cos_sin_cache(4096, 128, 1e6);
  const auto cs64 = rope_cos_sin_cache(4096, 64, 1e4);
  struct Case {
    int heads, head_dim, rot_dim, ld;
    const std::vector<float>* cache;
  };
  for (const Case c : {Case{2, 128, 128, 640, &cs}, Case{3, 192, 64, 600, &cs64}}) {
    for (const DType dt : kDtypes) {
      SCOPED_TRACE(std::to_string(c.head_dim) + " " + std::string(dtype_name(dt)));
      const int rows = 3;
      const auto in = values(zu(rows) * zu(c.ld), 7, dt);
      const std::vector<int> pos = {0, 17, 4095};
      std::vector<float> out(zu(rows) * zu(c.heads) * zu(c.head_dim), std::nanf(""));
      make_cpu_backend()->rope({}, in, c.ld, rows, c.heads, c.head_dim, c.rot_dim, pos, *c.cache,
                               dt, out);
      const auto ref =
          rope_reference(in, c.ld, rows, c.heads, c.head_dim, c.rot_dim, pos, *c.cache, dt);
      for (std::size_t i = 0; i < out.size(); ++i) {
        ASSERT_LE(std::abs(out[i] - ref.out[i]), ref.bound[i]) << "element " << i;
      }
      // A kernel rotating by the wrong position leaves the bound.
      std::vector<int> wrong = pos;
      wrong[1] = 18;
      std::vector<float> bad(out.size());
      rope_cpu(in, c.ld, rows, c.heads, c.head_dim, c.rot_dim, wrong, *c.cache, dt, bad);
      bool outside = false;
      for (std::size_t i = 0; i < bad.size(); ++i) {
        outside = outside || std::abs(bad[i] - ref.out[i]) > ref.bound[i];
      }
      EXPECT_TRUE(outside);
    }
  }
}

}  // namespace
}  // namespace test_norm_rope
}  // namespace moeplan::kernels
