// Every CPU op against a naive reference on every storage dtype: dtype rounding, the router
// semantics of each model family, permute, the grouped expert FFN and the shared expert.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "kernels/backend.hpp"
#include "kernels/dtype_convert.hpp"
#include "kernels/reference.hpp"
#include "kernels/router_math.hpp"

namespace moeplan::kernels {
namespace test_ops {
namespace {

constexpr DType kDtypes[] = {DType::kFp32, DType::kBf16, DType::kFp16};

TEST(DtypeConvert, KnownBf16AndFp16Values) {
  EXPECT_EQ(f32_to_bf16(1.0F), 0x3f80);
  EXPECT_EQ(f32_to_f16(1.0F), 0x3c00);
  EXPECT_EQ(f32_to_f16(65504.0F), 0x7bff);               // largest finite fp16
  EXPECT_EQ(f32_to_f16(65520.0F), 0x7c00);               // rounds to infinity
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0F, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(-2.0F), 0xc000);
  // Ties go to even: 1 + 2^-8 lies halfway between bf16's 1 and 1 + 2^-7.
  EXPECT_EQ(round_to(DType::kBf16, 1.0F + std::ldexp(1.0F, -8)), 1.0F);
  EXPECT_EQ(round_to(DType::kBf16, 1.0F + 3.0F * std::ldexp(1.0F, -8)),
            1.0F + std::ldexp(1.0F, -6));
  EXPECT_EQ(round_to(DType::kFp16, 1.0F + std::ldexp(1.0F, -11)), 1.0F);
  EXPECT_TRUE(std::isnan(round_to(DType::kBf16, std::nanf(""))));
}

TEST(DtypeConvert, Fp16RoundTripsEveryFiniteValue) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    if ((h & 0x7c00U) == 0x7c00U) continue;  // inf and NaN
    ASSERT_EQ(f32_to_f16(f16_to_f32(h)), h) << std::hex << b;
  }
}

TEST(DtypeConvert, RoundsToNearestRepresentable) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-70000.0F, 70000.0F);
  for (int i = 0; i < 20000; ++i) {
    const float v = dist(rng) * std::ldexp(1.0F, static_cast<int>(rng() % 40) - 30);
    for (const DType t : {DType::kBf16, DType::kFp16}) {
      const float r = round_to(t, v);
      if (std::isinf(r)) continue;
      // The neighbours of r in t: no representable value is closer to v.
      const double ulp = 2.0 * unit_roundoff(t) *
                         std::max(std::fabs(static_cast<double>(r)),
                                  t == DType::kFp16 ? std::ldexp(1.0, -14) : 1e-38);
      ASSERT_LE(std::fabs(static_cast<double>(r) - v), 0.5 * ulp * 1.0000001) << v;
    }
  }
  // Packing is lossless for values already in the dtype.
  std::vector<float> vals = {0.5F, -3.25F, 1024.0F, 0.0F};
  for (const DType t : kDtypes) {
    std::vector<std::uint8_t> bytes(storage_bytes(t, vals.size()));
    pack(t, vals.data(), vals.size(), bytes.data());
    std::vector<float> back(vals.size());
    unpack(t, bytes.data(), vals.size(), back.data());
    EXPECT_EQ(back, vals);
  }
}

// ---- router ---------------------------------------------------------------------------------

struct NaiveRoute {
  std::vector<int> ids;
  std::vector<double> weights;
};

