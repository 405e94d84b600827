// RooflineCosts and the per-layer cost model: efficiency curve, dispatcher traffic, padding,
// skew, memory, step totals and cost-source attribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "models/registry.hpp"
#include "planner/costs/cost_model.hpp"
#include "planner/costs/roofline_costs.hpp"
#include "planner/plan.hpp"
#include "tests/planner/roofline_recorder.hpp"

namespace moeplan::planner {
namespace test_cost_model {
namespace {

struct Fixture {
  models::MoeModel model;
  Cluster cluster;
};

Fixture load(const std::string& model, const std::string& cluster) {
  auto m = models::load_model(model);
  auto c = load_cluster(cluster);
  EXPECT_TRUE(m.ok() && c.ok());
  return {std::move(m).value(), std::move(c).value()};
}

Layout layout(int ep, int tp, Dispatcher d, RankMapping m = RankMapping::kTpInnermost) {
  Layout l;
  l.num_gpus = ep * tp;
  l.ep_size = ep;
  l.tp_size = tp;
  l.dispatcher = d;
  l.mapping = m;
  return l;
}

LayoutCost cost(const Fixture& f, const CostSource& cs, const Layout& l, int tokens,
                const ExpertLoad& load, Phase phase = Phase::kPrefill) {
  const CostContext ctx{f.model, f.cluster, cs, {phase, tokens}, load, nullptr};
  auto c = cost_layout(ctx, l);
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message);
  return std::move(c).value();
}

/// One hot expert: expert 0 gets `hot` times the load of each other expert.
ExpertLoad hot_expert(int experts, double hot) {
  ExpertLoad l = ExpertLoad::uniform(1, experts);
  l.source = "hot";
  l.counts[0][0] = hot;
  return l;
}

TEST(Roofline, EfficiencyCurve) {
  EXPECT_EQ(gemm_efficiency(0.0), 0.0);
  EXPECT_DOUBLE_EQ(gemm_efficiency(64.0), kMaxGemmEfficiency / 2.0);
  EXPECT_GT(gemm_efficiency(4096.0), 0.98 * kMaxGemmEfficiency);
  EXPECT_LT(gemm_efficiency(8.0), 0.12 * kMaxGemmEfficiency);
}

TEST(Roofline, GemmIsComputeOrMemoryBound) {
  const auto f = load("qwen2-57b-a14b", "1x-hgx-h200");
  const RooflineCosts rc(f.cluster);
  // Large square GEMM: compute bound at 989 TFLOP/s × efficiency(8192).
  const double n = 8192;
  const auto big = rc.gemm({n, n, n, DType::kBf16});
  ASSERT_TRUE(big.ok());
  EXPECT_DOUBLE_EQ(big->seconds,
                   2 * n * n * n / (989e12 * gemm_efficiency(n)) + kKernelLaunchSeconds);
  // One token through a 7168 × 2048 weight: bound by reading the weight from HBM.
  const auto small = rc.gemm({1, 2048, 7168, DType::kBf16});
  ASSERT_TRUE(small.ok());
  const double bytes = (7168.0 + 7168.0 * 2048.0 + 2048.0) * 2.0;
  EXPECT_DOUBLE_EQ(small->seconds, bytes / (4800e9 * kHbmEfficiency) + kKernelLaunchSeconds);
  EXPECT_EQ(small->source, "roofline");
  // fp8 doubles the peak.
  EXPECT_DOUBLE_EQ(rc.peak_flops(DType::kFp8), 1979e12);
  // A grouped GEMM skips empty groups and pays one launch.
  const auto g = rc.grouped_gemm({{0.0, 4096.0}, 2048, 7168, DType::kBf16});
  const auto one = rc.gemm({4096.0, 2048, 7168, DType::kBf16});
  ASSERT_TRUE(g.ok() && one.ok());
  EXPECT_DOUBLE_EQ(g->seconds, one->seconds);
  EXPECT_FALSE(rc.gemm({-1, 1, 1, DType::kBf16}).ok());
}

// The step is one forward of the whole model: the 28 MoE blocks, 28 attention blocks (Qwen2-MoE
// has no dense MLP layer) and the head.
TEST(CostModel, StepIsTheWholeModel) {
  const auto f = load("qwen2-57b-a14b", "2x-hgx-h200");
  const RooflineCosts rc(f.cluster);
  const auto load = ExpertLoad::uniform(f.model.num_moe_layers(), f.model.num_experts);
  const auto c = cost(f, rc, layout(8, 2, Dispatcher::kA2av), 4096, load);
  EXPECT_NEAR(c.moe_seconds, 28 * c.per_layer.total(), 1e-12 * c.moe_seconds);
  EXPECT_GT(c.dense.attention.seconds, 0.0);
  EXPECT_EQ(c.dense.attention.source, "roofline");
  EXPECT_EQ(c.dense.dense_mlp.seconds, 0.0);
  EXPECT_GT(c.dense.head.seconds, 0.0);
  EXPECT_NEAR(c.step_seconds, c.moe_seconds + 28 * c.dense.attention.seconds + c.dense.head.seconds,
              1e-12 * c.step_seconds);
  EXPECT_NEAR(c.tokens_per_s_per_gpu, 4096 / c.step_seconds, 1e-9 * c.tokens_per_s_per_gpu);
  EXPECT_EQ(c.tokens_per_s_per_user, 0.0);  // prefill
  for (const CostItem* item : {&c.per_layer.router, &c.per_layer.dispatch, &c.per_layer.experts,
                               &c.per_layer.combine, &c.per_layer.tp, &c.per_layer.shared}) {
    EXPECT_EQ(item->source, "roofline");
    EXPECT_GT(item->seconds, 0.0);
  }
  EXPECT_DOUBLE_EQ(c.imbalance, 1.0);
  // Uniform: each of 8 ranks serves 1/8 of 8 · (2 · 4096) · 8 pairs.
  EXPECT_DOUBLE_EQ(c.useful_rows, 2.0 * 4096 * 8);
  EXPECT_DOUBLE_EQ(c.expert_rows, c.useful_rows);
}

TEST(CostModel, PaddedA2aPadsEveryExpertToTheHottest) {
  const auto f = load("qwen2-57b-a14b", "2x-hgx-h200");
  const RooflineCosts rc(f.cluster);
  const auto skew = hot_expert(64, 8.0);
  const auto padded = cost(f, rc, layout(16, 1, Dispatcher::kPaddedA2a), 4096, skew);
  const auto a2av = cost(f, rc, layout(16, 1, Dispatcher::kA2av), 4096, skew);
  // Pairs: 16 · 4096 · 8 = 524288 over weights 8 + 63 = 71; the hot expert gets 8/71 of them,
  // one source rank's mean share is μ = 524288 · 8 / 71 / 16 = 3692.2 rows; the largest of 16
  // sources' Binomial counts is μ + z(16)·√(μ·15/16) = 3692.2 + 1.7688 · 58.83 = 3796.2, so
  // the capacity is 3797 and every rank computes 4 slots × 16 × 3797 rows.
  EXPECT_DOUBLE_EQ(padded.expert_rows, 4.0 * 16 * 3797);
  // a2av: the hot rank (experts 0..3) serves (8 + 3) / 71 of the pairs, no padding.
  EXPECT_NEAR(a2av.expert_rows, 524288.0 * 11 / 71, 1e-6);
  EXPECT_NEAR(a2av.imbalance, 11.0 / 71 * 16, 1e-12);
  EXPECT_GT(padded.per_layer.experts.seconds, a2av.per_layer.experts.seconds);
  EXPECT_GT(padded.per_layer.dispatch.seconds, a2av.per_layer.dispatch.seconds);
  // Skew slows a2av's slowest rank compared with a uniform load.
  const auto uniform =
      cost(f, rc, layout(16, 1, Dispatcher::kA2av), 4096, ExpertLoad::uniform(1, 64));
  EXPECT_GT(a2av.per_layer.experts.seconds, uniform.per_layer.experts.seconds);
}

// A plan's load gives frequencies: a step's rows per slot are expected counts, and at one row
// per slot a third of the slots are empty on average (their weights unread). A load that is one
// step's routing of exactly these tokens (validate's measured run) gives the counts themselves;
// so do padded_a2a's buffers, computed whole.
TEST(CostModel, DecodeRowsAreExpectedCountsUnlessTheLoadIsAStep) {
  const auto f = load("qwen3-30b-a3b", "1x-hgx-h200");
  const RooflineRecorder rec(f.cluster);
  // 8 GPUs × 2 sequences, top-8 of 128: one row per slot on average.
  ExpertLoad frequencies = ExpertLoad::uniform(1, 128);
  const auto expected =
      cost(f, rec, layout(8, 1, Dispatcher::kAllGather), 2, frequencies, Phase::kDecode);
  ASSERT_FALSE(rec.grouped.empty());
  for (const auto& q : rec.grouped) {
    EXPECT_TRUE(q.expected);
    for (const double m : q.m) EXPECT_DOUBLE_EQ(m, 1.0);
  }
  rec.grouped.clear();
  ExpertLoad step = frequencies;
  step.realized = true;
  const auto counts = cost(f, rec, layout(8, 1, Dispatcher::kAllGather), 2, step, Phase::kDecode);
  ASSERT_FALSE(rec.grouped.empty());
  for (const auto& q : rec.grouped) EXPECT_FALSE(q.expected);
  // Each slot's weights are read with probability 1 − e^{−1} instead of 1; its rows and the
  // launches are the same: between that share of the counts' time and all of it.
  EXPECT_LT(expected.per_layer.experts.seconds, counts.per_layer.experts.seconds);
  EXPECT_GT(expected.per_layer.experts.seconds,
            (1.0 - std::exp(-1.0)) * counts.per_layer.experts.seconds);
  rec.grouped.clear();
  cost(f, rec, layout(8, 1, Dispatcher::kPaddedA2a), 2, frequencies, Phase::kDecode);
  ASSERT_FALSE(rec.grouped.empty());
  for (const auto& q : rec.grouped) EXPECT_FALSE(q.expected);
}

TEST(CostModel, AllGatherVolumeGrowsWithEp) {
  // All-gather moves (ep−1)·Tg·H per rank; a2av moves (ep−1)/ep·Tg·k·H. With top-8 the
  // all-gather is cheaper at ep = 2 (1 vs 4 units) and dearer at ep = 16 (15 vs 7.5).
  const auto f = load("qwen2-57b-a14b", "2x-hgx-h200");
  const RooflineCosts rc(f.cluster);
  const auto u = ExpertLoad::uniform(1, 64);
  const auto ag2 = cost(f, rc, layout(2, 8, Dispatcher::kAllGather), 4096, u);
  const auto av2 = cost(f, rc, layout(2, 8, Dispatcher::kA2av), 4096, u);
  EXPECT_LT(ag2.per_layer.dispatch.seconds, av2.per_layer.dispatch.seconds);
  const auto ag16 = cost(f, rc, layout(16, 1, Dispatcher::kAllGather), 4096, u);
  const auto av16 = cost(f, rc, layout(16, 1, Dispatcher::kA2av), 4096, u);
  EXPECT_GT(ag16.per_layer.dispatch.seconds, av16.per_layer.dispatch.seconds);
  EXPECT_GT(ag16.memory.buffers, av16.memory.buffers);
}

TEST(CostModel, RankMappingChangesTrafficAcrossNodes) {
  // ep8 × tp2 on two nodes: TP-innermost EP groups span both nodes, EP-innermost ones stay in
  // a node (the TP all-reduce crosses instead).
  const auto f = load("qwen2-57b-a14b", "2x-hgx-h200");
  const RooflineCosts rc(f.cluster);
  const auto u = ExpertLoad::uniform(1, 64);
  const auto tpi = cost(f, rc, layout(8, 2, Dispatcher::kA2av, RankMapping::kTpInnermost), 4096, u);
  const auto epi = cost(f, rc, layout(8, 2, Dispatcher::kA2av, RankMapping::kEpInnermost), 4096, u);
  EXPECT_GT(tpi.per_layer.dispatch.seconds, epi.per_layer.dispatch.seconds);
  EXPECT_LT(tpi.per_layer.tp.seconds, epi.per_layer.tp.seconds);
  EXPECT_DOUBLE_EQ(tpi.per_layer.experts.seconds, epi.per_layer.experts.seconds);
}

TEST(CostModel, MemoryPerGpu) {
  const auto f = load("qwen2-57b-a14b", "2x-hgx-h200");
  const RooflineCosts rc(f.cluster);
  const auto c = cost(f, rc, layout(16, 1, Dispatcher::kA2av), 4096, ExpertLoad::uniform(1, 64));
  // 28 MoE layers × 4 experts × 3 · 3584 · 2560 bf16 parameters (52.5 MiB each).
  EXPECT_DOUBLE_EQ(c.memory.experts, 28.0 * 4 * 3 * 3584 * 2560 * 2);
  EXPECT_DOUBLE_EQ(c.memory_capacity, 141e9);
  EXPECT_TRUE(c.feasible);
  const auto tp2 = cost(f, rc, layout(8, 2, Dispatcher::kA2av), 4096, ExpertLoad::uniform(1, 64));
  EXPECT_DOUBLE_EQ(tp2.memory.experts, c.memory.experts);  // 8 experts at half width
  EXPECT_LT(tp2.memory.dense, c.memory.dense);             // attention split over tp
  // DeepSeek-V3 in bf16 (1.3 TB) cannot fit on 8 H200s; as published (fp8 with 128×128 block
  // scales, 673 GB) it does, as it is served.
  auto ds = load("deepseek-v3", "1x-hgx-h200");
  const RooflineCosts rc8(ds.cluster);
  const auto fp8 =
      cost(ds, rc8, layout(8, 1, Dispatcher::kA2av), 4096, ExpertLoad::uniform(1, 256));
  EXPECT_TRUE(fp8.feasible);
  ASSERT_TRUE(models::apply_weights_choice(ds.model, "bf16").ok());
  const auto d = cost(ds, rc8, layout(8, 1, Dispatcher::kA2av), 4096, ExpertLoad::uniform(1, 256));
  EXPECT_FALSE(d.feasible);
  EXPECT_GT(d.memory.total(), d.memory_capacity);
}

// With a context the KV cache is memory: decode holds tp · batch sequences of isl + osl tokens
// per TP group, prefill its step's prompts; the memory must then fit in mem_fraction of the HBM,
// and what is left says how many sequences fit.
TEST(CostModel, KvCacheCountedWithAContext) {
  const auto f = load("qwen3-30b-a3b", "1x-hgx-h200");
  const RooflineCosts rc(f.cluster);
  const auto uniform = ExpertLoad::uniform(1, 128);
  const auto at = [&](int ep, int tp, Phase phase, int tokens, int isl, int osl) {
    Workload w{phase, tokens};
    w.isl = isl;
    w.osl = osl;
    const CostContext ctx{f.model, f.cluster, rc, w, uniform, nullptr};
    auto c = cost_layout(ctx, layout(ep, tp, Dispatcher::kA2av));
    EXPECT_TRUE(c.ok());
    return std::move(c).value();
  };
  const double per_token_tp1 = 48.0 * 2 * 4 * 128 * 2;  // 48 layers, 4 KV heads of 128, K and V
  const auto none = at(8, 1, Phase::kDecode, 64, 0, 0);
  EXPECT_EQ(none.memory.kv_cache, 0.0);
  EXPECT_DOUBLE_EQ(none.memory_limit, none.memory_capacity);
  const auto dec = at(8, 1, Phase::kDecode, 64, 1024, 256);
  EXPECT_DOUBLE_EQ(dec.memory.kv_cache, 64.0 * (1024 + 256) * per_token_tp1);
  EXPECT_DOUBLE_EQ(dec.memory_limit, kDefaultMemFraction * dec.memory_capacity);
  EXPECT_DOUBLE_EQ(dec.memory.total() - dec.memory.kv_cache, none.memory.total());
  EXPECT_DOUBLE_EQ(dec.max_sequences_per_gpu, std::floor((dec.memory_limit - none.memory.total()) /
                                                         ((1024 + 256) * per_token_tp1)));
  EXPECT_TRUE(dec.feasible);
  // tp2: the group's 128 sequences, each rank with half the heads: the same bytes per GPU.
  const auto tp2 = at(4, 2, Phase::kDecode, 64, 1024, 256);
  EXPECT_DOUBLE_EQ(tp2.memory.kv_cache, dec.memory.kv_cache);
  // Prefill: the step's 4096 tokens are two prompts of 2048 (whole prompts, rounded up: three
  // of 1500).
  EXPECT_DOUBLE_EQ(at(8, 1, Phase::kPrefill, 4096, 2048, 0).memory.kv_cache,
                   4096.0 * per_token_tp1);
  EXPECT_DOUBLE_EQ(at(8, 1, Phase::kPrefill, 4096, 1500, 0).memory.kv_cache,
                   4500.0 * per_token_tp1);
  // A batch whose KV cache exceeds what is left does not fit, and no sequence count is left.
  const auto big = at(8, 1, Phase::kDecode, 4096, 32000, 8000);
  EXPECT_FALSE(big.feasible);
  EXPECT_TRUE(big.infeasible_reason.empty());  // memory, not the dispatcher
  EXPECT_GT(big.memory.total(), big.memory_limit);
  EXPECT_LT(big.max_sequences_per_gpu, 4096.0);
}

TEST(CostModel, ReplicatedHotExpertSplitsItsLoadAndCostsMemory) {
  // 64 experts on ep8 with expert 0 eight times as hot. A placement with 72 slots gives expert 0
  // a replica on rank 1 and fills the other 7 extra slots with experts 8..14 (9 slots per rank).
  const auto f = load("qwen2-57b-a14b", "2x-hgx-h200");
  const RooflineCosts rc(f.cluster);
  const auto skew = hot_expert(64, 8.0);
  const auto contiguous = cost(f, rc, layout(8, 2, Dispatcher::kA2av), 4096, skew);
  PlacementFn replicated = [](int ep) -> Result<Placement> {
    Placement p;
    p.policy = "test_replica";
    p.num_experts = 64;
    p.ep_size = ep;
    p.num_slots = 72;
    std::vector<int> row;
    for (int r = 0; r < 8; ++r) {
      for (int s = 0; s < 8; ++s) row.push_back(r * 8 + s);
      row.push_back(r == 0 ? 15 : (r == 1 ? 0 : 7 + r));
    }
    p.physical_to_logical = {row};
    return p;
  };
  const CostContext ctx{f.model, f.cluster, rc, {}, skew, replicated};
  const auto rep = cost_layout(ctx, layout(8, 2, Dispatcher::kA2av));
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  EXPECT_LT(rep->imbalance, contiguous.imbalance);
  EXPECT_LT(rep->per_layer.experts.seconds, contiguous.per_layer.experts.seconds);
  // 9 slots instead of 8 per rank: 9/8 of the expert memory.
  EXPECT_DOUBLE_EQ(rep->memory.experts, contiguous.memory.experts * 9.0 / 8.0);
}

/// A cost source that answers every query with a fixed time, to check attribution.
class FixedCosts final : public CostSource {
 public:
  std::string name() const override { return "fixed"; }
  Result<CostEstimate> gemm(const GemmQuery&) const override { return CostEstimate{1e-3, "fixed"}; }
  Result<CostEstimate> grouped_gemm(const GroupedGemmQuery&) const override {
    return CostEstimate{1e-3, "fixed"};
  }
  Result<CostEstimate> elementwise(const ElementwiseQuery&) const override {
    return CostEstimate{0.0, "fixed"};
  }
  Result<CostEstimate> collective(const CollectiveQuery& q) const override {
    if (fail_collectives) return Error{"fixed: no entry for " + collective_name(q.op)};
    return CostEstimate{2e-3, "fixed"};
  }
  Result<CostEstimate> attention(const AttentionQuery&) const override {
    return CostEstimate{5e-3, "fixed-attention"};
  }
  bool fail_collectives = false;
};

TEST(CostModel, EveryNumberNamesItsSource) {
  const auto f = load("qwen2-57b-a14b", "2x-hgx-h200");
  FixedCosts fixed;
  const auto c = cost(f, fixed, layout(8, 2, Dispatcher::kA2av), 4096, ExpertLoad::uniform(1, 64));
  // router 1 GEMM; dispatch: count exchange + a2av; experts 2 grouped GEMMs; combine 1 a2av;
  // tp 2 all-reduces (routed + shared); shared 2 GEMMs.
  EXPECT_DOUBLE_EQ(c.per_layer.router.seconds, 1e-3);
  EXPECT_DOUBLE_EQ(c.per_layer.dispatch.seconds, 4e-3);
  EXPECT_DOUBLE_EQ(c.per_layer.experts.seconds, 2e-3);
  EXPECT_DOUBLE_EQ(c.per_layer.combine.seconds, 2e-3);
  EXPECT_DOUBLE_EQ(c.per_layer.tp.seconds, 4e-3);
  EXPECT_DOUBLE_EQ(c.per_layer.shared.seconds, 2e-3);
  EXPECT_EQ(c.per_layer.dispatch.source, "fixed");
  // Attention at tp 2 (Qwen2-MoE, GQA): the qkv GEMM, the core, o_proj and the TP all-reduce
  // (norms and RoPE are elementwise: 0 here); the head: the LM head GEMM; no dense MLP layer.
  EXPECT_DOUBLE_EQ(c.dense.attention.seconds, 1e-3 + 5e-3 + 1e-3 + 2e-3);
  EXPECT_EQ(c.dense.attention.source, "fixed+fixed-attention");
  EXPECT_DOUBLE_EQ(c.dense.head.seconds, 1e-3);
  EXPECT_DOUBLE_EQ(c.dense.dense_mlp.seconds, 0.0);
  EXPECT_DOUBLE_EQ(c.step_seconds, 28 * c.per_layer.total() + 28 * 9e-3 + 1e-3);
  fixed.fail_collectives = true;
  const CostContext ctx{f.model, f.cluster, fixed, {}, ExpertLoad::uniform(1, 64), nullptr};
  const auto bad = cost_layout(ctx, layout(8, 2, Dispatcher::kA2av));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "fixed: no entry for all_to_all");
}

TEST(CostModel, RejectsBadInput) {
  const auto f = load("qwen2-57b-a14b", "1x-hgx-h200");
  const RooflineCosts rc(f.cluster);
  const auto u = ExpertLoad::uniform(1, 64);
  const CostContext ctx{f.model, f.cluster, rc, {Phase::kPrefill, 0}, u, nullptr};
  EXPECT_FALSE(cost_layout(ctx, layout(8, 1, Dispatcher::kA2av)).ok());
  const CostContext ok{f.model, f.cluster, rc, {}, u, nullptr};
  const auto too_big = cost_layout(ok, layout(16, 1, Dispatcher::kA2av));
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.error().message,
            "layout ep16×tp1 needs 16 GPUs but cluster '1x-hgx-h200' has 8");
  const auto illegal = cost_layout(ok, layout(1, 3, Dispatcher::kA2av));
  ASSERT_FALSE(illegal.ok());
  EXPECT_NE(illegal.error().message.find("2560 % 3 = 1"), std::string::npos);
}

