// The measurement environment is read from this machine.
#include <gtest/gtest.h>

#include <thread>

#include "profiler/environment.hpp"

namespace moeplan::profiler {
namespace test_environment {
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

// sysfs writes cache sizes as "32768K", "260M" (an Intel Xeon's L3), "1G" or plain bytes;
// anything else is not a size, and the last-level cache is then not known (0).
TEST(Environment, CacheSizesReadAsSysfsWritesThem) {
  EXPECT_EQ(parse_cache_size("32768K"), std::size_t{32} << 20);
  EXPECT_EQ(parse_cache_size("260M"), std::size_t{260} << 20);
  EXPECT_EQ(parse_cache_size("1G"), std::size_t{1} << 30);
  EXPECT_EQ(parse_cache_size("4096"), 4096U);
  for (const char* bad : {"", "K", "12X", "12 K", "-1K", "99999999999999999999K"}) {
    EXPECT_EQ(parse_cache_size(bad), 0U) << bad;
  }
}

}  // namespace
}  // namespace test_environment
}  // namespace moeplan::profiler
