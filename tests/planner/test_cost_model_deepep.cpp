// The DeepEP dispatchers of the cost model: per-node dedup expectations, the two hops in the
// traffic matrix, the low-latency buffer, two-batch overlap, legality, and the predicted
// dispatch + combine of DeepSeek-V3 ep16 on 2 × HGX H200 against aiconfigurator's DeepEP tables.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "models/registry.hpp"
#include "planner/costs/cost_model.hpp"
#include "planner/costs/cost_setup.hpp"
#include "planner/costs/measured_costs.hpp"
#include "planner/costs/roofline_costs.hpp"
#include "planner/layout.hpp"
#include "planner/layout_figures.hpp"
#include "planner/plan.hpp"
#include "planner/topology/local_cluster.hpp"

namespace moeplan::planner {
namespace test_cost_model_deepep {
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

Layout layout(int ep, Dispatcher d, bool tbo = false) {
  Layout l = Layout::of(ep, 1, RankMapping::kTpInnermost, d);
  l.tbo = tbo;
  return l;
}

LayoutCost cost(const Fixture& f, const CostSource& cs, const Layout& l, Workload w,
                const ExpertLoad& load) {
  const CostContext ctx{f.model, f.cluster, cs, w, load, nullptr};
  auto c = cost_layout(ctx, l);
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message);
  return std::move(c).value();
}

/// C(n, k) / C(m, k) by exact enumeration of k-subsets' counts (small n only): the fraction of
/// k-subsets of {0..E-1} avoiding a set of `m` experts.
double avoid_fraction_by_enumeration(int experts, int k, int avoided) {
  long long total = 0, avoid = 0;
  for (unsigned mask = 0; mask < (1u << experts); ++mask) {
    if (__builtin_popcount(mask) != k) continue;
    ++total;
    if ((mask & ((1u << avoided) - 1u)) == 0) ++avoid;
  }
  return static_cast<double>(avoid) / static_cast<double>(total);
}

TEST(DeepEpDedup, UniformClosedFormMatchesEnumeration) {
  // 16 experts on 4 nodes of 4, top-3: P(a node is missed) = C(12,3)/C(16,3) = 220/560.
  const double miss = avoid_fraction_by_enumeration(16, 3, 4);
  EXPECT_DOUBLE_EQ(miss, 220.0 / 560.0);
  EXPECT_NEAR(expected_distinct_nodes_uniform(16, 3, 4), 4.0 * (1.0 - miss), 1e-14);
  EXPECT_NEAR(expected_distinct_nodes_uniform(20, 2, 5),
              5.0 * (1.0 - avoid_fraction_by_enumeration(20, 2, 4)), 1e-14);
  // DeepSeek-V3 on 2 nodes: 2 · (1 − C(128, 8) / C(256, 8)), the product taken term by term.
  double ratio = 1.0;
  for (int i = 0; i < 8; ++i) ratio *= (128.0 - i) / (256.0 - i);
  EXPECT_NEAR(expected_distinct_nodes_uniform(256, 8, 2), 2.0 * (1.0 - ratio), 1e-14);
  EXPECT_LT(expected_distinct_nodes_uniform(256, 8, 2), 2.0);
  // Not k: with one node every token reaches exactly one node.
  EXPECT_DOUBLE_EQ(expected_distinct_nodes_uniform(256, 8, 1), 1.0);
}

TEST(DeepEpDedup, PlacementAwareExpectation) {
  // Uniform pairs: the placement-aware probabilities are the closed form's, node by node.
  const auto p = group_hit_probabilities({100.0, 100.0, 100.0, 100.0}, 400.0, 16, 3);
  ASSERT_EQ(p.size(), 4u);
  for (double v : p) EXPECT_NEAR(v, 1.0 - 220.0 / 560.0, 1e-14);
  // Every pair on node 0: every token reaches node 0 and no other.
  const auto all = group_hit_probabilities({400.0, 0.0, 0.0, 0.0}, 400.0, 16, 3);
  EXPECT_DOUBLE_EQ(all[0], 1.0);
  EXPECT_DOUBLE_EQ(all[1], 0.0);
  // Co-locating the hot experts on one node lowers the expected distinct nodes per token.
  const auto skew = group_hit_probabilities({300.0, 100.0}, 400.0, 16, 3);
  const auto even = group_hit_probabilities({200.0, 200.0}, 400.0, 16, 3);
  EXPECT_LT(skew[0] + skew[1], even[0] + even[1]);
}

TEST(DeepEpCost, LegalityAndEnumeration) {
  const auto f = load("deepseek-v3", "2x-hgx-h200");
  // Normal mode needs whole nodes (at least two) and tp 1; low latency tp 1.
  EXPECT_FALSE(models::dispatcher_violation(Dispatcher::kDeepEpNormal, 16, 1, 8));
  EXPECT_TRUE(models::dispatcher_violation(Dispatcher::kDeepEpNormal, 8, 2, 8));
  EXPECT_TRUE(models::dispatcher_violation(Dispatcher::kDeepEpNormal, 8, 1, 8));
  EXPECT_TRUE(models::dispatcher_violation(Dispatcher::kDeepEpNormal, 12, 1, 8));
  EXPECT_FALSE(models::dispatcher_violation(Dispatcher::kDeepEpLl, 8, 1, 8));
  EXPECT_TRUE(models::dispatcher_violation(Dispatcher::kDeepEpLl, 8, 2, 8));
  EnumerateOptions o;
  o.num_gpus = 16;
  o.gpus_per_node = 8;
  o.tbo = {false, true};
  const auto en = enumerate_layouts(f.model, o);
  int normal = 0, ll = 0, tbo = 0;
  for (const Layout& l : en.layouts) {
    normal += l.dispatcher == Dispatcher::kDeepEpNormal;
    ll += l.dispatcher == Dispatcher::kDeepEpLl;
    tbo += l.tbo;
    if (models::is_deepep(l.dispatcher)) {
      EXPECT_EQ(l.tp_size, 1);
    }
  }
  EXPECT_EQ(normal, 2);  // ep16×tp1, with and without overlap
  EXPECT_EQ(ll, 2);
  EXPECT_EQ(tbo * 2, static_cast<int>(en.layouts.size()));
  // A layout that cannot run is an error naming the rule.
  const RooflineCosts roof(f.cluster);
  Layout bad = Layout::of(8, 2, RankMapping::kTpInnermost, Dispatcher::kDeepEpNormal);
  bad.num_gpus = 16;
  const CostContext ctx{f.model, f.cluster, roof, {}, ExpertLoad::uniform(1, 256), nullptr};
  auto c = cost_layout(ctx, bad);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("expected tp_size 1"), std::string::npos);
}