// The router as the HF modeling code reads, in double, with sorting for the top-k.
NaiveRoute naive_route(const models::RouterSpec& r, const std::vector<float>& logits,
                       const std::vector<float>& bias, int k) {
  const int n = static_cast<int>(logits.size());
  std::vector<double> scores(static_cast<std::size_t>(n));
  if (r.scoring == models::ScoringFunc::kSoftmax) {
    const double mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0.0;
    for (int e = 0; e < n; ++e)
      sum += scores[static_cast<std::size_t>(e)] =
          std::exp(logits[static_cast<std::size_t>(e)] - mx);
    for (auto& s : scores) s /= sum;
  } else {
    for (int e = 0; e < n; ++e)
      scores[static_cast<std::size_t>(e)] =
          1.0 / (1.0 + std::exp(-static_cast<double>(logits[static_cast<std::size_t>(e)])));
  }
  std::vector<double> choice = scores;
  if (r.topk_method == models::TopkMethod::kNoauxTc) {
    for (int e = 0; e < n; ++e)
      choice[static_cast<std::size_t>(e)] += bias[static_cast<std::size_t>(e)];
  }
  if (r.topk_method != models::TopkMethod::kGreedy && r.num_groups > 1) {
    const int per = n / r.num_groups;
    std::vector<std::pair<double, int>> groups;
    for (int g = 0; g < r.num_groups; ++g) {
      std::vector<double> members(choice.begin() + g * per, choice.begin() + (g + 1) * per);
      std::sort(members.rbegin(), members.rend());
      const double score =
          r.topk_method == models::TopkMethod::kNoauxTc ? members[0] + members[1] : members[0];
      groups.emplace_back(-score, g);
    }
    std::sort(groups.begin(), groups.end());
    std::vector<bool> keep(static_cast<std::size_t>(r.num_groups), false);
    for (int i = 0; i < r.topk_groups; ++i)
      keep[static_cast<std::size_t>(groups[static_cast<std::size_t>(i)].second)] = true;
    for (int e = 0; e < n; ++e) {
      if (!keep[static_cast<std::size_t>(e / per)]) choice[static_cast<std::size_t>(e)] = -1e300;
    }
  }
  std::vector<int> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return choice[static_cast<std::size_t>(a)] > choice[static_cast<std::size_t>(b)];
  });
  NaiveRoute out;
  double sum = 0.0;
  for (int j = 0; j < k; ++j) {
    out.ids.push_back(order[static_cast<std::size_t>(j)]);
    out.weights.push_back(scores[static_cast<std::size_t>(order[static_cast<std::size_t>(j)])]);
    sum += out.weights.back();
  }
  const bool norm = r.norm_topk_prob && k > 1;
  for (auto& w : out.weights) {
    if (norm) w /= sum;
    if (!norm || r.scale_after_norm) w *= r.routed_scaling_factor;
  }
  return out;
}

struct RouterCase {
  const char* name;
  models::RouterSpec spec;
  int experts;
  int k;
};

std::vector<RouterCase> router_cases() {
  models::RouterSpec qwen2;  // softmax, greedy, no renorm
  models::RouterSpec qwen3 = qwen2;
  qwen3.norm_topk_prob = true;
  models::RouterSpec v2 = qwen2;
  v2.topk_method = models::TopkMethod::kGroupLimitedGreedy;
  v2.num_groups = 8;
  v2.topk_groups = 3;
  v2.routed_scaling_factor = 16.0;
  v2.scale_after_norm = false;
  models::RouterSpec v2norm = v2;
  v2norm.norm_topk_prob = true;  // V2 then skips the scaling
  models::RouterSpec v3;
  v3.scoring = models::ScoringFunc::kSigmoid;
  v3.topk_method = models::TopkMethod::kNoauxTc;
  v3.num_groups = 8;
  v3.topk_groups = 4;
  v3.norm_topk_prob = true;
  v3.routed_scaling_factor = 2.5;
  v3.has_score_correction_bias = true;
  return {{"qwen2", qwen2, 64, 8},
          {"qwen3", qwen3, 128, 8},
          {"mixtral", qwen3, 8, 2},
          {"deepseek_v2", v2, 160, 6},
          {"deepseek_v2_norm", v2norm, 160, 6},
          {"deepseek_v3", v3, 256, 8}};
}

TEST(Router, MatchesNaiveRouterForEveryFamily) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0F, 2.0F);
  std::uniform_real_distribution<float> bdist(-0.1F, 0.1F);
  for (const auto& c : router_cases()) {
    SCOPED_TRACE(c.name);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> logits(static_cast<std::size_t>(c.experts)), bias(logits.size());
      for (auto& l : logits) l = dist(rng);
      for (auto& b : bias) b = bdist(rng);
      std::vector<int> ids(static_cast<std::size_t>(c.k));
      std::vector<float> w(ids.size());
      route_token(c.spec, logits, bias, c.k, ids, w);
      const NaiveRoute ref = naive_route(c.spec, logits, bias, c.k);
      ASSERT_EQ(ids, ref.ids);
      for (int j = 0; j < c.k; ++j) {
        // fp32 softmax/sigmoid and a k-term renormalisation: a few fp32 ulps.
        EXPECT_NEAR(w[static_cast<std::size_t>(j)], ref.weights[static_cast<std::size_t>(j)],
                    1e-5 * std::fabs(ref.weights[static_cast<std::size_t>(j)]) + 1e-7);
      }
    }
  }
}

