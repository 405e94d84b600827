// What both front ends build their plans from: plan requests checked in the library (one set of
// limits and messages), placement runs fitted and scored on unseen steps, the compact cluster
// form read and written for editors, and traffic split into intra- and inter-node bytes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "models/json_reader.hpp"
#include "models/registry.hpp"
#include "planner/costs/roofline_costs.hpp"
#include "planner/layout_figures.hpp"
#include "planner/placement/load_io.hpp"
#include "planner/placement/place_run.hpp"
#include "planner/plan_request.hpp"

namespace moeplan::planner {
namespace test_plan_request {
namespace {

models::MoeModel model(const std::string& name) { return models::load_model(name).value(); }

TEST(PlanRequest, DefaultsPerPhaseAndTheGivenChoices) {
  const auto m = model("qwen2-57b-a14b");
  const auto c = load_cluster("2x-hgx-h200").value();
  PlanChoices choices;
  auto r = make_plan_request(m, c, choices, {}, false);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->workload.phase, Phase::kPrefill);
  EXPECT_EQ(r->workload.tokens_per_gpu, kDefaultPrefillTokensPerGpu);
  EXPECT_EQ(r->num_gpus, 0);
  EXPECT_EQ(r->dispatchers.size(), 5U);  // every dispatcher; enumeration keeps the legal ones
  EXPECT_EQ(r->tbo, std::vector<bool>{false});
  EXPECT_FALSE(static_cast<bool>(r->placement));  // contiguous
  choices.phase = "decode";
  choices.num_gpus = 8;
  choices.dispatchers = {"a2av", "a2av", "allgather"};
  r = make_plan_request(m, c, choices, {}, false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->workload.tokens_per_gpu, kDefaultDecodeBatchPerGpu);
  EXPECT_EQ(r->num_gpus, 8);
  EXPECT_EQ(r->dispatchers, (std::vector<Dispatcher>{Dispatcher::kA2av, Dispatcher::kAllGather}));
  choices.tbo = "both";
  choices.ll_max_tokens = 256;
  r = make_plan_request(m, c, choices, {}, false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tbo, (std::vector<bool>{false, true}));
  EXPECT_EQ(r->workload.ll_max_tokens_per_rank, 256);
}

TEST(PlanRequest, ErrorsNameTheInput) {
  const auto m = model("qwen2-57b-a14b");
  const auto c = load_cluster("2x-hgx-h200").value();
  const auto error_of = [&](PlanChoices ch, bool load_given = false) {
    auto r = make_plan_request(m, c, ch, {}, load_given);
    EXPECT_FALSE(r.ok());
    return r.ok() ? Error{} : r.error();
  };
  PlanChoices ch;
  ch.phase = "train";
  EXPECT_EQ(error_of(ch).input, "phase");
  ch = {};
  ch.tokens_per_gpu = 0;
  EXPECT_EQ(error_of(ch).message, "tokens: expected a positive number of tokens per GPU, got 0");
  ch = {};
  ch.num_gpus = 17;
  EXPECT_EQ(error_of(ch).message,
            "gpus: expected 1..16 (the GPUs of cluster '2x-hgx-h200'), got 17");
  ch = {};
  ch.dispatchers = {"deepep"};
  EXPECT_EQ(error_of(ch).input, "dispatcher");
  ch = {};
  ch.tbo = "yes";
  EXPECT_EQ(error_of(ch).message, "tbo: expected off, on or both, got 'yes'");
  ch = {};
  ch.ll_max_tokens = 0;
  EXPECT_EQ(error_of(ch).message, "ll-max-tokens: expected 1..65536 tokens per rank, got 0");
  ch = {};
  ch.redundancy = Redundancy::per_rank(kMaxRedundantPerRank + 1);
  EXPECT_EQ(error_of(ch).input, "redundant");
  ch = {};
  ch.placement = "eplb";
  const Error no_load = error_of(ch);
  EXPECT_EQ(no_load.message,
            "placement eplb and {redundant} need an expert load ({load} FILE|SPEC)");
  ch.redundancy = Redundancy::per_rank(1);
  ch.placement = "contiguous";
  EXPECT_EQ(error_of(ch, true).input, "redundant");
  ch = {};
  ch.osl = 10;
  EXPECT_EQ(error_of(ch).input, "osl");
  ch = {};
  ch.mem_fraction = 0.5;
  EXPECT_EQ(error_of(ch).input, "mem_fraction");
  ch = {};
  ch.isl = 1024;
  ch.phase = "decode";
  EXPECT_EQ(error_of(ch).input, "osl");  // decode needs output tokens
  ch.osl = 131072;
  EXPECT_EQ(error_of(ch).input, "isl");  // past max_position_embeddings (131072)
  ch.osl = 1;
  ch.mem_fraction = 1.01;
  EXPECT_EQ(error_of(ch).input, "mem_fraction");
  ch.mem_fraction = 1.0;
  auto ok = make_plan_request(m, c, ch, {}, false);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->workload.isl, 1024);
  EXPECT_EQ(ok->workload.osl, 1);
  EXPECT_DOUBLE_EQ(ok->workload.mem_fraction, 1.0);
  ch = {};
  ch.placement = "greedy";
  EXPECT_EQ(error_of(ch).input, "placement");
  ch = {};
  ch.placement = "/no/such/placement.json";
  EXPECT_NE(error_of(ch).message.find("/no/such/placement.json"), std::string::npos);
}

/// A plan of `m` on `c` with eplb and `redundancy` for a one-row power-law load.
Result<Plan> redundant_plan(const models::MoeModel& m, const Cluster& c, Redundancy redundancy,
                            const std::string& phase, std::optional<int> gpus) {
  PlanChoices ch;
  ch.phase = phase;
  ch.num_gpus = gpus;
  ch.dispatchers = {"a2av"};
  ch.placement = "eplb";
  ch.redundancy = redundancy;
  auto load = synthetic_load("powerlaw:alpha=1.2,shuffle=1,seed=1,layers=1", &m);
  if (!load) return load.error();
  auto req = make_plan_request(m, c, ch, load->load, true);
  if (!req) return req.error();
  const RooflineCosts costs(c);
  return make_plan(m, c, costs, *req);
}

const LayoutCost* find_layout(const Plan& p, int ep, int tp) {
  for (const auto& l : p.layouts) {
    if (l.layout.ep_size == ep && l.layout.tp_size == tp) return &l;
  }
  return nullptr;
}

TEST(PlanRequest, DeepSeekV3DecodeOnEp144WithRedundantSlots) {
  // DeepSeek's published decode deployment: EP144 over 18 nodes, 256 + 32 = 288 slots.
  const auto m = model("deepseek-v3");
  const auto c = load_cluster("128x-hgx-h200").value();
  const auto none = redundant_plan(m, c, Redundancy{}, "decode", 144);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("has no legal layout on 144 GPUs"), std::string::npos);
  const auto plan = redundant_plan(m, c, Redundancy::total(32), "decode", 144);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const LayoutCost* ep144 = find_layout(*plan, 144, 1);
  ASSERT_NE(ep144, nullptr);
  EXPECT_EQ(ep144->num_slots, 288);
  EXPECT_TRUE(ep144->feasible);
  EXPECT_EQ(find_layout(*plan, 72, 2)->num_slots, 288);  // 4 per GPU
  // Each slot costs its expert's bytes: 3 slots per GPU hold 3/2 the expert weights of 2.
  const auto more = redundant_plan(m, c, Redundancy::total(3 * 144 - 256), "decode", 144);
  ASSERT_TRUE(more.ok()) << more.error().message;
  const LayoutCost* three = find_layout(*more, 144, 1);
  ASSERT_NE(three, nullptr);
  EXPECT_EQ(three->num_slots, 432);
  EXPECT_DOUBLE_EQ(three->memory.experts, 1.5 * ep144->memory.experts);
  // In balance: the placement fills the redundant slots, so the busiest rank serves less.
  EXPECT_LE(three->imbalance, ep144->imbalance);
  // auto: the fewest that make EP144 legal are DeepSeek's 32.
  const auto autop = redundant_plan(m, c, Redundancy::automatic(), "decode", 144);
  ASSERT_TRUE(autop.ok()) << autop.error().message;
  EXPECT_EQ(find_layout(*autop, 144, 1)->num_slots, 288);
  EXPECT_EQ(find_layout(*autop, 9, 16)->num_slots, 261);  // 256 + 5: 29 per GPU
  // Slots that cannot divide: total:30 makes nothing legal on 144 GPUs, and the error says why.
  const auto off = redundant_plan(m, c, Redundancy::total(30), "decode", 144);
  ASSERT_FALSE(off.ok());
  EXPECT_NE(
      off.error().message.find("(num_experts + redundant) % ep_size == 0: (256 + 30) % 3 = 1"),
      std::string::npos)
      << off.error().message;
}

