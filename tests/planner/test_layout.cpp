// Layout legality and enumeration: divisibility for 64, 60, 128, 256 and 8 experts, a 24-GPU
// world, rank mappings and attention DP.
#include <gtest/gtest.h>

#include <set>

#include "models/registry.hpp"
#include "planner/layout.hpp"

namespace moeplan::planner {
namespace test_layout {
namespace {

models::MoeModel model(const std::string& name) {
  auto m = models::load_model(name);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return std::move(m).value();
}

std::set<std::pair<int, int>> legal_shapes(const Enumeration& e) {
  std::set<std::pair<int, int>> out;
  for (const auto& l : e.layouts) out.insert({l.ep_size, l.tp_size});
  return out;
}

TEST(Layout, QwenMoe60ExpertsDivisibility) {
  const auto m = model("qwen1.5-moe-a2.7b");  // E = 60, I = 1408, shared 5632
  std::set<int> ep_ok;
  for (int ep = 1; ep <= 64; ++ep) {
    if (!layout_rule_violation(m, ep, 1)) ep_ok.insert(ep);
  }
  EXPECT_EQ(ep_ok, (std::set<int>{1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60}));
  // On 60 GPUs tp = 60 / ep must also divide 1408 = 2^7·11 and 5632 = 2^9·11: tp ∈ {1, 2, 4}.
  EnumerateOptions opt;
  opt.num_gpus = 60;
  const auto e = enumerate_layouts(m, opt);
  EXPECT_EQ(legal_shapes(e), (std::set<std::pair<int, int>>{{15, 4}, {30, 2}, {60, 1}}));
  EXPECT_EQ(e.excluded.size(), 9U);  // 12 divisors of 60, 3 legal
  EXPECT_EQ(e.excluded.front().ep_size, 1);
  EXPECT_EQ(e.excluded.front().rule, "moe_intermediate_size % tp_size == 0: 1408 % 60 = 28");
  EXPECT_EQ(layout_rule_violation(m, 8, 1).value(), "num_experts % ep_size == 0: 60 % 8 = 4");
}

TEST(Layout, Qwen2With64ExpertsOn16Gpus) {
  const auto m = model("qwen2-57b-a14b");  // E = 64, I = 2560, shared 20480
  EnumerateOptions opt;
  opt.num_gpus = 16;
  const auto e = enumerate_layouts(m, opt);
  EXPECT_EQ(legal_shapes(e),
            (std::set<std::pair<int, int>>{{1, 16}, {2, 8}, {4, 4}, {8, 2}, {16, 1}}));
  EXPECT_TRUE(e.excluded.empty());
  // 3 dispatchers × (3 shapes with two mappings + 2 shapes with one), and deepep_ll on 16x1
  // (deepep_normal needs the cluster's nodes: none given).
  EXPECT_EQ(e.layouts.size(), 25U);
  EXPECT_EQ(layout_rule_violation(m, 1, 3).value(),
            "moe_intermediate_size % tp_size == 0: 2560 % 3 = 1");
}

TEST(Layout, SharedExpertWidthRule) {
  auto m = model("qwen2-57b-a14b");
  m.moe_intermediate_size = 2560 * 3;  // make I divisible by 3 so only the shared rule binds
  EXPECT_EQ(layout_rule_violation(m, 1, 3).value(),
            "shared expert width % tp_size == 0: 20480 % 3 = 2");
}

TEST(Layout, Qwen3With128ExpertsOn24Gpus) {
  const auto m = model("qwen3-30b-a3b");  // E = 128, I = 768, no shared expert
  EnumerateOptions opt;
  opt.num_gpus = 24;
  const auto e = enumerate_layouts(m, opt);
  EXPECT_EQ(legal_shapes(e), (std::set<std::pair<int, int>>{{1, 24}, {2, 12}, {4, 6}, {8, 3}}));
  std::set<int> excluded_ep;
  for (const auto& x : e.excluded) {
    excluded_ep.insert(x.ep_size);
    EXPECT_EQ(x.rule.rfind("num_experts % ep_size == 0: 128 % ", 0), 0U) << x.rule;
  }
  EXPECT_EQ(excluded_ep, (std::set<int>{3, 6, 12, 24}));
}

TEST(Layout, DeepSeekV3With256ExpertsOn24GpusHasNoLegalLayout) {
  const auto m = model("deepseek-v3");  // E = 256, I = 2048 = 2^11, shared 2048
  EnumerateOptions opt;
  opt.num_gpus = 24;
  const auto e = enumerate_layouts(m, opt);
  EXPECT_TRUE(e.layouts.empty());
  EXPECT_EQ(e.excluded.size(), 8U);  // every divisor of 24
  opt.num_gpus = 256;
  const auto e256 = enumerate_layouts(m, opt);
  EXPECT_EQ(legal_shapes(e256).size(), 9U);  // ep = 1, 2, ..., 256
}

TEST(Layout, MixtralWith8Experts) {
  const auto m = model("mixtral-8x7b");  // E = 8, I = 14336 = 2^11·7
  EnumerateOptions opt;
  opt.num_gpus = 8;
  EXPECT_EQ(legal_shapes(enumerate_layouts(m, opt)),
            (std::set<std::pair<int, int>>{{1, 8}, {2, 4}, {4, 2}, {8, 1}}));
  opt.num_gpus = 24;
  EXPECT_TRUE(enumerate_layouts(m, opt).layouts.empty());
  opt.num_gpus = 16;
  const auto e16 = enumerate_layouts(m, opt);
  EXPECT_EQ(legal_shapes(e16), (std::set<std::pair<int, int>>{{1, 16}, {2, 8}, {4, 4}, {8, 2}}));
  ASSERT_EQ(e16.excluded.size(), 1U);
  EXPECT_EQ(e16.excluded[0].rule, "num_experts % ep_size == 0: 8 % 16 = 8");
}

TEST(Layout, RankMappings) {
  Layout l;
  l.num_gpus = 8;
  l.ep_size = 4;
  l.tp_size = 2;
  l.mapping = RankMapping::kTpInnermost;
  EXPECT_EQ(l.ep_groups(), (std::vector<std::vector<int>>{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(l.tp_groups().front(), (std::vector<int>{0, 1}));
  l.mapping = RankMapping::kEpInnermost;
  EXPECT_EQ(l.ep_groups(), (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(l.tp_groups().front(), (std::vector<int>{0, 4}));
  l.dp_size = 2;
  l.num_gpus = 16;
  EXPECT_EQ(l.ep_groups().size(), 4U);
  EXPECT_EQ(l.ep_groups().back(), (std::vector<int>{12, 13, 14, 15}));
  EXPECT_EQ(l.shape_name(), "dp2×ep4×tp2");
}

TEST(Layout, AttentionDpOnlyWhenAsked) {
  const auto m = model("qwen3-30b-a3b");
  EnumerateOptions opt;
  opt.num_gpus = 8;
  opt.dispatchers = {Dispatcher::kA2av};
  const auto plain = enumerate_layouts(m, opt);
  for (const auto& l : plain.layouts) EXPECT_EQ(l.dp_size, 1);
  opt.attention_dp = true;
  const auto dp = enumerate_layouts(m, opt);
  std::set<int> dps;
  for (const auto& l : dp.layouts) {
    dps.insert(l.dp_size);
    EXPECT_EQ(l.dp_size * l.ep_size * l.tp_size, 8);
  }
  EXPECT_EQ(dps, (std::set<int>{1, 2, 4, 8}));
}

TEST(Layout, RedundantSlotsOnDeepSeekV3With144Gpus) {
  const auto m = model("deepseek-v3");  // E = 256, I = 2048 (tp must divide it)
  EnumerateOptions opt;
  opt.num_gpus = 144;
  opt.dispatchers = {Dispatcher::kA2av};
  // Without redundant slots only ep16 divides 256, and tp 9 does not divide 2048.
  const auto plain = enumerate_layouts(m, opt);
  EXPECT_TRUE(plain.layouts.empty());
  // DeepSeek's deployment: 256 + 32 = 288 slots; 288 % ep == 0 and 2048 % tp == 0.
  opt.redundancy = Redundancy::total(32);
  const auto dsv3 = enumerate_layouts(m, opt);
  EXPECT_EQ(legal_shapes(dsv3),
            (std::set<std::pair<int, int>>{{9, 16}, {18, 8}, {36, 4}, {72, 2}, {144, 1}}));
  bool named = false;
  for (const auto& x : dsv3.excluded) {
    if (x.ep_size == 16) {
      named = true;
      EXPECT_EQ(x.rule, "moe_intermediate_size % tp_size == 0: 2048 % 9 = 5");
    }
  }
  EXPECT_TRUE(named);
  // total:30 leaves ep144 illegal, and the rule says why.
  opt.redundancy = Redundancy::total(30);
  const auto off = enumerate_layouts(m, opt);
  for (const auto& l : off.layouts) EXPECT_NE(l.ep_size, 144);
  EXPECT_EQ(layout_rule_violation(m, 144, 1, 30).value(),
            "(num_experts + redundant) % ep_size == 0: (256 + 30) % 144 = 142");
  // None of the layouts total:30 excludes on 144 GPUs would be legal without redundant slots:
  // ep16×tp9 breaks (256 + 30) % 16 first, but 2048 % 9 too.
  for (const auto& x : off.excluded) {
    EXPECT_FALSE(x.legal_without_redundancy) << x.ep_size << "x" << x.tp_size << ": " << x.rule;
  }
  // On 128 GPUs total:32 excludes ep64×tp2 and ep128×tp1 for their slots alone.
  opt.num_gpus = 128;
  opt.redundancy = Redundancy::total(32);
  std::set<std::pair<int, int>> only_by_slots;
  for (const auto& x : enumerate_layouts(m, opt).excluded) {
    if (x.legal_without_redundancy) only_by_slots.insert({x.ep_size, x.tp_size});
  }
  EXPECT_EQ(only_by_slots, (std::set<std::pair<int, int>>{{64, 2}, {128, 1}}));
  opt.num_gpus = 144;
  // auto: each EP size its own fewest slots; every EP size whose tp divides 2048 is legal.
  opt.redundancy = Redundancy::automatic();
  EXPECT_EQ(legal_shapes(enumerate_layouts(m, opt)),
            (std::set<std::pair<int, int>>{{9, 16}, {18, 8}, {36, 4}, {72, 2}, {144, 1}}));
  // One per EP rank keeps the old rule: E % ep == 0.
  opt.redundancy = Redundancy::per_rank(1);
  EXPECT_TRUE(enumerate_layouts(m, opt).layouts.empty());
}

TEST(Layout, DispatcherNames) {
  for (const Dispatcher d : kAllDispatchers) {
    EXPECT_EQ(*parse_dispatcher(dispatcher_name(d)), d);
  }
  EXPECT_FALSE(parse_dispatcher("deepep").ok());
}

}  // namespace
}  // namespace test_layout
}  // namespace moeplan::planner