TEST(Router, NoauxTcHandComputed) {
  // 8 experts in 4 groups of 2; keep 2 groups; top-2. Logits 0 → sigmoid 0.5 everywhere; the
  // bias alone decides: groups {0,1}: 0.1+0.0, {2,3}: 0.3+0.2, {4,5}: 0.0+0.0, {6,7}: 0.25+0.3.
  models::RouterSpec r;
  r.scoring = models::ScoringFunc::kSigmoid;
  r.topk_method = models::TopkMethod::kNoauxTc;
  r.num_groups = 4;
  r.topk_groups = 2;
  r.norm_topk_prob = true;
  r.routed_scaling_factor = 2.5;
  const std::vector<float> logits(8, 0.0F);
  const std::vector<float> bias = {0.1F, 0.0F, 0.3F, 0.2F, 0.0F, 0.0F, 0.25F, 0.3F};
  std::vector<int> ids(2);
  std::vector<float> w(2);
  route_token(r, logits, bias, 2, ids, w);
  // Groups 1 (0.5) and 3 (0.55) survive; experts 2 (0.8) and 7 (0.8): tie → lower index first.
  EXPECT_EQ(ids, (std::vector<int>{2, 7}));
  // Weights are the unbiased scores (0.5 each), renormalised (0.5), scaled by 2.5.
  EXPECT_FLOAT_EQ(w[0], 1.25F);
  EXPECT_FLOAT_EQ(w[1], 1.25F);
}

TEST(Router, BackendLogitsIndependentOfBatch) {
  auto be = make_cpu_backend();
  const int h = 96;
  const int e = 16;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
  std::vector<float> x(static_cast<std::size_t>(37 * h)), w(static_cast<std::size_t>(h * e));
  for (auto& v : x) v = dist(rng);
  for (auto& v : w) v = dist(rng);
  std::vector<float> all(37 * static_cast<std::size_t>(e)), one(static_cast<std::size_t>(e));
  be->router_logits(OpContext{}, x, 37, h, w, e, all);
  for (int t = 0; t < 37; ++t) {
    be->router_logits(OpContext{},
                      std::span<const float>(x).subspan(static_cast<std::size_t>(t * h),
                                                        static_cast<std::size_t>(h)),
                      1, h, w, e, one);
    for (int j = 0; j < e; ++j) {
      ASSERT_EQ(one[static_cast<std::size_t>(j)],
                all[static_cast<std::size_t>(t * e + j)]);  // bit-identical
      double naive = 0.0;
      for (int i = 0; i < h; ++i)
        naive += static_cast<double>(x[static_cast<std::size_t>(t * h + i)]) *
                 w[static_cast<std::size_t>(i * e + j)];
      EXPECT_NEAR(one[static_cast<std::size_t>(j)], naive, 2.0 * h * std::ldexp(1.0, -24) * h);
    }
  }
}

// ---- permute, grouped FFN, shared expert ------------------------------------------------------

TEST(Permute, SortsPairsByLocalExpertStably) {
  auto be = make_cpu_backend();
  const std::vector<int> pairs = {5, 2, 3, 5, 9, 2, 4, 3};
  const Permutation p = be->permute(OpContext{}, pairs, 2, 4);  // experts 2..5
  EXPECT_EQ(p.offsets, (std::vector<int>{0, 2, 4, 5, 7}));
  EXPECT_EQ(p.order, (std::vector<int>{1, 5, 2, 7, 6, 0, 3}));
}

LayerSpec small_spec(DType dtype) {
  LayerSpec s;
  s.hidden = 48;
  s.intermediate = 40;
  s.num_experts = 4;
  s.top_k = 2;
  s.shared_intermediate = 24;
  s.shared_gated = true;
  s.dtype = dtype;
  s.seed = 99;
  return s;
}