// A total count fits some GPU counts only: DeepSeek's 256 + 32 slots divide over 144 EP ranks
// but not over 64 or 128, so on 128 GPUs the widest layouts drop out; the reasons say which and
// why. Counts per rank (or auto) leave nothing out, and neither does a total that divides.
TEST(PlanRequest, ReasonsNameTheEpSizesATotalRedundantCountLeavesOut) {
  const auto m = model("deepseek-v3");
  const auto c = load_cluster("16x-hgx-h200").value();
  const auto reason = [](const Plan& p) {
    for (const auto& r : p.reasons) {
      if (r.find(" left out: ") != std::string::npos) return r;
    }
    return std::string();
  };
  const auto total = redundant_plan(m, c, Redundancy::total(32), "decode", 128);
  ASSERT_TRUE(total.ok()) << total.error().message;
  EXPECT_EQ(find_layout(*total, 128, 1), nullptr);
  EXPECT_EQ(reason(*total),
            "ep64×tp2, ep128×tp1 left out: 256 experts + 32 redundant slots (288) do not divide "
            "evenly over 64 or 128 EP ranks ({redundant} total:32); they are legal without "
            "redundant slots, and a count per EP rank ({redundant} N) or {redundant} auto keeps "
            "them");
  for (const Redundancy r :
       {Redundancy::per_rank(1), Redundancy::automatic(), Redundancy::total(128)}) {
    const auto p = redundant_plan(m, c, r, "decode", 128);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_NE(find_layout(*p, 128, 1), nullptr) << r.text();
    EXPECT_EQ(reason(*p), "") << r.text();
  }
}

