// The backend registry reports what was compiled in and what is usable here.
#include <gtest/gtest.h>

#include "kernels/backends.hpp"
#include "kernels/mpi_info.hpp"

namespace moeplan::kernels {
namespace test_backends {
namespace {

TEST(Backends, InventoryInFixedOrderAndCpuAlwaysUsable) {
  const auto inv = backend_inventory();
  ASSERT_EQ(inv.size(), 4U);
  EXPECT_EQ(inv[0].name, "cpu");
  EXPECT_EQ(inv[1].name, "cuda");
  EXPECT_EQ(inv[2].name, "mpi");
  EXPECT_EQ(inv[3].name, "nccl");
  EXPECT_TRUE(inv[0].compiled);
  EXPECT_TRUE(inv[0].usable);
}

TEST(Backends, CompiledFlagsMatchTheBuild) {
  const auto inv = backend_inventory();
  EXPECT_EQ(inv[1].compiled, MOEPLAN_HAVE_CUDA != 0);
  EXPECT_EQ(inv[2].compiled, MOEPLAN_HAVE_MPI != 0);
  EXPECT_EQ(inv[3].compiled, MOEPLAN_HAVE_NCCL != 0);
  for (const auto& b : inv) {
    EXPECT_FALSE(b.detail.empty()) << b.name;
    if (!b.compiled) {
      EXPECT_FALSE(b.usable) << b.name;
    }
    // A compiled backend that is not usable says why.
    if (b.compiled && !b.usable) {
      EXPECT_NE(b.detail.find("not usable"), std::string::npos) << b.detail;
    }
  }
  // NCCL needs a working CUDA device.
  if (inv[3].usable) {
    EXPECT_TRUE(inv[1].usable);
  }
}

TEST(Backends, MpiLibraryVersion) {
#if MOEPLAN_HAVE_MPI
  EXPECT_FALSE(mpi_library_version().empty());
#else
  EXPECT_TRUE(mpi_library_version().empty());
#endif
  EXPECT_GE(launcher_world_size(), 1);
}

}  // namespace
}  // namespace test_backends
}  // namespace moeplan::kernels