TEST(DeepEpCost, TrafficShowsTheTwoHopsWithPerNodeDedup) {
  const auto f = load("deepseek-v3", "2x-hgx-h200");
  const RooflineCosts roof(f.cluster);
  const ExpertLoad uniform = ExpertLoad::uniform(1, 256);
  const int tokens = 4096;
  const CostContext ctx{f.model, f.cluster, roof, {Phase::kPrefill, tokens}, uniform, nullptr};
  auto normal = layer_traffic(ctx, layout(16, Dispatcher::kDeepEpNormal), 0);
  auto a2av = layer_traffic(ctx, layout(16, Dispatcher::kA2av), 0);
  ASSERT_TRUE(normal.ok() && a2av.ok());
  const auto tn = traffic_totals(*normal, 8);
  const auto ta = traffic_totals(*a2av, 8);
  // Across nodes: each GPU sends each token once to the other node if any of its 8 experts is
  // there (fp8 7168 + 56 scales + 8·8 top-k + 8 metadata → 7472 bytes), and receives one bf16 row
  // back per such token (14336 + 4·8 + 8 → 14384 bytes); plus the count exchange's 8 remote
  // peers × 256·4/16 bytes each way.
  const double p_other = 1.0 - std::exp(std::lgamma(129.0) - std::lgamma(121.0) -
                                        std::lgamma(257.0) + std::lgamma(249.0));
  const double expected = 16.0 * (tokens * p_other * (7472.0 + 14384.0) + 8.0 * 256.0 * 4.0 / 16.0);
  EXPECT_NEAR(tn.inter_node, expected, 1e-9 * expected);
  // The NVLink forward of the second hop carries bytes inside the nodes.
  EXPECT_GT(tn.intra_node, 0.0);
  // a2av sends every (token, expert) pair across: about k/2 times the deduplicated traffic.
  EXPECT_GT(ta.inter_node, 3.0 * tn.inter_node);
}