TEST(PlanRequest, MoreRedundancyThanMemoryAllowsIsOneError) {
  const auto m = model("qwen2-57b-a14b");
  const auto c = load_cluster("2x-hgx-h200").value();
  // On 2 GPUs 1000 replicas per rank fit on neither ep1×tp2 nor ep2×tp1 (on 16, ep1×tp16 holds
  // them: the others are then shown as not fitting, costed in memory like any layout).
  const auto r = redundant_plan(m, c, Redundancy::per_rank(1000), "prefill", 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().input, "redundant");
  const std::string& msg = r.error().message;
  EXPECT_EQ(msg.rfind("redundant 1000: ", 0), 0U) << msg;
  const auto at = msg.find("expected at most ");
  ASSERT_NE(at, std::string::npos) << msg;
  const int most = std::stoi(msg.substr(at + 17));
  ASSERT_GE(most, 1);
  // The most it names fits on some layout; one more per rank fits on none of the same shape.
  const auto fits = redundant_plan(m, c, Redundancy::per_rank(most), "prefill", 2);
  ASSERT_TRUE(fits.ok()) << fits.error().message;
  EXPECT_GE(fits->recommended, 0);
  const auto over = redundant_plan(m, c, Redundancy::per_rank(most + 1), "prefill", 2);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().input, "redundant");
  // total:R names its limit in the same units.
  const auto total = redundant_plan(m, c, Redundancy::total(1 << 16), "prefill", 2);
  ASSERT_FALSE(total.ok());
  EXPECT_NE(total.error().message.find("expected at most total:"), std::string::npos)
      << total.error().message;
}

