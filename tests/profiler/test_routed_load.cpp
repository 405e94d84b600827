// Routed synthetic loads: the model's router on random hidden states.
#include <gtest/gtest.h>

#include <numeric>

#include "models/registry.hpp"
#include "profiler/routed_load.hpp"

namespace moeplan::profiler {
namespace test_routed_load {
namespace {

TEST(RoutedLoad, CountsEveryTopkSelectionDeterministically) {
  auto m = models::load_model("qwen3-30b-a3b");
  ASSERT_TRUE(m.ok());
  auto a = routed_load("routed:tokens=64,layers=3,seed=5", *m);
  ASSERT_TRUE(a.ok()) << a.error().message;
  ASSERT_EQ(a->load.num_layers(), 3);
  EXPECT_EQ(a->load.num_experts, 128);
  for (const auto& row : a->load.counts) {
    EXPECT_DOUBLE_EQ(std::accumulate(row.begin(), row.end(), 0.0), 64.0 * 8.0);
    // No expert can be picked twice by one token: at most 64 selections each.
    for (const double c : row) EXPECT_LE(c, 64.0);
  }
  EXPECT_NE(a->load.counts[0], a->load.counts[1]);  // each layer has its own router
  auto b = routed_load("routed:tokens=64,layers=3,seed=5", *m);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->load.counts, b->load.counts);
  auto c = routed_load("routed:tokens=64,layers=3,seed=6", *m);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->load.counts, c->load.counts);
}

TEST(RoutedLoad, GroupLimitedRoutingUsesOnlyKeptGroups) {
  // DeepSeek-V3: each token keeps 4 of 8 groups; with one token every selection lies in at most
  // 4 groups of 32 experts.
  auto m = models::load_model("deepseek-v3");
  ASSERT_TRUE(m.ok());
  auto one = routed_load("routed:tokens=1,layers=2", *m);
  ASSERT_TRUE(one.ok()) << one.error().message;
  for (const auto& row : one->load.counts) {
    int groups_used = 0;
    for (int g = 0; g < 8; ++g) {
      double in_group = 0.0;
      for (int e = g * 32; e < (g + 1) * 32; ++e) in_group += row[static_cast<std::size_t>(e)];
      groups_used += in_group > 0.0 ? 1 : 0;
    }
    EXPECT_LE(groups_used, 4);
    EXPECT_DOUBLE_EQ(std::accumulate(row.begin(), row.end(), 0.0), 8.0);
  }
  // Fewer layers than the model's MoE layers: rows are numbered as given.
  EXPECT_EQ(one->layer_ids, (std::vector<int>{0, 1}));
}

TEST(RoutedLoad, BadSpecs) {
  auto m = models::load_model("mixtral-8x7b");
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(routed_load("routed:tokens=0", *m).ok());
  EXPECT_FALSE(routed_load("routed:alpha=1", *m).ok());
  EXPECT_FALSE(routed_load("routed:tokens=1x", *m).ok());
  EXPECT_FALSE(routed_load("uniform", *m).ok());
  EXPECT_TRUE(is_routed_spec("routed"));
  EXPECT_TRUE(is_routed_spec("routed:tokens=4"));
  EXPECT_FALSE(is_routed_spec("routedx"));
}

}  // namespace
}  // namespace test_routed_load
}  // namespace moeplan::profiler
