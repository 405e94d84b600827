// Rebalancing over time: the copies between two placements (sources on the same node first),
// the alignment that keeps experts in place without changing any load, and the simulation of a
// fixed placement against periodic re-fits on traces with and without drift.
#include <gtest/gtest.h>

#include <algorithm>

#include "models/registry.hpp"
#include "planner/costs/roofline_costs.hpp"
#include "planner/placement/placement_metrics.hpp"
#include "planner/rebalance.hpp"

namespace moeplan::planner {
namespace test_rebalance {
namespace {

struct Fixture {
  models::MoeModel model;
  Cluster cluster;
};

// DeepSeek-V2-Lite (64 experts, 26 MoE layers) on two HGX H200 nodes (8 GPUs each).
const Fixture& fixture() {
  static const Fixture f = [] {
    auto m = models::load_model("deepseek-v2-lite");
    auto c = load_cluster("2x-hgx-h200");
    EXPECT_TRUE(m.ok() && c.ok());
    return Fixture{std::move(m).value(), std::move(c).value()};
  }();
  return f;
}

Placement with_map(std::vector<int> map, int num_experts, int ep) {
  Placement p;
  p.policy = "test";
  p.num_experts = num_experts;
  p.ep_size = ep;
  p.num_slots = static_cast<int>(map.size());
  p.physical_to_logical = {std::move(map)};
  EXPECT_TRUE(p.validate().ok());
  return p;
}

std::vector<int> contiguous_map(int experts) {
  std::vector<int> m(static_cast<std::size_t>(experts));
  for (int e = 0; e < experts; ++e) m[static_cast<std::size_t>(e)] = e;
  return m;
}

// A placement's predicted MoE time on unseen steps is the mean of cost_layout over the steps, each
// with its own load; a step that piles the load on one rank's experts costs more.
TEST(PlacementTime, MeanOfTheCostModelOverTheSteps) {
  const auto& f = fixture();
  const RooflineCosts rc(f.cluster);
  const auto p = with_map(contiguous_map(64), 64, 16);
  const std::vector<double> even(64, 10.0);
  std::vector<double> skewed(64, 1.0);
  for (int e = 0; e < 4; ++e) skewed[static_cast<std::size_t>(e)] = 160.0;  // rank 0's experts
  const LoadSteps steps = {{even}, {skewed}};
  Workload w{Phase::kDecode, 64};
  const ExpertLoad none;
  const CostContext ctx{f.model, f.cluster, rc, w, none, nullptr};
  const Layout layout = Layout::of(16, 1);
  auto mean = mean_moe_seconds(ctx, layout, p, steps, "two steps");
  ASSERT_TRUE(mean.ok()) << mean.error().message;
  double each[2] = {0.0, 0.0};
  for (int s = 0; s < 2; ++s) {
    ExpertLoad load;
    load.num_experts = 64;
    load.counts = steps[static_cast<std::size_t>(s)];
    const CostContext c{f.model, f.cluster, rc,
                        w,       load,      [&p](int) -> Result<Placement> { return p; }};
    auto cost = cost_layout(c, layout);
    ASSERT_TRUE(cost.ok()) << cost.error().message;
    each[s] = cost->moe_seconds;  // the MoE blocks: what placement changes
  }
  EXPECT_DOUBLE_EQ(*mean, (each[0] + each[1]) / 2.0);
  EXPECT_GT(each[1], each[0]);
  EXPECT_FALSE(mean_moe_seconds(ctx, layout, p, {}, "none").ok());
}

// The balanced reference spreads each step's tokens of a layer evenly over the experts, one slot
// each, contiguous: the even step on the contiguous map costs exactly it, a skewed step with the
// same total on any map costs at least it (prefill: the rows decide), and experts that do not
// divide over the EP size have none.
TEST(PlacementTime, BalancedReferenceIsTheEvenSplitOfEachStep) {
  const auto& f = fixture();
  const RooflineCosts rc(f.cluster);
  const Layout layout = Layout::of(16, 1);
  const Workload w{Phase::kPrefill, 2048};
  const ExpertLoad none;
  const CostContext ctx{f.model, f.cluster, rc, w, none, nullptr};
  std::vector<double> skewed(64, 100.0);
  for (int e = 0; e < 8; ++e) skewed[static_cast<std::size_t>(e)] = 900.0;
  const double total = 56 * 100.0 + 8 * 900.0;
  const LoadSteps steps = {{skewed}};
  auto reference = balanced_reference_seconds(ctx, layout, steps, "skewed");
  ASSERT_TRUE(reference.ok()) << reference.error().message;
  const LoadSteps even = {{std::vector<double>(64, total / 64.0)}};
  auto on_even = mean_moe_seconds(ctx, layout, with_map(contiguous_map(64), 64, 16), even, "even");
  ASSERT_TRUE(on_even.ok());
  EXPECT_DOUBLE_EQ(*reference, *on_even);
  // The skewed step on the contiguous map and on a map that spreads the hot experts.
  std::vector<int> spread = contiguous_map(64);
  for (int e = 0; e < 8; ++e)
    std::swap(spread[static_cast<std::size_t>(e)], spread[static_cast<std::size_t>(e * 4 + 32)]);
  for (const auto& map : {contiguous_map(64), spread}) {
    auto t = mean_moe_seconds(ctx, layout, with_map(map, 64, 16), steps, "skewed");
    ASSERT_TRUE(t.ok());
    EXPECT_GE(*t, *reference);
  }
  auto odd = balanced_reference_seconds(ctx, Layout::of(12, 1), steps, "skewed");
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.error().message,
            "balanced reference: 64 experts do not divide evenly over ep_size 12");
  EXPECT_FALSE(balanced_reference_seconds(ctx, layout, {}, "none").ok());
}

TEST(ExpertMoves, NoCopiesBetweenEqualPlacements) {
  const auto& f = fixture();
  const auto p = with_map(contiguous_map(64), 64, 16);
  auto m = expert_moves(p, p, Layout::of(16, 1), f.cluster, 1e6);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->copies, 0);
  EXPECT_EQ(m->bytes, 0.0);
  EXPECT_EQ(m->seconds, 0.0);
  EXPECT_TRUE(m->flows.empty());
}

TEST(ExpertMoves, SwapInsideANodeAndAcrossNodes) {
  const auto& f = fixture();
  const auto from = with_map(contiguous_map(64), 64, 16);
  const double eb = f.model.expert_weight_bytes(1);
  // Experts 0 (rank 0) and 4 (rank 1) trade places: both ranks on node 0.
  auto near = contiguous_map(64);
  std::swap(near[0], near[4]);
  auto m = expert_moves(from, with_map(near, 64, 16), Layout::of(16, 1), f.cluster, eb, 26);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->copies, 2);
  EXPECT_DOUBLE_EQ(m->bytes, 2 * 26 * eb);
  EXPECT_EQ(m->cross_node, 0.0);
  ASSERT_EQ(m->flows.size(), 2U);
  EXPECT_EQ(m->flows[0].src, 0);
  EXPECT_EQ(m->flows[0].dst, 1);
  EXPECT_EQ(m->flows[1].src, 1);
  EXPECT_EQ(m->flows[1].dst, 0);
  EXPECT_GT(m->seconds, 0.0);
  EXPECT_FALSE(m->busiest_link.empty());
  // Experts 0 (rank 0, node 0) and 32 (rank 8, node 1): every byte crosses nodes, and the
  // network is slower than NVLink, so the same bytes take longer.
  auto far = contiguous_map(64);
  std::swap(far[0], far[32]);
  auto x = expert_moves(from, with_map(far, 64, 16), Layout::of(16, 1), f.cluster, eb, 26);
  ASSERT_TRUE(x.ok()) << x.error().message;
  EXPECT_DOUBLE_EQ(x->bytes, m->bytes);
  EXPECT_DOUBLE_EQ(x->cross_node, x->bytes);
  EXPECT_GT(x->seconds, m->seconds);
}