TEST(PlanRequest, PolicyFitFollowsTheClusterAndModel) {
  const auto m = model("deepseek-v3");
  const auto c = load_cluster("16x-hgx-h200").value();
  const PolicyFit f = policy_fit(m, c, PlacementPolicy::kEplb, Redundancy::per_rank(2), 256);
  EXPECT_EQ(f.gpus_per_node, 8);
  EXPECT_EQ(f.num_groups, 8);
  EXPECT_EQ(f.redundancy.kind, Redundancy::Kind::kPerRank);
  EXPECT_EQ(f.redundancy.count, 2);
  EXPECT_EQ(f.pairs_per_step, 256 * 8);
  PlanChoices ch;
  ch.placement = "eplb";
  ch.redundancy = Redundancy::per_rank(2);
  auto r =
      make_plan_request(m, c, ch, ExpertLoad::uniform(m.num_moe_layers(), m.num_experts), true);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(static_cast<bool>(r->placement));
  auto p = r->placement(16);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->num_slots, m.num_experts + 2 * 16);
}

TEST(PlaceRun, FitsOnTheFirstStepsAndScoresTheRest) {
  // 4 steps of 1 layer × 8 experts: fit on 2, score on 2.
  std::vector<std::vector<std::vector<double>>> steps;
  for (int s = 0; s < 4; ++s) steps.push_back({{8, 1, 1, 1, 6, 1, 1, 1}});
  LoadData data;
  data.steps = steps;
  data.load.num_experts = 8;
  data.load.source = "test";
  data.load.counts = {{32, 4, 4, 4, 24, 4, 4, 4}};
  PlaceRequest r;
  r.policy = PlacementPolicy::kEplb;
  r.num_gpus = 4;
  r.num_slots = 12;
  auto out = run_placement(data, r, nullptr);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(out->num_file_steps, 4);
  EXPECT_EQ(out->fit_steps, 2);
  EXPECT_EQ(out->fit.counts.front(), (std::vector<double>{16, 2, 2, 2, 12, 2, 2, 2}));
  ASSERT_TRUE(out->held_out.has_value());
  EXPECT_EQ(out->held_out->num_steps, 2);
  EXPECT_FALSE(out->sampled.has_value());
  r.fit_steps = 5;
  EXPECT_EQ(run_placement(data, r, nullptr).error().input, "fit_steps");
  r.fit_steps = -1;
  r.num_gpus = 0;
  EXPECT_EQ(run_placement(data, r, nullptr).error().message, "place: expected {gpus} N with N ≥ 1");
}

