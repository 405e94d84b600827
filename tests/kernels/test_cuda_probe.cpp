// CUDA probe: on a machine with a GPU the probe kernel must run; without one the suite skips and
// says why.
#include <gtest/gtest.h>

#include "kernels/cuda/cuda_probe.hpp"

namespace moeplan::kernels::cuda {
namespace test_cuda_probe {
namespace {

class CudaProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    probe_ = probe_cuda();
    if (probe_.devices.empty()) GTEST_SKIP() << "no usable CUDA device: " << probe_.error;
  }
  CudaProbe probe_;
};

TEST(CudaProbeNoDevice, ReportsWhyWhenNoDevice) {
  const CudaProbe p = probe_cuda();
  EXPECT_GT(p.runtime_version, 0);
  if (p.devices.empty()) {
    EXPECT_FALSE(p.kernel_ran);
    EXPECT_FALSE(p.error.empty());
  }
}

TEST_F(CudaProbeTest, KernelRunsOnDeviceZero) {
  EXPECT_TRUE(probe_.kernel_ran) << probe_.error;
  EXPECT_GE(probe_.devices.front().compute_major, 7);
  EXPECT_GT(probe_.devices.front().memory_bytes, 1e9);
}

TEST(CudaNccl, VersionIsReadable) {
#if MOEPLAN_HAVE_NCCL
  EXPECT_GE(nccl_version(), 20000);
#else
  GTEST_SKIP() << "NCCL not compiled in";
#endif
}

}  // namespace
}  // namespace test_cuda_probe
}  // namespace moeplan::kernels::cuda