TEST(Plan, RanksRecommendsAndSerialises) {
  const auto f = load("qwen2-57b-a14b", "2x-hgx-h200");
  const RooflineCosts rc(f.cluster);
  PlanRequest req;
  auto plan = make_plan(f.model, f.cluster, rc, req);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->num_gpus, 16);
  // 3 dispatchers × 8 (shape, mapping) pairs, plus deepep_normal and deepep_ll on ep16×tp1.
  EXPECT_EQ(plan->layouts.size(), 26U);
  EXPECT_EQ(plan->recommended, 0);
  for (std::size_t i = 1; i < plan->layouts.size(); ++i) {
    const auto& a = plan->layouts[i - 1];
    const auto& b = plan->layouts[i];
    EXPECT_TRUE(a.feasible >= b.feasible);
    if (a.feasible == b.feasible) {
      EXPECT_LE(a.step_seconds, b.step_seconds);
    }
  }
  EXPECT_EQ(plan->reasons.front().rfind("fastest feasible layout: ", 0), 0U);
  const auto j = plan_to_json(*plan, 5, false);
  EXPECT_EQ(j.at("layouts").size(), 5U);
  const auto& first = j.at("layouts").at(0);
  for (const char* key : {"ep_size", "tp_size", "dispatcher", "mapping", "feasible", "layer_ms",
                          "step_ms", "tokens_per_s_per_gpu", "memory_gib", "sources"}) {
    EXPECT_TRUE(first.contains(key)) << key;
  }
  EXPECT_DOUBLE_EQ(first.at("step_ms").get<double>(), plan->layouts[0].step_seconds * 1e3);
  EXPECT_EQ(j.at("recommendation").at("rank").get<int>(), 1);
  EXPECT_EQ(j.at("cost_source").get<std::string>(), "roofline");
}