TEST(ExpertMoves, CopiesFromTheSameNodeWhenItCan) {
  const auto& f = fixture();
  // 80 slots, 5 per rank: rank r holds experts 4r..4r+3 and a redundant copy of 4r, except
  // ranks 1 (node 0) and 8 (node 1), whose redundant slot holds expert 0.
  std::vector<int> before;
  for (int r = 0; r < 16; ++r) {
    for (int k = 0; k < 4; ++k) before.push_back(4 * r + k);
    before.push_back(r == 1 || r == 8 ? 0 : 4 * r);
  }
  auto after = before;
  after[5 * 10 + 4] = 0;  // rank 10 (node 1) now holds expert 0: rank 8 has it on that node
  after[5 * 2 + 4] = 0;   // rank 2 (node 0): ranks 0 and 1 have it there
  auto m = expert_moves(with_map(before, 64, 16), with_map(after, 64, 16), Layout::of(16, 1),
                        f.cluster, 1e6);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->copies, 2);
  EXPECT_EQ(m->cross_node, 0.0);
  ASSERT_EQ(m->flows.size(), 2U);
  EXPECT_EQ(m->flows[0].src, 0);  // rank 0 before rank 1: both have sent nothing yet
  EXPECT_EQ(m->flows[0].dst, 2);
  EXPECT_EQ(m->flows[1].src, 8);
  EXPECT_EQ(m->flows[1].dst, 10);
}

