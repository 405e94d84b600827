// The fault-injection plan (MOEPLAN_FAULT_INJECT): parsing; the faults themselves are exercised
// by the CLI and mpirun tests (tests/cli/test_profile_cli.cpp, tests/faults/).
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/fault_inject.hpp"

namespace moeplan::kernels {
namespace test_fault_inject {
namespace {

TEST(FaultInject, ParsesEveryField) {
  auto p = parse_fault_plan("rank=2,after_points=7,mode=exit");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->rank, 2);
  EXPECT_EQ(p->after_points, 7);
  EXPECT_EQ(p->mode, FaultPlan::Mode::kExit);
  auto d = parse_fault_plan("mode=oom");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->rank, 0);
  EXPECT_EQ(d->after_points, 0);
  EXPECT_EQ(d->mode, FaultPlan::Mode::kOom);
  EXPECT_EQ(parse_fault_plan("mode=kill")->mode, FaultPlan::Mode::kKill);
}

TEST(FaultInject, RejectsMalformedPlansNamingTheItem) {
  for (const char* bad : {"rank=-1", "rank=x", "after_points=", "mode=crash", "speed=3", "rank",
                          "rank=1,,mode=kill"}) {
    auto p = parse_fault_plan(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.error().message.find("MOEPLAN_FAULT_INJECT: expected rank=R,after_points=N"),
              std::string::npos)
        << p.error().message;
  }
  EXPECT_NE(parse_fault_plan("mode=crash").error().message.find("'mode=crash'"), std::string::npos);
}

TEST(FaultInject, InertWithoutTheVariable) {
  // The test runs without MOEPLAN_FAULT_INJECT: no plan, and fault_point does nothing.
  ASSERT_EQ(std::getenv("MOEPLAN_FAULT_INJECT"), nullptr);
  auto plan = fault_plan_from_env();
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->has_value());
  for (int i = 0; i < 100; ++i) fault_point(0);
}

}  // namespace
}  // namespace test_fault_inject
}  // namespace moeplan::kernels