TEST(DeepEpCost, LowLatencyBufferAndPayload) {
  const auto f = load("deepseek-v3", "2x-hgx-h200");
  const RooflineCosts roof(f.cluster);
  const ExpertLoad uniform = ExpertLoad::uniform(1, 256);
  EXPECT_DOUBLE_EQ(deepep_ll_dispatch_message_bytes(7168), 16.0 + 7168.0 + 56.0 * 4.0);
  Workload w{Phase::kDecode, 128};
  const auto fits = cost(f, roof, layout(16, Dispatcher::kDeepEpLl), w, uniform);
  EXPECT_TRUE(fits.infeasible_reason.empty());
  EXPECT_DOUBLE_EQ(fits.memory.buffers, deepep_ll_buffer_bytes(128, 7168, 256));
  w.tokens_per_gpu = 129;
  const auto over = cost(f, roof, layout(16, Dispatcher::kDeepEpLl), w, uniform);
  EXPECT_FALSE(over.feasible);
  EXPECT_NE(over.infeasible_reason.find("129 tokens per rank exceed its buffer of 128"),
            std::string::npos)
      << over.infeasible_reason;
  // Two-batch overlap halves the micro-batch: 129 tokens fit as two of 64.5.
  const auto halves = cost(f, roof, layout(16, Dispatcher::kDeepEpLl, true), w, uniform);
  EXPECT_TRUE(halves.infeasible_reason.empty());
  // The traffic: every pair crosses to its expert's rank as one fp8 message, bf16 back.
  const CostContext ctx{f.model, f.cluster, roof, {Phase::kDecode, 128}, uniform, nullptr};
  auto m = layer_traffic(ctx, layout(16, Dispatcher::kDeepEpLl), 0);
  ASSERT_TRUE(m.ok());
  const double sent = std::accumulate((*m)[0].begin(), (*m)[0].end(), 0.0);
  const double expected =
      128.0 * 8.0 * 15.0 / 16.0 * (deepep_ll_dispatch_message_bytes(7168) + 2.0 * 7168.0);
  EXPECT_NEAR(sent, expected, 1e-9 * expected);
}

TEST(DeepEpCost, TwoBatchOverlapHidesTheShorterStream) {
  const auto f = load("deepseek-v3", "2x-hgx-h200");
  const RooflineCosts roof(f.cluster);
  const ExpertLoad uniform = ExpertLoad::uniform(1, 256);
  const Workload w{Phase::kPrefill, 4096};
  const auto plain = cost(f, roof, layout(16, Dispatcher::kDeepEpNormal), w, uniform);
  const auto tbo = cost(f, roof, layout(16, Dispatcher::kDeepEpNormal, true), w, uniform);
  const Workload half{Phase::kPrefill, 2048};
  const auto one = cost(f, roof, layout(16, Dispatcher::kDeepEpNormal), half, uniform);
  // The parts are both micro-batches' (each costed at half the tokens) ...
  EXPECT_NEAR(tbo.per_layer.dispatch.seconds, 2.0 * one.per_layer.dispatch.seconds, 1e-15);
  EXPECT_NEAR(tbo.per_layer.experts.seconds, 2.0 * one.per_layer.experts.seconds, 1e-15);
  // ... and the schedule hides 2·min(C, M) − min(C, M)/L of them per layer, C being one
  // micro-batch's MoE compute and its attention block (costed at half the tokens).
  const auto& p = one.per_layer;
  const double attention_half = one.dense.attention.seconds;
  ASSERT_GT(attention_half, 0.0);
  const double moe_compute = p.router.seconds + p.experts.seconds + p.tp.seconds + p.shared.seconds;
  const double compute = moe_compute + attention_half;
  const double comm = p.dispatch.seconds + p.combine.seconds;
  const double shorter = std::min(compute, comm);
  const int layers = f.model.num_moe_layers();
  EXPECT_NEAR(tbo.per_layer.overlap_hidden, 2.0 * shorter - shorter / layers, 1e-15);
  EXPECT_NEAR(tbo.moe_seconds,
              layers * (2.0 * moe_compute + 2.0 * comm) - 2.0 * layers * shorter + shorter,
              1e-12 * tbo.moe_seconds);
  EXPECT_LT(tbo.moe_seconds, plain.moe_seconds);
  // Every layer runs both micro-batches' attention blocks; the dense MLP layers and the head run
  // as without the overlap. So per MoE layer the step is max(2C, 2M) (+ the fill once).
  EXPECT_NEAR(tbo.dense.attention.seconds, 2.0 * attention_half, 1e-15);
  EXPECT_NEAR(tbo.step_seconds,
              tbo.moe_seconds + f.model.num_hidden_layers * 2.0 * attention_half +
                  f.model.num_dense_layers() * plain.dense.dense_mlp.seconds +
                  plain.dense.head.seconds,
              1e-12 * tbo.step_seconds);
  const int dense_layers = f.model.num_dense_layers();
  EXPECT_NEAR(tbo.step_seconds,
              layers * std::max(2.0 * compute, 2.0 * comm) + shorter +
                  dense_layers * (2.0 * attention_half + plain.dense.dense_mlp.seconds) +
                  plain.dense.head.seconds,
              1e-12 * tbo.step_seconds);
  EXPECT_EQ(tbo.layout.full_name(), "ep16×tp1 deepep_normal tp_innermost tbo");
}

