// The attention core of the CPU backend against its double-precision reference and the bound a
// correct kernel stays within, on MHA, GQA and MLA-absorbed shapes, prefill and decode, every
// storage dtype; small cases worked by hand; the bound is tight enough to catch a kernel that
// drops the causal mask or the scale.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/backend.hpp"
#include "kernels/dtype_convert.hpp"

namespace moeplan::kernels {
namespace test_attention {
namespace {

constexpr DType kDtypes[] = {DType::kFp32, DType::kBf16, DType::kFp16};

std::vector<float> values(std::size_t n, unsigned seed, DType dtype, float lo = -1.0F,
                          float hi = 1.0F) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = round_to(dtype, dist(rng));
  return v;
}

struct Inputs {
  std::vector<float> q, k, v;
};

// MLA absorbed: V is the first v_dim values of each latent key (`v_from_k`).
Inputs make_inputs(const AttentionShape& s, DType dtype, unsigned seed, bool v_from_k = false) {
  Inputs in;
  in.q = values(s.q_size(), seed, dtype);
  in.k = values(s.k_size(), seed + 1, dtype);
  if (v_from_k) {
    in.v.resize(s.v_size());
    const auto rows = static_cast<std::size_t>(s.kv_rows() * s.kv_heads);
    const auto vd = static_cast<std::size_t>(s.v_dim), kd = static_cast<std::size_t>(s.qk_dim);
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t c = 0; c < vd; ++c) in.v[r * vd + c] = in.k[r * kd + c];
    }
  } else {
    in.v = values(s.v_size(), seed + 2, dtype);
  }
  return in;
}

// The largest |got − ref| / bound over the output (≤ 1: within the bound).
double bound_use(const std::vector<float>& got, const AttentionReference& ref) {
  double worst = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - ref.out[i]) / ref.bound[i]);
  }
  return worst;
}

std::vector<float> run_cpu(const AttentionShape& s, const Inputs& in, DType dtype) {
  auto be = make_cpu_backend();
  std::vector<float> out(s.out_size(), std::nanf(""));
  be->attention(OpContext{}, s, in.q, in.k, in.v, dtype, out);
  return out;
}

struct Case {
  const char* name;
  AttentionShape shape;
  bool v_from_k = false;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  // MHA prefill: two prompts of 37 tokens.
  c.push_back({"mha_prefill", {2, 37, 37, 4, 4, 32, 32, 1.0F / std::sqrt(32.0F)}});
  // GQA prefill, 7 heads per K/V head (Qwen2-57B's ratio): tiles of 36 tokens.
  c.push_back({"gqa_prefill", {1, 100, 100, 28, 4, 16, 16, 0.25F}});
  // GQA decode over 300 cached keys (more than one key tile of the GPU kernel).
  c.push_back({"gqa_decode", {3, 1, 300, 8, 2, 64, 64, 0.125F}});
  // A chunk of 5 new tokens after 15 cached ones (chunked prefill).
  c.push_back({"gqa_chunk", {2, 5, 20, 6, 3, 24, 24, 0.2F}});
  // MLA absorbed decode: 16 heads over one latent of 64 + 8 rope values, V its first 64.
  c.push_back({"mla_decode", {2, 1, 130, 16, 1, 72, 64, 1.0F / std::sqrt(24.0F)}, true});
  // MLA prefill (expanded): head dims 24 (q·k) and 16 (v).
  c.push_back({"mla_prefill", {1, 33, 33, 4, 4, 24, 16, 1.0F / std::sqrt(24.0F)}});
  return c;
}

TEST(Attention, CpuMatchesTheReferenceWithinItsBound) {
  for (const Case& c : cases()) {
    for (const DType dt : kDtypes) {
      SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(dt)));
      ASSERT_EQ(c.shape.problem(), "");
      const Inputs in = make_inputs(c.shape, dt, 11, c.v_from_k);
      const auto got = run_cpu(c.shape, in, dt);
      const auto ref = attention_reference(c.shape, in.q, in.k, in.v, dt);
      EXPECT_LE(bound_use(got, ref), 1.0);
    }
  }
}