TEST(Plan, ExplainListsExcludedCombinations) {
  auto f = load("qwen1.5-moe-a2.7b", "16x-hgx-h200");
  const RooflineCosts rc(f.cluster);
  PlanRequest req;
  req.num_gpus = 12;
  req.dispatchers = {Dispatcher::kA2av};
  auto plan = make_plan(f.model, f.cluster, rc, req);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  // 12 GPUs: ep ∈ {1,2,3,4,6,12} all divide 60; tp = 12/ep must divide 1408: tp ∈ {1, 2, 4}.
  EXPECT_EQ(plan->excluded.size(), 3U);
  const auto j = plan_to_json(*plan, 0, true);
  int illegal = 0;
  for (const auto& l : j.at("layouts")) {
    if (!l.at("legal").get<bool>()) {
      ++illegal;
      EXPECT_NE(l.at("rule").get<std::string>().find("moe_intermediate_size % tp_size"),
                std::string::npos);
    }
  }
  EXPECT_EQ(illegal, 3);
}

TEST(Plan, Errors) {
  const auto ds = load("deepseek-v3", "128x-hgx-h200");
  const RooflineCosts rc(ds.cluster);
  PlanRequest req;
  req.num_gpus = 24;
  const auto none = make_plan(ds.model, ds.cluster, rc, req);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message.rfind("model 'deepseek-v3' has no legal layout on 24 GPUs: "
                                       "ep1×tp24 breaks moe_intermediate_size % tp_size == 0",
                                       0),
            0U)
      << none.error().message;
  req.num_gpus = 2048;
  EXPECT_FALSE(make_plan(ds.model, ds.cluster, rc, req).ok());
  req.num_gpus = 8;
  req.workload.tokens_per_gpu = 0;
  EXPECT_FALSE(make_plan(ds.model, ds.cluster, rc, req).ok());
  // In bf16, nothing fits on 8 GPUs: a plan with no recommendation and the reason.
  req.workload.tokens_per_gpu = 4096;
  auto bf16 = ds.model;
  ASSERT_TRUE(models::apply_weights_choice(bf16, "bf16").ok());
  const auto nofit = make_plan(bf16, ds.cluster, rc, req);
  ASSERT_TRUE(nofit.ok());
  EXPECT_EQ(nofit->recommended, -1);
  EXPECT_EQ(nofit->reasons.front().rfind("no layout fits in the h200's", 0), 0U);
}

}  // namespace
}  // namespace test_cost_model
}  // namespace moeplan::planner