TEST(Combine, WeightedSumInSlotOrderThenSharedThenOneRounding) {
  auto be = make_cpu_backend();
  // Two tokens, k = 2, hidden 2; token 0 reads rows 2 and 0, token 1 rows 1 and 3.
  const std::vector<float> y = {1.0F, 2.0F, 0.5F, -1.0F, 4.0F, 8.0F, 1.0F, 1.0F};
  const std::vector<int> pair_row = {2, 0, 1, 3};
  const std::vector<float> w = {0.25F, 0.5F, 1.0F, 2.0F};
  const std::vector<float> shared = {0.0F, 1.0F, 0.00390625F, 0.0F};
  std::vector<float> out(4);
  be->combine(OpContext{}, y, pair_row, w, {}, 2, 2, 2, DType::kFp32, out);
  EXPECT_EQ(out, (std::vector<float>{0.25F * 4 + 0.5F * 1, 0.25F * 8 + 0.5F * 2, 0.5F + 2.0F,
                                     -1.0F + 2.0F}));
  be->combine(OpContext{}, y, pair_row, w, shared, 2, 2, 2, DType::kFp32, out);
  EXPECT_EQ(out[1], 4.0F);
  EXPECT_EQ(out[2], 2.5F + 0.00390625F);
  // bf16 (8 significant bits): 2.50390625 lies between 2.5 and 2.515625 and rounds to 2.5.
  be->combine(OpContext{}, y, pair_row, w, shared, 2, 2, 2, DType::kBf16, out);
  EXPECT_EQ(out[2], 2.5F);
  EXPECT_EQ(out[1], 4.0F);
}

// The ops the profiler times one by one are the expert MLP's own pieces: gate/up GEMM, SiLU·mul
// and down GEMM through Backend::gemm/silu_mul reproduce expert_ffn bit for bit.
TEST(BackendOps, GemmAndSiluMulComposeTheExpertMlpExactly) {
  auto be = make_cpu_backend();
  for (const DType dt : kDtypes) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const LayerSpec s = small_spec(dt);
    const ExpertWeights w = make_expert(s, 1, 0, 1);
    const int m = 9;
    const std::vector<float> x = make_input(s, 0, m);
    const std::vector<int> offsets = {0, m};
    std::vector<float> ffn(x.size());
    be->expert_ffn(OpContext{}, x, offsets, std::span<const ExpertWeights>(&w, 1), s.hidden, dt,
                   ffn);
    std::vector<float> gu(static_cast<std::size_t>(m * 2 * w.width));
    be->gemm(OpContext{}, x, m, s.hidden, w.gate_up, 2 * w.width, dt, DType::kFp32, gu);
    std::vector<float> act(static_cast<std::size_t>(m * w.width));
    be->silu_mul(OpContext{}, gu, m, w.width, dt, act);
    std::vector<float> down(x.size());
    be->gemm(OpContext{}, act, m, w.width, w.down, s.hidden, dt, DType::kFp32, down);
    EXPECT_EQ(down, ffn);
    // Stored in the dtype: the fp32 result rounded once.
    std::vector<float> stored(x.size());
    be->gemm(OpContext{}, act, m, w.width, w.down, s.hidden, dt, dt, stored);
    round_to(dt, down);
    EXPECT_EQ(stored, down);
  }
  EXPECT_FALSE(be->can_implement({BackendOp::kGemm, DType::kFp8}).ok());
  EXPECT_TRUE(be->can_implement({BackendOp::kRoute, DType::kFp8}).ok());
  EXPECT_TRUE(be->can_implement({BackendOp::kCombine, DType::kBf16}).ok());
}

TEST(ExpertFfn, GroupedMatchesPerExpertReferenceOnEveryDtype) {
  auto be = make_cpu_backend();
  for (const DType dt : kDtypes) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const LayerSpec s = small_spec(dt);
    std::vector<ExpertWeights> experts;
    for (int e = 0; e < 3; ++e) experts.push_back(make_expert(s, e, 1, 2));  // a tp-slice
    const std::vector<int> offsets = {0, 5, 5, 12};  // expert 1 gets no rows
    const std::vector<float> rows = make_input(s, 0, 12);
    bool nonzero = false;
    for (const float v : rows) nonzero = nonzero || v != 0.0F;
    ASSERT_TRUE(nonzero);
    std::vector<float> out(rows.size(), -1.0F);
    be->expert_ffn(OpContext{}, rows, offsets, experts, s.hidden, dt, out);
    round_to(dt, out);
    for (int j = 0; j < 3; ++j) {
      const int m = offsets[static_cast<std::size_t>(j) + 1] - offsets[static_cast<std::size_t>(j)];
      if (m == 0) continue;
      const auto base = static_cast<std::size_t>(offsets[static_cast<std::size_t>(j)] * s.hidden);
      const MlpReference ref = mlp_reference(
          std::span<const float>(rows).subspan(base, static_cast<std::size_t>(m * s.hidden)), m,
          s.hidden, experts[static_cast<std::size_t>(j)], dt);
      for (std::size_t i = 0; i < ref.y.size(); ++i) {
        ASSERT_LE(std::fabs(out[base + i] - ref.y[i]), ref.bound[i])
            << "expert " << j << " i " << i;
      }
    }
  }
}