// A refinement of best's map gets EPLB's map and two disjoint sets of steps — the halves of
// the fit steps when there are 2 × kPlaceRefineSteps of them, else drawn ones — and the map it
// returns is the one scored (with its logical maps and its time added).
TEST(PlaceRun, RefineGetsEplbAndSearchAndCheckStepsAndItsMapIsScored) {
  std::vector<std::vector<std::vector<double>>> steps;
  for (int s = 0; s < 160; ++s) {
    steps.push_back({{8.0 + s, 1, 1, 1, 6, 1, 1, 1}});  // step s has 8 + s on expert 0
  }
  LoadData data;
  data.steps = steps;
  data.load.num_experts = 8;
  data.load.source = "test";
  data.load.counts = {{8, 1, 1, 1, 6, 1, 1, 1}};
  PlaceRequest r;
  r.policy = PlacementPolicy::kBest;
  r.num_gpus = 4;
  r.num_slots = 12;
  r.fit_steps = 130;  // halves from 0 and from 65
  std::optional<Placement> eplb_seen;
  std::vector<std::vector<std::vector<double>>> search_seen, check_seen;
  const PlaceRefine refine =
      [&](const PlaceRefineInput& in) -> Result<std::pair<Placement, double>> {
    eplb_seen = in.eplb;
    search_seen = in.search;
    check_seen = in.check;
    EXPECT_EQ(in.outcome.placed.placement.policy, "best");
    Placement p = in.eplb;
    p.policy = "refined";
    return std::pair<Placement, double>{p, 1.5};
  };
  auto out = run_placement(data, r, nullptr, refine);
  ASSERT_TRUE(out.ok()) << out.error().message;
  ASSERT_TRUE(eplb_seen.has_value());
  EXPECT_EQ(eplb_seen->policy, "eplb");
  ASSERT_EQ(static_cast<int>(search_seen.size()), kPlaceRefineSteps);
  ASSERT_EQ(static_cast<int>(check_seen.size()), kPlaceRefineSteps);
  for (int s = 0; s < kPlaceRefineSteps; ++s) {
    EXPECT_EQ(search_seen[static_cast<std::size_t>(s)], steps[static_cast<std::size_t>(s)]);
    EXPECT_EQ(check_seen[static_cast<std::size_t>(s)], steps[static_cast<std::size_t>(65 + s)]);
  }
  EXPECT_EQ(out->placed.placement.policy, "refined");
  EXPECT_EQ(out->placed.placement.physical_to_logical, eplb_seen->physical_to_logical);
  EXPECT_GE(out->placed.seconds, 1.5);
  ASSERT_EQ(out->placed.logical_count.size(), 1U);
  EXPECT_EQ(out->placed.logical_count[0][0] + out->placed.logical_count[0][4],
            6);  // 2 hot: 4 extra
  ASSERT_TRUE(out->held_out.has_value());
  EXPECT_EQ(out->held_out->num_steps, 30);

  // Fewer fit steps: drawn steps, different for search and check, none of them file steps.
  r.fit_steps = 40;
  out = run_placement(data, r, nullptr, refine);
  ASSERT_TRUE(out.ok()) << out.error().message;
  ASSERT_EQ(static_cast<int>(search_seen.size()), kPlaceRefineSteps);
  EXPECT_NE(search_seen, check_seen);
  EXPECT_EQ(search_seen[0].size(), 1U);
  EXPECT_EQ(search_seen[0][0].size(), 8U);
  // Another policy cannot be refined.
  r.policy = PlacementPolicy::kEplb;
  auto bad = run_placement(data, r, nullptr, refine);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().input, "policy");
}

TEST(CompactCluster, ReadAndWrittenAsTheParserReadsIt) {
  const auto c = load_cluster("2x-hgx-h200").value();
  auto j = load_json_file(c.info().source).value();
  auto compact = read_compact_cluster(j, c.info().source);
  ASSERT_TRUE(compact.ok()) << compact.error().message;
  EXPECT_EQ(compact->nodes, 2);
  EXPECT_EQ(compact->gpus_per_node, 8);
  EXPECT_EQ(compact->network, "rail_optimized");
  // An edit written back parses to the edited cluster; other keys (name) are kept.
  compact->nodes = 4;
  compact->network = "fat_tree";
  const auto edited = compact_cluster_json(*compact, j);
  EXPECT_EQ(edited.at("name"), j.at("name"));
  auto back = parse_cluster(edited, "edited");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->num_gpus(), 32);
  EXPECT_EQ(back->info().form, "compact/fat_tree");
  // One node without a network drops inter_node.
  compact->nodes = 1;
  compact->network = "none";
  const auto single = compact_cluster_json(*compact, j);
  EXPECT_FALSE(single.contains("inter_node"));
  EXPECT_TRUE(parse_cluster(single, "single").ok());
  EXPECT_FALSE(read_compact_cluster(nlohmann::json{{"vertices", 1}}, "x").ok());
}

TEST(TrafficTotals, SplitsByNode) {
  const std::vector<std::vector<double>> m = {
      {0, 1, 10, 100}, {2, 0, 20, 200}, {3, 30, 0, 300}, {4, 40, 400, 0}};
  const TrafficTotals t = traffic_totals(m, 2);
  EXPECT_DOUBLE_EQ(t.intra_node, 1 + 2 + 300 + 400);
  EXPECT_DOUBLE_EQ(t.inter_node, 10 + 100 + 20 + 200 + 3 + 30 + 4 + 40);
  EXPECT_DOUBLE_EQ(traffic_totals(m, 4).inter_node, 0.0);
}

}  // namespace
}  // namespace test_plan_request
}  // namespace moeplan::planner
