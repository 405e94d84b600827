// The machine's pace: the probe through a backend's GEMM (wall clock on the CPU, the device clock
// where a backend has one), and validate's check against the pace a profile recorded.
#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "kernels/communicator.hpp"
#include "profiler/pace.hpp"
#include "tests/profiler/recording_backend.hpp"

namespace moeplan::profiler {
namespace test_pace {
namespace {

using planner::MachinePace;
using planner::RunInfo;

RunInfo run_of(const std::string& device, double start, double end) {
  RunInfo r;
  r.device = device;
  r.pace_start = {start};
  r.pace_end = {end};
  return r;
}

TEST(Pace, TheDeviceClockTimesTheProbeExactly) {
  // Every call of the fake device adds 1 ms of kernel time: the probe's GFLOP/s is its FLOPs
  // over exactly 1 ms, whatever the wall clock did.
  const auto backend = std::make_shared<RecordingBackend>(1e-3);
  const MachinePace p = measure_pace_alone(backend);
  const double flops = 2.0 * kPaceGemmM * kPaceGemmN * kPaceGemmK;
  EXPECT_DOUBLE_EQ(p.gemm_gflops, flops / 1e-3 / 1e9);
  EXPECT_GT(backend->calls[kernels::BackendOp::kGemm], 5);  // warm-up, check, ≥ 5 samples
}

TEST(Pace, EveryRankOfAWorldReadsTheSameFigure) {
  // The ranks measure at once and each sample is the slowest rank's, so every rank agrees.
  std::mutex mutex;
  std::vector<double> figures;
  kernels::run_in_process(2, [&](kernels::Communicator& world) {
    auto backend = kernels::make_cpu_backend();
    const MachinePace p = measure_pace(world, *backend);
    const std::lock_guard<std::mutex> lock(mutex);
    figures.push_back(p.gemm_gflops);
  });
  ASSERT_EQ(figures.size(), 2U);
  EXPECT_GT(figures[0], 0.0);
  EXPECT_EQ(figures[0], figures[1]);
}

TEST(Pace, NothingRecordedIsNothingToCompare) {
  const std::vector<RunInfo> runs = {run_of("cpu:x/ranks=1", 0.0, 0.0),
                                     run_of("cpu:y/ranks=1", 80.0, 80.0)};
  const PaceCheck c = check_pace(runs, "cpu:x/ranks=1", {50.0}, {50.0});
  EXPECT_FALSE(c.profile_recorded);  // the other device's pace is not this profile's
  EXPECT_EQ(c.drift, 0.0);
  EXPECT_FALSE(c.stale);
  EXPECT_NE(describe_pace(c).find("the profile recorded none"), std::string::npos)
      << describe_pace(c);
}

TEST(Pace, DriftIsTheLargestDepartureFromTheProfilesRange) {
  // Two runs of the device (starts and ends 78..82) and one of another device.
  const std::vector<RunInfo> runs = {run_of("cpu:x/ranks=1", 80.0, 82.0),
                                     run_of("cpu:y/ranks=1", 10.0, 200.0),
                                     run_of("cpu:x/ranks=1", 78.0, 0.0)};
  const std::string dev = "cpu:x/ranks=1";
  PaceCheck inside = check_pace(runs, dev, {79.0}, {82.0});
  EXPECT_TRUE(inside.profile_recorded);
  EXPECT_EQ(inside.profile_low.gemm_gflops, 78.0);
  EXPECT_EQ(inside.profile_high.gemm_gflops, 82.0);
  EXPECT_EQ(inside.drift, 0.0);
  EXPECT_FALSE(inside.stale);
  EXPECT_NE(describe_pace(inside).find("profile 78.0–82.0 GFLOP/s"), std::string::npos)
      << describe_pace(inside);
  EXPECT_NE(describe_pace(inside).find("(within the profile's range)"), std::string::npos);
  // 4% under the lowest: reported, not stale (tolerance 5%).
  const PaceCheck near = check_pace(runs, dev, {0.96 * 78.0}, {80.0});
  EXPECT_NEAR(near.drift, -0.04, 1e-12);
  EXPECT_FALSE(near.stale);
  EXPECT_NE(describe_pace(near).find("4% outside the profile's range, within 5%"),
            std::string::npos)
      << describe_pace(near);
  // The after figure departs most (+10% over the highest): it decides, with its sign.
  const PaceCheck up = check_pace(runs, dev, {0.97 * 78.0}, {1.1 * 82.0});
  EXPECT_NEAR(up.drift, 0.1, 1e-12);
  EXPECT_TRUE(up.stale);
  EXPECT_NE(describe_pace(up).find("STALE PROFILE: the machine ran the probe 10% faster"),
            std::string::npos)
      << describe_pace(up);
  // 32% slower before the cases (the drift recorded on 2026-12-06); after not measured (a run
  // stopped part-way): ignored.
  const PaceCheck slow = check_pace(runs, dev, {0.68 * 78.0}, {});
  EXPECT_NEAR(slow.drift, -0.32, 1e-12);
  EXPECT_TRUE(slow.stale);
  EXPECT_NE(describe_pace(slow).find("32% slower than when profiled"), std::string::npos);
  EXPECT_NE(describe_pace(slow).find("not measured after"), std::string::npos);
  // Just over the tolerance is stale, just under is not.
  EXPECT_TRUE(check_pace(runs, dev, {78.0 * (1.0 - kPaceTolerance) * 0.999}, {}).stale);
  EXPECT_FALSE(check_pace(runs, dev, {78.0 * (1.0 - kPaceTolerance) * 1.001}, {}).stale);
}

}  // namespace
}  // namespace test_pace
}  // namespace moeplan::profiler
