// Per-slot and per-rank token counts implied by a load and a placement.
#include <gtest/gtest.h>

#include "planner/placement/expert_load.hpp"

namespace moeplan::planner {
namespace test_expert_load {
namespace {

TEST(ExpertLoad, UniformContiguous) {
  const auto load = ExpertLoad::uniform(2, 8);
  const auto place = contiguous_placement(2, 8, 4);
  auto slots = slot_tokens(load, place, 800.0);
  ASSERT_TRUE(slots.ok()) << slots.error().message;
  ASSERT_EQ(slots->size(), 2U);
  for (const double t : (*slots)[0]) EXPECT_DOUBLE_EQ(t, 100.0);
  const auto ranks = rank_tokens(*slots, 4);
  EXPECT_EQ(ranks[1], (std::vector<double>{200.0, 200.0, 200.0, 200.0}));
}

TEST(ExpertLoad, SkewAndReplicasSplitEvenly) {
  ExpertLoad load;
  load.source = "test";
  load.num_experts = 4;
  load.counts = {{6.0, 1.0, 1.0, 0.0}};  // expert 0 takes 75%
  Placement p;
  p.policy = "manual";
  p.num_experts = 4;
  p.ep_size = 2;
  p.num_slots = 6;
  p.physical_to_logical = {{0, 1, 2, 0, 3, 0}};  // expert 0 has three replicas
  auto slots = slot_tokens(load, p, 80.0);
  ASSERT_TRUE(slots.ok()) << slots.error().message;
  EXPECT_EQ((*slots)[0], (std::vector<double>{20.0, 10.0, 10.0, 20.0, 0.0, 20.0}));
  EXPECT_EQ(rank_tokens(*slots, 2)[0], (std::vector<double>{40.0, 40.0}));
}

TEST(ExpertLoad, EmptyOrZeroRowFallsBackToUniform) {
  ExpertLoad load;
  load.num_experts = 4;
  load.counts = {{0.0, 0.0, 0.0, 0.0}};
  EXPECT_EQ(load.fractions(0), (std::vector<double>{0.25, 0.25, 0.25, 0.25}));
}

TEST(Placement, ValidationNamesTheProblem) {
  Placement p = contiguous_placement(1, 8, 4);
  EXPECT_TRUE(p.validate().ok());
  p.physical_to_logical[0][3] = 2;  // expert 3 lost its slot
  EXPECT_EQ(p.validate().error().message,
            "placement 'contiguous': layer 0 has no slot for expert 3");
  p = contiguous_placement(1, 8, 4);
  p.physical_to_logical[0][0] = 9;
  EXPECT_NE(p.validate().error().message.find("names expert 9"), std::string::npos);
  p = contiguous_placement(1, 8, 3);  // 8 slots over 3 ranks
  EXPECT_FALSE(p.validate().ok());
}

TEST(ExpertLoad, MismatchedShapesRejected) {
  const auto load = ExpertLoad::uniform(3, 8);
  EXPECT_FALSE(slot_tokens(load, contiguous_placement(3, 16, 4), 10.0).ok());
  EXPECT_FALSE(slot_tokens(load, contiguous_placement(2, 8, 4), 10.0).ok());
  EXPECT_TRUE(slot_tokens(load, contiguous_placement(1, 8, 4), 10.0).ok());
}

}  // namespace
}  // namespace test_expert_load
}  // namespace moeplan::planner
