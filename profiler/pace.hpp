// The machine's pace: how fast this machine runs a fixed probe now — the profile's own GEMM op at
// one shape — recorded by `profile` at the start and end of a run and measured again by
// `validate` around its cases. A cost database describes the machine as it ran when profiled; on
// a shared machine whose speed drifts (tens of % within minutes, as recorded in
// docs/BENCHMARKS.md), a prediction from it cannot follow, and validate says so instead of
// leaving the drift to pass for the planner's error.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/communicator.hpp"
#include "planner/costs/cost_db.hpp"
#include "planner/costs/cost_setup.hpp"
#include "profiler/harness.hpp"

namespace moeplan::profiler {

/// The probe: a bf16 projection GEMM (weights cold) of m × n × k rows, columns and depth.
inline constexpr int kPaceGemmM = 256;
inline constexpr int kPaceGemmN = 1024;
inline constexpr int kPaceGemmK = 1024;

/// A departure of validate's pace from the profile's beyond this is reported as a stale profile:
/// the whole-layer accuracy target's median error (issue 20), so a drift that alone could use up
/// the error budget is named as such.
inline constexpr double kPaceTolerance = 0.05;

/// The probe in words: "bf16 GEMM 256×1024×1024, weights cold".
std::string pace_probe_text();

/// Measures the pace on every rank of `world` at once (each sample the slowest rank's, as the
/// profile's points are measured) through `backend`'s GEMM, timed as profile times it (a device
/// backend by its device clock), its weights rotated through `cold_bytes` as the profile's
/// points are (validate probes with the profile's rotation, so the figures compare): about
/// 0.2 s. 0 (not measured) when the probe fails (verification, memory).
planner::MachinePace measure_pace(kernels::Communicator& world, kernels::Backend& backend,
                                  std::size_t cold_bytes = kColdBytes);
/// The same on one rank of its own, through `backend` (null: a CPU backend).
planner::MachinePace measure_pace_alone(const std::shared_ptr<kernels::Backend>& backend,
                                        std::size_t cold_bytes = kColdBytes);

/// validate's pace against the profile's.
struct PaceCheck {
  bool profile_recorded = false;  ///< some run of the device recorded its pace
  /// The lowest and highest figures over the device's runs (start and end of each).
  planner::MachinePace profile_low, profile_high;
  planner::MachinePace before, after;  ///< validate's, around its cases
  /// The larger relative departure of `before` or `after` from the profile's range, with its
  /// sign (negative: slower now); 0 inside the range or when there is nothing to compare.
  double drift = 0.0;
  bool stale = false;  ///< |drift| > kPaceTolerance
};

/// The check of `before` and `after` against the runs of `device` in `runs`.
PaceCheck check_pace(const std::vector<planner::RunInfo>& runs, const std::string& device,
                     const planner::MachinePace& before, const planner::MachinePace& after);

/// The check against the runs of the device `setup`'s measured costs were read for (nothing to
/// compare without a cost database); errors name the database.
Result<PaceCheck> check_profile_pace(const planner::CostSetup& setup,
                                     const planner::MachinePace& before,
                                     const planner::MachinePace& after);

/// The rotation a run's points read their operands cold through (kColdBytes for a run that
/// recorded none: profiled before schema 5, when every profile used it).
std::size_t recorded_cold_bytes(const planner::RunInfo& run);

/// The rotation the profile behind `setup` read its operands cold through — the largest its
/// runs of the measured device recorded (a resumed profile keeps its first's: profile refuses
/// another) — so that validate's cases read theirs as cold; kColdBytes without a profile.
/// Errors name the database.
Result<std::size_t> profiled_cold_bytes(const planner::CostSetup& setup);

/// One line for validate's text output: the figures, and what a stale profile means.
std::string describe_pace(const PaceCheck& c);

/// "76.1 GFLOP/s" ("not measured" when 0).
std::string pace_text(const planner::MachinePace& p);

}  // namespace moeplan::profiler
