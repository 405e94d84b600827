// The in-process communicator passes every collective check for several group sizes.
#include "tests/kernels/collective_checks.hpp"

namespace moeplan::kernels {
namespace test_communicator {
namespace {

class InProcCollectives : public ::testing::TestWithParam<int> {};

TEST_P(InProcCollectives, AllCollectivesExact) {
  run_in_process(GetParam(), [](Communicator& c) {
    EXPECT_EQ(c.kind(), "inproc");
    testing::check_collectives(c);
  });
}

INSTANTIATE_TEST_SUITE_P(Sizes, InProcCollectives, ::testing::Values(1, 2, 3, 4, 7));

TEST(InProc, ExceptionOnOneRankPropagates) {
  EXPECT_THROW(run_in_process(1, [](Communicator&) { throw std::runtime_error("boom"); }),
               std::runtime_error);
}

}  // namespace
}  // namespace test_communicator
}  // namespace moeplan::kernels