TEST(ExpertMoves, EveryTpSliceIsCopied) {
  const auto& f = fixture();
  const auto from = with_map(contiguous_map(64), 64, 8);
  auto to = contiguous_map(64);
  std::swap(to[0], to[8]);  // ranks 0 and 1 of ep8 × tp2: GPUs 0,1 and 2,3
  auto m = expert_moves(from, with_map(to, 64, 8), Layout::of(8, 2), f.cluster, 1e6);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->copies, 2);
  EXPECT_DOUBLE_EQ(m->bytes, 4e6);
  for (const auto& fl : m->flows) EXPECT_EQ(fl.src % 2, fl.dst % 2);  // slice t to slice t
}

TEST(ExpertMoves, RefusesPlacementsThatDoNotMatch) {
  const auto& f = fixture();
  const auto a = with_map(contiguous_map(64), 64, 16);
  const auto b = with_map(contiguous_map(64), 64, 8);
  EXPECT_FALSE(expert_moves(a, b, Layout::of(16, 1), f.cluster, 1.0).ok());
  EXPECT_FALSE(expert_moves(a, a, Layout::of(8, 1), f.cluster, 1.0).ok());
}

TEST(AlignPlacement, UndoesAPermutationOfRanksAndNodes) {
  const auto& f = fixture();
  const auto from = with_map(contiguous_map(64), 64, 16);
  // The same blocks, node 1's first and each node's ranks rotated by three.
  std::vector<int> shuffled;
  for (int r = 0; r < 16; ++r) {
    const int node = 1 - r / 8;
    const int src = node * 8 + (r % 8 + 3) % 8;
    for (int k = 0; k < 4; ++k) shuffled.push_back(4 * src + k);
  }
  const auto next = with_map(shuffled, 64, 16);
  auto raw = expert_moves(from, next, Layout::of(16, 1), f.cluster, 1.0);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->copies, 64);
  const Placement aligned = align_placement(from, next, Layout::of(16, 1), f.cluster);
  EXPECT_EQ(aligned.physical_to_logical, from.physical_to_logical);
  // Loads per rank are the same multiset: balancedness is unchanged.
  ExpertLoad load;
  load.num_experts = 64;
  load.counts = {std::vector<double>(64)};
  for (int e = 0; e < 64; ++e) load.counts[0][static_cast<std::size_t>(e)] = 1.0 + (e * 37) % 11;
  EXPECT_DOUBLE_EQ(balance_figures(load, aligned)->balancedness,
                   balance_figures(load, next)->balancedness);
}

