// Run under mpirun: the MPI communicator passes every collective check on real processes.
#include "kernels/mpi_communicator.hpp"
#include "tests/kernels/collective_checks.hpp"

namespace moeplan::kernels {
namespace test_mpi {
namespace {

TEST(MpiCollectives, AllCollectivesExact) {
  auto world = mpi_world();
  ASSERT_NE(world, nullptr);
  EXPECT_EQ(world->kind(), "mpi");
  EXPECT_GE(world->size(), 1);
  testing::check_collectives(*world);
}

}  // namespace
}  // namespace test_mpi
}  // namespace moeplan::kernels