/// aiconfigurator-core 0.12.0, h200_sxm/comm/sglang/0.5.6.post2, DeepSeek-V3 shape on 2 nodes:
/// dispatch + combine (transmit + notify at DeepEP's default 20 SMs for normal mode), ms. The
/// low-latency table stops at 256 tokens per rank; 512 and 4096 are its 256-token time × 2 and
/// × 16 (the figures).
struct DeepEpTarget {
  Dispatcher dispatcher;
  int tokens;
  double measured_ms;
};
constexpr DeepEpTarget kTargets[] = {
    {Dispatcher::kDeepEpNormal, 512, 0.5747},
    {Dispatcher::kDeepEpNormal, 4096, 3.0428},
    {Dispatcher::kDeepEpLl, 512, 1.041},
    {Dispatcher::kDeepEpLl, 4096, 8.328},
};

TEST(DeepEpCost, CalibratedRooflineWithin25PercentOfTheMeasuredTables) {
  auto setup = make_cost_setup("2x-hgx-h200", "");
  ASSERT_TRUE(setup.ok()) << setup.error().message;
  const auto f = load("deepseek-v3", "2x-hgx-h200");
  const CostSource& cs = setup->costs();
  ASSERT_NE(cs.name().find("roofline-calibrated"), std::string::npos);
  const ExpertLoad uniform = ExpertLoad::uniform(1, 256);
  for (const auto& t : kTargets) {
    Workload w{Phase::kPrefill, t.tokens};
    w.ll_max_tokens_per_rank = t.tokens;  // the tables size the buffer to the tokens
    const auto c = cost(f, cs, layout(16, t.dispatcher), w, uniform);
    const double predicted = (c.per_layer.dispatch.seconds + c.per_layer.combine.seconds) * 1e3;
    EXPECT_NEAR(predicted / t.measured_ms, 1.0, 0.25)
        << dispatcher_name(t.dispatcher) << " " << t.tokens << ": predicted " << predicted
        << " ms, measured " << t.measured_ms << " ms";
    EXPECT_NE(c.per_layer.dispatch.source.find("roofline-calibrated"), std::string::npos);
  }
}

/// An imported DeepEP point as `moeplan costs import` writes it.
CostPoint deepep_point(const std::string& op, const std::string& impl, int sms, int tokens,
                       double seconds) {
  CostPoint p;
  p.device = "h200";
  p.backend = "sglang";
  p.op = op;
  p.dtype = op == "moe_dispatch" ? "fp8" : "bf16";
  p.shape = "tokens=" + std::to_string(tokens) +
            ",hidden=7168,topk=8,experts=256,ep=16,nodes=2,impl=" + impl +
            ",payload=x,sms=" + std::to_string(sms);
  p.m = tokens;
  p.median_s = seconds;
  p.provenance = std::string(kProvenanceImported) + "measured";
  return p;
}

/// DeepSeek-V3's normal-mode dispatch kernel on 2 nodes of 8, 512 tokens per rank.
EpKernelQuery v3_normal_dispatch() {
  EpKernelQuery q;
  q.mode = EpKernelMode::kNormal;
  q.phase = EpKernelPhase::kDispatch;
  q.hidden = 7168;
  q.top_k = 8;
  q.num_experts = 256;
  q.num_nodes = 2;
  q.ep_size = 16;
  q.tokens = 512;
  return q;
}