TEST(AlignPlacement, KeepsEachNodesExpertsTogether) {
  const auto& f = fixture();
  // Arbitrary placements: aligning only relabels whole nodes and ranks inside a node.
  std::vector<int> a = contiguous_map(64), b = contiguous_map(64);
  std::reverse(b.begin(), b.end());
  std::rotate(a.begin(), a.begin() + 5, a.end());
  const auto prev = with_map(a, 64, 16), next = with_map(b, 64, 16);
  const Placement aligned = align_placement(prev, next, Layout::of(16, 1), f.cluster);
  auto blocks = [](const Placement& p, int first, int last) {
    std::vector<std::vector<int>> out;
    for (int r = first; r < last; ++r) {
      std::vector<int> blk(p.physical_to_logical[0].begin() + 4 * r,
                           p.physical_to_logical[0].begin() + 4 * (r + 1));
      out.push_back(blk);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  const bool kept = blocks(aligned, 0, 8) == blocks(next, 0, 8);
  const bool swapped = blocks(aligned, 0, 8) == blocks(next, 8, 16);
  EXPECT_TRUE(kept || swapped);
  auto before = expert_moves(prev, next, Layout::of(16, 1), f.cluster, 1.0);
  auto after = expert_moves(prev, aligned, Layout::of(16, 1), f.cluster, 1.0);
  ASSERT_TRUE(before.ok() && after.ok());
  EXPECT_LE(after->copies, before->copies);
}

// Steps [S][1][64]: uniform counts with `hot` experts 50× as loaded.
std::vector<std::vector<double>> layer_with_hot(const std::vector<int>& hot) {
  std::vector<double> row(64, 100.0);
  for (const int e : hot) row[static_cast<std::size_t>(e)] = 5000.0;
  return {row};
}

RebalanceRequest request_for(int ep, int slots) {
  RebalanceRequest r;
  r.policy = PlacementPolicy::kEplb;
  r.config.num_gpus = ep;
  r.config.num_nodes = 2;
  r.config.num_slots = slots;
  r.config.num_groups = 1;
  r.every = {1, 2, 8};
  r.windows = {1, 2};
  return r;
}

TEST(SimulateRebalancing, ReFitsFollowADrift) {
  const auto& f = fixture();
  const RooflineCosts rc(f.cluster);
  const ExpertLoad none;
  const CostContext ctx{f.model, f.cluster, rc, {Phase::kDecode, 128}, none, nullptr};
  const auto req = request_for(16, 64);
  // Phase 1: experts 0..3 hot. The fixed placement fits phase 1; phase 2 makes the experts of
  // one of its ranks hot, so that rank carries four hot experts for the rest of the trace.
  LoadSteps steps(12);
  for (int s = 0; s < 4; ++s) steps[static_cast<std::size_t>(s)] = layer_with_hot({0, 1, 2, 3});
  ExpertLoad phase1;
  phase1.num_experts = 64;
  phase1.counts = {std::vector<double>(64, 0.0)};
  for (int s = 2; s < 4; ++s) {
    for (int e = 0; e < 64; ++e)
      phase1.counts[0][static_cast<std::size_t>(e)] += steps[2][0][static_cast<std::size_t>(e)];
  }
  auto fixed = place_experts(phase1, PlacementPolicy::kEplb, req.config);
  ASSERT_TRUE(fixed.ok());
  const auto& map = fixed->placement.physical_to_logical[0];
  const std::vector<int> rank5(map.begin() + 20, map.begin() + 24);
  for (int s = 4; s < 12; ++s) steps[static_cast<std::size_t>(s)] = layer_with_hot(rank5);

  auto r = simulate_rebalancing(steps, "drift", ctx, Layout::of(16, 1), req);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->first_scored, 2);
  ASSERT_EQ(r->schemes.size(), 1U + 3U * 2U);
  const auto& fx = r->schemes[0];
  EXPECT_EQ(fx.every, 0);
  EXPECT_EQ(fx.window, 2);
  EXPECT_EQ(fx.rebalances, 0);
  EXPECT_EQ(fx.series_step_seconds.size(), 10U);
  // Re-fitting every step on the last step: 9 rebalances, each scored step after the drift
  // balanced again one step later; the fixed placement stays on the hot rank.
  const auto& every1 = r->schemes[1];
  EXPECT_EQ(every1.every, 1);
  EXPECT_EQ(every1.window, 1);
  EXPECT_EQ(every1.rebalances, 9);
  EXPECT_GT(every1.bytes_moved, 0.0);
  EXPECT_GT(every1.mean_balancedness, fx.mean_balancedness + 0.1);
  EXPECT_LT(every1.step_seconds, fx.step_seconds);
  // every 8 with 10 scored steps: one rebalance, at scored step 8.
  EXPECT_EQ(r->schemes[5].every, 8);
  EXPECT_EQ(r->schemes[5].rebalances, 1);
  EXPECT_GT(r->schemes[5].series_move_seconds[8], 0.0);
  for (const auto& s : r->schemes) {
    double moves = 0.0, moe = 0.0;
    for (std::size_t t = 0; t < s.series_step_seconds.size(); ++t) {
      moves += s.series_move_seconds[t];
      moe += s.series_step_seconds[t];
    }
    EXPECT_DOUBLE_EQ(moves, s.move_seconds);
    EXPECT_NEAR(s.net_seconds_per_step, (moe + moves) / 10.0, 1e-15);
  }
  // The recommendation is the lowest net time; a record of 1000 forward passes makes a copy
  // cheap next to the steps it balances, so a re-fit wins.
  auto req1000 = req;
  req1000.record_steps = 1000;
  auto long_steps = simulate_rebalancing(steps, "drift", ctx, Layout::of(16, 1), req1000);
  ASSERT_TRUE(long_steps.ok());
  EXPECT_NE(long_steps->recommended, 0);
  for (const auto& s : long_steps->schemes) {
    EXPECT_GE(s.net_seconds_per_step,
              long_steps->schemes[static_cast<std::size_t>(long_steps->recommended)]
                  .net_seconds_per_step);
  }
}

TEST(SimulateRebalancing, AStationaryTraceMovesNothing) {
  const auto& f = fixture();
  const RooflineCosts rc(f.cluster);
  const ExpertLoad none;
  const CostContext ctx{f.model, f.cluster, rc, {Phase::kDecode, 128}, none, nullptr};
  LoadSteps steps(6, layer_with_hot({3, 17, 40}));
  auto r = simulate_rebalancing(steps, "flat", ctx, Layout::of(16, 1), request_for(16, 80));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->recommended, 0);
  for (const auto& s : r->schemes) {
    EXPECT_EQ(s.bytes_moved, 0.0);
    EXPECT_EQ(s.move_seconds, 0.0);
    EXPECT_DOUBLE_EQ(s.net_seconds_per_step, r->schemes[0].net_seconds_per_step);
  }
}

