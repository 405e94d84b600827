// The measurement environment is read from this machine.
#include <gtest/gtest.h>

#include <thread>

#include "profiler/environment.hpp"

namespace moeplan::profiler {
namespace {

TEST(Environment, DescribesThisMachine) {
  const Environment e = current_environment();
  EXPECT_FALSE(e.host.empty());
  EXPECT_FALSE(e.cpu_model.empty());
  EXPECT_EQ(e.num_cpus, static_cast<int>(std::thread::hardware_concurrency()));
  EXPECT_NE(e.compiler.find('.'), std::string::npos);
  EXPECT_EQ(e.moeplan_version, MOEPLAN_VERSION);
#if MOEPLAN_HAVE_MPI
  EXPECT_FALSE(e.mpi.empty());
#endif
}

}  // namespace
}  // namespace moeplan::profiler