TEST(Attention, WorkedByHand) {
  // One head, one dimension, two tokens: the first sees only itself, the second both keys.
  const AttentionShape s{1, 2, 2, 1, 1, 1, 1, 1.0F};
  const Inputs in{{1.0F, 2.0F}, {0.5F, -1.0F}, {3.0F, 5.0F}};
  const auto out = run_cpu(s, in, DType::kFp32);
  EXPECT_EQ(out[0], 3.0F);
  // Scores of token 1: 2·0.5 = 1 and 2·(−1) = −2: weights e^1 and e^−2.
  const double w0 = std::exp(1.0) / (std::exp(1.0) + std::exp(-2.0));
  EXPECT_NEAR(out[1], w0 * 3.0 + (1.0 - w0) * 5.0, 1e-6);
  // Decode of the same second token over both cached keys: the same answer.
  const AttentionShape d{1, 1, 2, 1, 1, 1, 1, 1.0F};
  const auto dec = run_cpu(d, Inputs{{2.0F}, in.k, in.v}, DType::kFp32);
  EXPECT_EQ(dec[0], out[1]);
}

TEST(Attention, GroupsShareTheirKvHead) {
  // Four query heads over two K/V heads: heads 0, 1 read K/V head 0 and heads 2, 3 K/V head 1.
  // With equal queries, heads of one group give equal outputs and the groups differ.
  const AttentionShape s{1, 1, 9, 4, 2, 8, 8, 0.5F};
  Inputs in = make_inputs(s, DType::kFp32, 5);
  for (std::size_t h = 1; h < 4; ++h) {
    for (std::size_t i = 0; i < 8; ++i) in.q[h * 8 + i] = in.q[i];
  }
  const auto out = run_cpu(s, in, DType::kFp32);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(out[static_cast<std::size_t>(i)], out[8 + static_cast<std::size_t>(i)]);
    EXPECT_EQ(out[16 + static_cast<std::size_t>(i)], out[24 + static_cast<std::size_t>(i)]);
  }
  EXPECT_NE(out[0], out[16]);
}

TEST(Attention, TheBoundCatchesAMissingMaskOrScale) {
  const AttentionShape s{1, 24, 24, 2, 2, 16, 16, 0.25F};
  for (const DType dt : kDtypes) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const Inputs in = make_inputs(s, dt, 3);
    const auto ref = attention_reference(s, in.q, in.k, in.v, dt);
    // No causal mask: every token attends to all 24 keys (a decode shape per token would).
    AttentionShape scaled = s;
    scaled.scale = 0.5F;
    EXPECT_GT(bound_use(run_cpu(scaled, in, dt), ref), 1.0);
    std::vector<float> unmasked(s.out_size());
    const AttentionShape one{1, 1, 24, 2, 2, 16, 16, 0.25F};
    auto be = make_cpu_backend();
    for (int t = 0; t < 24; ++t) {
      const std::span<const float> qt(in.q.data() + static_cast<std::size_t>(t) * 32, 32);
      be->attention(OpContext{}, one, qt, in.k, in.v, dt,
                    std::span<float>(unmasked.data() + static_cast<std::size_t>(t) * 32, 32));
    }
    EXPECT_GT(bound_use(unmasked, ref), 1.0);
  }
}

TEST(Attention, ShapeProblemsAreNamed) {
  EXPECT_NE((AttentionShape{1, 1, 1, 0, 1, 1, 1, 1.0F}.problem()), "");
  EXPECT_EQ((AttentionShape{1, 5, 4, 2, 2, 8, 8, 1.0F}.problem()),
            "q_len 5 exceeds kv_len 4 (the new tokens are among the keys)");
  EXPECT_EQ((AttentionShape{1, 1, 4, 6, 4, 8, 8, 1.0F}.problem()),
            "heads 6 not a multiple of kv_heads 4");
  EXPECT_NE((AttentionShape{1, 1, 4, 4, 4, 8, 8, 0.0F}.problem()), "");
}

TEST(Attention, PairsAndFlopsCountTheVisibleKeys) {
  // Prefill of 4 tokens: 1 + 2 + 3 + 4 pairs per head; decode of 1 token over 10 keys: 10.
  EXPECT_EQ((AttentionShape{1, 4, 4, 3, 3, 8, 4, 1.0F}.pairs()), 3.0 * 10.0);
  EXPECT_EQ((AttentionShape{5, 1, 10, 2, 1, 8, 4, 1.0F}.pairs()), 5.0 * 2.0 * 10.0);
  EXPECT_EQ((AttentionShape{5, 1, 10, 2, 1, 8, 4, 1.0F}.flops()), 2.0 * 12.0 * 100.0);
  // A chunk of 2 tokens after 3 cached: 4 + 5.
  EXPECT_EQ((AttentionShape{1, 2, 5, 1, 1, 8, 4, 1.0F}.pairs()), 9.0);
}

}  // namespace
}  // namespace test_attention
}  // namespace moeplan::kernels