TEST(SimulateRebalancing, BadInputIsNamed) {
  const auto& f = fixture();
  const RooflineCosts rc(f.cluster);
  const ExpertLoad none;
  const CostContext ctx{f.model, f.cluster, rc, {Phase::kDecode, 128}, none, nullptr};
  const auto req = request_for(16, 64);
  const Layout l = Layout::of(16, 1);
  auto err = [&](const LoadSteps& steps, const RebalanceRequest& rq) {
    auto r = simulate_rebalancing(steps, "t", ctx, l, rq);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.error().message;
  };
  EXPECT_NE(err(LoadSteps(1, layer_with_hot({0})), req).find("expected a load with steps"),
            std::string::npos);
  // Windows up to 2 need at least 3 steps.
  EXPECT_NE(err(LoadSteps(2, layer_with_hot({0})), req).find("leaves none to score"),
            std::string::npos);
  auto zero = req;
  zero.every = {0};
  EXPECT_NE(err(LoadSteps(4, layer_with_hot({0})), zero).find("≥ 1"), std::string::npos);
  zero = req;
  zero.windows = {};
  EXPECT_NE(err(LoadSteps(4, layer_with_hot({0})), zero).find("at least one"), std::string::npos);
  LoadSteps wrong(4, layer_with_hot({0}));
  wrong[3][0].pop_back();
  EXPECT_NE(err(wrong, req).find("step 3"), std::string::npos);
  LoadSteps layers(4, {std::vector<double>(64, 1.0), std::vector<double>(64, 1.0)});
  EXPECT_NE(err(layers, req).find("expected 1 or the 26 MoE layers"), std::string::npos);
}

}  // namespace
}  // namespace test_rebalance
}  // namespace moeplan::planner