TEST(DeepEpCost, MeasuredTablesAnswerTheKernels) {
  const auto f = load("deepseek-v3", "2x-hgx-h200");
  const std::vector<CostPoint> points = {
      deepep_point("moe_dispatch", "deepep_normal", 20, 512, 187e-6),
      deepep_point("moe_dispatch", "deepep_normal", 20, 4096, 893e-6),
      deepep_point("moe_dispatch", "deepep_normal", 24, 512, 1e-3),  // another SM count: unread
      deepep_point("moe_combine", "deepep_normal", 20, 512, 388e-6),
      deepep_point("moe_combine", "deepep_normal", 20, 4096, 2150e-6),
  };
  const MeasuredCosts db(points, f.cluster, "measured:test");
  EpKernelQuery q = v3_normal_dispatch();
  auto exact = db.ep_kernel(q);
  ASSERT_TRUE(exact.ok());
  EXPECT_DOUBLE_EQ(exact->seconds, 187e-6);
  EXPECT_EQ(exact->source, kSourceExact);
  q.tokens = 1024;  // log-log between 512 and 4096
  auto mid = db.ep_kernel(q);
  ASSERT_TRUE(mid.ok());
  const double f1024 = std::log(1024.0 / 512.0) / std::log(4096.0 / 512.0);
  EXPECT_NEAR(mid->seconds, std::exp(std::log(187e-6) + f1024 * std::log(893e-6 / 187e-6)), 1e-15);
  EXPECT_EQ(mid->source, kSourceInterp);
  // Another shape is a miss answered by the roofline, and listed.
  q.num_nodes = 4;
  auto miss = db.ep_kernel(q);
  ASSERT_TRUE(miss.ok());
  EXPECT_EQ(miss->source, kSourceMiss);
  ASSERT_EQ(db.misses().size(), 1u);
  EXPECT_NE(db.misses()[0].find("deepep normal_dispatch hidden=7168"), std::string::npos);
  // Through the cost model: the DeepEP kernels of a plan come from the table.
  const auto c = cost(f, db, layout(16, Dispatcher::kDeepEpNormal), {Phase::kPrefill, 4096},
                      ExpertLoad::uniform(1, 256));
  EXPECT_NE(c.per_layer.dispatch.source.find(kSourceExact), std::string::npos)
      << c.per_layer.dispatch.source;
  EXPECT_GE(c.per_layer.dispatch.seconds, 893e-6);
  EXPECT_GE(c.per_layer.combine.seconds, 2150e-6);
}

TEST(DeepEpCost, ADatabaseWithoutDeepEpTables) {
  EpKernelQuery q = v3_normal_dispatch();
  q.hops.push_back(CollectiveQuery{CollectiveOp::kAllToAllV, {{0, 8}}, 1 << 20, {}, DType::kBf16});
  // H200 has a DeepEP form calibrated on measured kernels: a database without tables falls back
  // to it, and says it missed.
  const auto gpu = load("deepseek-v3", "2x-hgx-h200");
  const MeasuredCosts gpu_db(std::vector<CostPoint>{}, gpu.cluster, "measured:none");
  auto calibrated = gpu_db.ep_kernel(q);
  ASSERT_TRUE(calibrated.ok());
  EXPECT_EQ(calibrated->source, kSourceMiss);
  // A device without one (a CPU profile's): the kernel is its hops, priced by the database's
  // own collectives (here none measured, so each hop is a labelled miss of its own), and the
  // kernel itself is not listed as missed.
  DeviceSpec cpu;
  cpu.name = "cpu:test";
  cpu.peak_fp32_flops = 1e11;
  cpu.hbm_bandwidth = 1e10;
  cpu.nvlink_bandwidth = 1e10;
  cpu.nic_bandwidth = 1e10;
  const auto cluster = local_cluster(LocalShape{2, 8, true}, cpu, 1e-6, 1e-6);
  ASSERT_TRUE(cluster.ok()) << cluster.error().message;
  const MeasuredCosts cpu_db(std::vector<CostPoint>{}, *cluster, "measured:none");
  auto hops = cpu_db.ep_kernel(q);
  ASSERT_TRUE(hops.ok()) << hops.error().message;
  EXPECT_GT(hops->seconds, 0.0);
  for (const auto& m : cpu_db.misses()) EXPECT_EQ(m.find("deepep"), std::string::npos) << m;
}

}  // namespace
}  // namespace test_cost_model_deepep
}  // namespace moeplan::planner
