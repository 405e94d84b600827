// Run under mpirun, one process per GPU: NCCL bootstrapped through MPI (rank 0's unique id over
// MPI, ncclCommInitRank on the local rank's device) passes every collective check, and the sharded
// layer on the CUDA backend over NCCL matches the dense reference. Skips, saying why, without a
// GPU per process.
#include "kernels/cuda/cuda_backend.hpp"
#include "kernels/cuda/cuda_probe.hpp"
#include "kernels/cuda/nccl_communicator.hpp"
#include "kernels/mpi_communicator.hpp"
#include "kernels/mpi_info.hpp"
#include "kernels/verify.hpp"
#include "models/registry.hpp"
#include "tests/kernels/collective_checks.hpp"

namespace moeplan::kernels {
namespace test_mpi_nccl {
namespace {

TEST(CudaNcclMpi, CollectivesAndLayerOverNccl) {
  auto world = mpi_world();
  ASSERT_NE(world, nullptr);
  const cuda::CudaProbe probe = cuda::probe_cuda();
  if (!probe.kernel_ran) GTEST_SKIP() << "no usable CUDA device: " << probe.error;
  if (static_cast<int>(probe.devices.size()) < world->size()) {
    GTEST_SKIP() << "multi-GPU collectives need a multi-GPU machine: " << world->size()
                 << " ranks but " << probe.devices.size()
                 << " GPU(s), and NCCL refuses two ranks on one GPU";
  }
  const int device = cuda::device_for_local_rank(launcher_local_rank());
  auto nccl = cuda::make_nccl_communicator(*world, device);
  ASSERT_TRUE(nccl.ok()) << nccl.error().message;
  testing::check_collectives(**nccl);

  VerifyRequest req;
  auto m = models::load_model("qwen2-57b-a14b");
  ASSERT_TRUE(m.ok());
  req.model = *m;
  req.scale = 32;
  req.token_counts = {96};
  req.dtypes = {DType::kBf16, DType::kFp32};
  const LayerSpec spec = *LayerSpec::from_model(req.model, req.scale, DType::kFp32, 1);
  req.layouts = legal_layouts(spec, world->size());
  req.dispatchers = {std::begin(kKernelDispatchers), std::end(kKernelDispatchers)};
  req.backend = "cuda";
  req.device = device;
  const auto rows = run_verify(**nccl, req);
  if ((*nccl)->rank() == 0) {
    ASSERT_EQ(rows.size(), req.layouts.size() * 3U * 2U);
    for (const auto& r : rows) {
      EXPECT_TRUE(r.passed) << r.layout.short_name() << " " << dispatcher_name(r.layout.dispatcher)
                            << " " << dtype_name(r.dtype) << " bound use " << r.max_bound_use;
    }
  }
}

}  // namespace
}  // namespace test_mpi_nccl
}  // namespace moeplan::kernels
