// Fault injection for the reliability tests (docs/RELIABILITY.md): always compiled in, inert
// unless the environment variable MOEPLAN_FAULT_INJECT is set, e.g.
//   MOEPLAN_FAULT_INJECT="rank=1,after_points=3,mode=kill"
// `rank`: the world rank that fails (default 0); `after_points`: how many points (profile),
// cases (verify, validate) that rank completes first (default 0); `mode`:
//   kill  the process sends itself SIGKILL (a crash, an OOM kill, a lost node);
//   exit  the process ends with status 0 without MPI_Finalize (a rank that quits early);
//   oom   that one point's set-up throws std::bad_alloc (an allocation failure; the profile
//         marks the point "not supported" and continues).
#pragma once

#include <optional>
#include <string>

#include "models/result.hpp"

namespace moeplan::kernels {

struct FaultPlan {
  enum class Mode { kKill, kExit, kOom };
  int rank = 0;
  int after_points = 0;
  Mode mode = Mode::kKill;
};

/// Parses a MOEPLAN_FAULT_INJECT value; the error names the variable and what was expected.
Result<FaultPlan> parse_fault_plan(const std::string& text);

/// The plan from the environment: nothing when MOEPLAN_FAULT_INJECT is unset or empty, an error
/// when it is malformed (the CLI reports it at start, exit 2).
Result<std::optional<FaultPlan>> fault_plan_from_env();

/// Called by `world_rank` at the start of each point or case. Counts that rank's calls; on the
/// (after_points + 1)-th call of the planned rank it injects the planned fault. Does nothing
/// when no (valid) plan is set.
void fault_point(int world_rank);

}  // namespace moeplan::kernels
