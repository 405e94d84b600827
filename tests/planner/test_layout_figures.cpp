// layout_figures: policy placement per EP size, expert × GPU loads, the layer traffic matrix.
#include <gtest/gtest.h>

#include <numeric>

#include "models/registry.hpp"
#include "planner/costs/roofline_costs.hpp"
#include "planner/layout_figures.hpp"
#include "planner/placement/load_io.hpp"
#include "planner/placement/placement_metrics.hpp"

namespace moeplan::planner {
namespace test_layout_figures {
namespace {

TEST(LayoutFigures, ExpertGpuLoadsSplitReplicasAndSumToGpuLoads) {
  const std::vector<double> counts = {4, 2, 1, 1};
  const std::vector<int> map = {0, 1, 2, 0, 3, 1};  // e0 and e1 twice
  const auto m = expert_gpu_loads(counts, map, 2);
  ASSERT_EQ(m.size(), 4U);
  EXPECT_DOUBLE_EQ(m[0][0], 2.0);
  EXPECT_DOUBLE_EQ(m[0][1], 2.0);
  EXPECT_DOUBLE_EQ(m[1][0], 1.0);
  EXPECT_DOUBLE_EQ(m[2][0], 1.0);
  EXPECT_DOUBLE_EQ(m[3][1], 1.0);
  const auto loads = gpu_loads(counts, map, 2);
  for (std::size_t g = 0; g < 2; ++g) {
    double sum = 0.0;
    for (const auto& row : m) sum += row[g];
    EXPECT_DOUBLE_EQ(sum, loads[g]);
  }
}

TEST(LayoutFigures, PolicyConfigNodesAndSlots) {
  PolicyFit fit;
  fit.policy = PlacementPolicy::kEplb;
  fit.gpus_per_node = 8;
  fit.redundancy = Redundancy::per_rank(1);
  const auto c16 = policy_config(fit, 64, 16);
  EXPECT_EQ(c16.num_nodes, 2);
  EXPECT_EQ(c16.num_slots, 80);
  EXPECT_EQ(policy_config(fit, 64, 4).num_nodes, 1);
  fit.policy = PlacementPolicy::kContiguous;
  EXPECT_EQ(policy_config(fit, 64, 16).num_slots, 64);  // contiguous places no replicas
}

TEST(LayoutFigures, PlacementFnMatchesPlaceForEp) {
  auto load = synthetic_load("powerlaw:alpha=1.2,shuffle=1,layers=3,experts=64");
  ASSERT_TRUE(load) << load.error().message;
  PolicyFit fit;
  fit.policy = PlacementPolicy::kEplb;
  fit.redundancy = Redundancy::per_rank(1);
  const auto fn = policy_placement_fn(load->load, fit);
  auto a = fn(8);
  auto b = place_for_ep(load->load, fit, 8);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->physical_to_logical, b->placement.physical_to_logical);
  EXPECT_EQ(a->num_slots, 72);
}

TEST(LayoutFigures, UniformA2avTrafficIsEvenAndMatchesTheDispatchBytes) {
  auto model = models::load_model("qwen2-57b-a14b");
  auto cluster = load_cluster("2x-hgx-h200");
  ASSERT_TRUE(model && cluster);
  const RooflineCosts costs(*cluster);
  const ExpertLoad load = ExpertLoad::uniform(1, model->num_experts);
  const CostContext ctx{*model, *cluster, costs, Workload{}, load, {}};
  Layout l;
  l.num_gpus = 16;
  l.ep_size = 16;
  l.tp_size = 1;
  l.dispatcher = Dispatcher::kA2av;
  auto m = layer_traffic(ctx, l, 0);
  ASSERT_TRUE(m) << m.error().message;
  ASSERT_EQ(m->size(), 16U);
  // Dispatch and combine each move Tg·k·H·b / ep bytes between every pair, plus the count
  // exchange's E int32 counts split evenly over the ep ranks.
  const double per_pair = 2.0 * 4096.0 * model->num_experts_per_tok *
                              static_cast<double>(model->hidden_size) * 2.0 / 16.0 +
                          model->num_experts * 4.0 / 16.0;
  for (std::size_t i = 0; i < 16; ++i) {
    for (std::size_t j = 0; j < 16; ++j) {
      EXPECT_NEAR((*m)[i][j], i == j ? 0.0 : per_pair, per_pair * 1e-12) << i << "," << j;
    }
  }
  EXPECT_FALSE(layer_traffic(ctx, l, model->num_moe_layers()));
}

}  // namespace
}  // namespace test_layout_figures
}  // namespace moeplan::planner
