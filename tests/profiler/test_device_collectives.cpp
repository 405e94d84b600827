// Collectives measured on a GPU communicator's device memory (NCCL in a CUDA profile), checked
// here without a GPU through a stand-in device communicator (queued_device_comm.hpp); every
// collective's device case is checked in test_harness.cpp with the host ones.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <map>

#include "kernels/communicator.hpp"
#include "profiler/harness.hpp"
#include "profiler/ops.hpp"
#include "profiler/profile.hpp"
#include "tests/profiler/profile_fixtures.hpp"
#include "tests/profiler/queued_device_comm.hpp"
#include "tests/profiler/recording_backend.hpp"

namespace moeplan::profiler {
namespace test_device_collectives {
namespace {

using fixtures::fast;
using fixtures::fresh_db;
using fixtures::QueuedDeviceComm;
using fixtures::read_profile_db;
using fixtures::tiny_sweep;

// A sample's clock stops after the collectives it enqueued have run (settle()), as nccl-tests
// synchronizes inside its timed loop: 3 ms of "device time" per collective shows in the median.
TEST(DeviceCollectives, ASampleWaitsForItsCollectives) {
  constexpr double kDelay = 3e-3;
  const SweepSpec s = tiny_sweep(2);
  const auto backend = kernels::make_cpu_backend();
  const OpTable table = all_reduce_op();
  const auto pts = table.sweep(s);
  ASSERT_FALSE(pts.empty());
  std::atomic<int> slow_enough{0};
  kernels::run_in_process(2, [&](kernels::Communicator& world) {
    QueuedDeviceComm dev(world.split(0, world.rank()), kDelay);
    auto c = table.init(pts.front(), s, &dev, *backend);
    ASSERT_TRUE(c.ok());
    const Measurement m = measure(**c, &world, fast());
    ASSERT_EQ(m.disposition, planner::Disposition::kPassed) << m.detail;
    if (m.stats.median_s >= kDelay) ++slow_enough;
  });
  EXPECT_EQ(slow_enough.load(), 2);
}

// run_profile with a collectives communicator: every collective group is split from it and its
// points are measured on its device memory; the run records both communicators. A communicator
// of other ranks is refused.
TEST(DeviceCollectives, ProfileMeasuresCollectivesOnTheGivenCommunicator) {
  const auto path = fresh_db("moeplan_profile_devcoll.db");
  ProfileRequest req;
  req.sweep = tiny_sweep(2);
  req.ops = {"all_reduce", "all_to_all_v", "gemm"};
  req.harness = fast();
  req.out_path = path;
  kernels::run_in_process(2, [&](kernels::Communicator& world) {
    QueuedDeviceComm dev(world.split(0, world.rank()));
    auto s = run_profile(world, req, {}, {}, {}, &dev);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(s->measured, s->total);
    EXPECT_EQ(s->incorrect, 0);
  });
  const auto written = read_profile_db(path);
  ASSERT_EQ(written.runs.size(), 1U);
  EXPECT_EQ(written.runs.front().communicator, "inproc+queued-device");
  std::map<std::string, int> passed;
  for (const auto& p : written.points) {
    if (p.disposition == planner::Disposition::kPassed) ++passed[p.op];
  }
  EXPECT_GT(passed["all_reduce"], 0);
  EXPECT_GT(passed["all_to_all_v"], 0);
  EXPECT_GT(passed["gemm"], 0);

  kernels::run_in_process(2, [&](kernels::Communicator& world) {
    QueuedDeviceComm alone(world.split(world.rank(), 0));
    auto s = run_profile(world, req, {}, {}, {}, &alone);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find("is not the world's rank"), std::string::npos)
        << s.error().message;
  });
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

// A device profile (the backend has a device clock) times its collectives only on device memory:
// over the host communicator they are left out, saying why; on the device communicator they are
// measured by wall time around the waited-for collectives (they make no backend call, so the
// device clock would have read 0).
TEST(DeviceCollectives, DeviceProfileTimesCollectivesOnlyOnDeviceMemory) {
  constexpr double kDelay = 1e-3;
  for (const bool device_comm : {false, true}) {
    const auto path = fresh_db("moeplan_profile_devcoll_gpu.db");
    ProfileRequest req;
    req.sweep = tiny_sweep(2);
    req.ops = {"all_reduce"};
    req.harness = fast();
    req.out_path = path;
    req.backend = std::make_shared<RecordingBackend>(2.5e-4);
    kernels::run_in_process(2, [&](kernels::Communicator& world) {
      QueuedDeviceComm dev(world.split(0, world.rank()), kDelay);
      auto s = run_profile(world, req, {}, {}, {}, device_comm ? &dev : nullptr);
      ASSERT_TRUE(s.ok()) << s.error().message;
      EXPECT_GT(s->total, 0);
      EXPECT_EQ(device_comm ? s->measured : s->not_supported, s->total);
    });
    const auto written = read_profile_db(path);
    ASSERT_FALSE(written.points.empty());
    for (const auto& p : written.points) {
      EXPECT_EQ(p.device, "fakegpu:Fake GPU 80GB/ranks=2");
      if (device_comm) {
        EXPECT_EQ(p.disposition, planner::Disposition::kPassed) << p.detail;
        EXPECT_GE(p.median_s, kDelay) << p.shape;
        EXPECT_GT(p.bus_bandwidth, 0.0);
      } else {
        EXPECT_EQ(p.disposition, planner::Disposition::kNotSupported);
        EXPECT_NE(p.detail.find("a collective over host memory (inproc)"), std::string::npos)
            << p.detail;
      }
    }
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  }
}

}  // namespace
}  // namespace test_device_collectives
}  // namespace moeplan::profiler