TEST(ExpertFfn, ReferenceMlpMatchesNaiveDoubleLoop) {
  const LayerSpec s = small_spec(DType::kFp32);
  const ExpertWeights w = make_expert(s, 2, 0, 1);
  const std::vector<float> x = make_input(s, 3, 4);
  const MlpReference ref = mlp_reference(x, 4, s.hidden, w, DType::kFp32);
  for (int r = 0; r < 4; ++r) {
    std::vector<double> act(static_cast<std::size_t>(w.width));
    for (int c = 0; c < w.width; ++c) {
      double g = 0.0;
      double u = 0.0;
      for (int i = 0; i < s.hidden; ++i) {
        const double xv = x[static_cast<std::size_t>(r * s.hidden + i)];
        g += xv * w.gate_up[static_cast<std::size_t>(i * 2 * w.width + c)];
        u += xv * w.gate_up[static_cast<std::size_t>(i * 2 * w.width + w.width + c)];
      }
      act[static_cast<std::size_t>(c)] = g / (1.0 + std::exp(-g)) * u;
    }
    for (int h = 0; h < s.hidden; ++h) {
      double y = 0.0;
      for (int c = 0; c < w.width; ++c)
        y += act[static_cast<std::size_t>(c)] * w.down[static_cast<std::size_t>(c * s.hidden + h)];
      const std::size_t i = static_cast<std::size_t>(r * s.hidden + h);
      EXPECT_LE(std::fabs(ref.y[i] - y), ref.bound[i]);
      EXPECT_GT(ref.bound[i], 0.0);
    }
  }
}

TEST(SharedExpert, GatedMatchesReferenceOnEveryDtype) {
  auto be = make_cpu_backend();
  for (const DType dt : kDtypes) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const LayerSpec s = small_spec(dt);
    const ExpertWeights w = make_shared_expert(s, 0, 1);
    const std::vector<float> gate = make_shared_gate(s);
    ASSERT_EQ(gate.size(), static_cast<std::size_t>(s.hidden));
    const int t = 9;
    const std::vector<float> x = make_input(s, 0, t);
    std::vector<float> out(x.size());
    be->shared_expert(OpContext{}, x, t, s.hidden, w, gate, dt, out);
    round_to(dt, out);
    std::vector<float> scale(static_cast<std::size_t>(t));
    std::vector<double> scale_delta(static_cast<std::size_t>(t));
    for (int r = 0; r < t; ++r) {
      double z = 0.0;
      double mz = 0.0;
      for (int i = 0; i < s.hidden; ++i) {
        z += static_cast<double>(x[static_cast<std::size_t>(r * s.hidden + i)]) *
             gate[static_cast<std::size_t>(i)];
        mz += std::fabs(static_cast<double>(x[static_cast<std::size_t>(r * s.hidden + i)]) *
                        gate[static_cast<std::size_t>(i)]);
      }
      scale[static_cast<std::size_t>(r)] = static_cast<float>(1.0 / (1.0 + std::exp(-z)));
      scale_delta[static_cast<std::size_t>(r)] =
          0.25 * 2.0 * s.hidden * std::ldexp(1.0, -24) * mz + 1e-7;
    }
    const MlpReference ref = mlp_reference(x, t, s.hidden, w, dt, scale, scale_delta);
    for (std::size_t i = 0; i < ref.y.size(); ++i)
      ASSERT_LE(std::fabs(out[i] - ref.y[i]), ref.bound[i]) << i;
  }
}

}  // namespace
}  // namespace test_ops
}  // namespace moeplan::kernels
