// Fault injection for the reliability tests.
#include "kernels/fault_inject.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <sstream>
#include <stdexcept>

namespace moeplan::kernels {

namespace {

const char* const kExpected =
    "MOEPLAN_FAULT_INJECT: expected rank=R,after_points=N,mode=kill|exit|oom";

bool parse_int(const std::string& text, int& out) {
  try {
    std::size_t used = 0;
    const long v = std::stol(text, &used);
    if (used != text.size() || v < 0 || v > 1000000) return false;
    out = static_cast<int>(v);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

/// The plan read once; null when unset or malformed.
const FaultPlan* active_plan() {
  static const std::optional<FaultPlan> plan = [] {
    auto p = fault_plan_from_env();
    return p ? *p : std::optional<FaultPlan>{};
  }();
  return plan ? &*plan : nullptr;
}

}  // namespace

Result<FaultPlan> parse_fault_plan(const std::string& text) {
  FaultPlan plan;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    bool ok = eq != std::string::npos;
    if (key == "rank") {
      ok = ok && parse_int(value, plan.rank);
    } else if (key == "after_points") {
      ok = ok && parse_int(value, plan.after_points);
    } else if (key == "mode") {
      if (value == "kill") {
        plan.mode = FaultPlan::Mode::kKill;
      } else if (value == "exit") {
        plan.mode = FaultPlan::Mode::kExit;
      } else if (value == "oom") {
        plan.mode = FaultPlan::Mode::kOom;
      } else {
        ok = false;
      }
    } else {
      ok = false;
    }
    if (!ok) return Error{std::string(kExpected) + ", got '" + item + "'"};
  }
  return plan;
}

Result<std::optional<FaultPlan>> fault_plan_from_env() {
  const char* text = std::getenv("MOEPLAN_FAULT_INJECT");
  if (text == nullptr || text[0] == '\0') return std::optional<FaultPlan>{};
  auto plan = parse_fault_plan(text);
  if (!plan) return plan.error();
  return std::optional<FaultPlan>{*plan};
}

void fault_point(int world_rank) {
  const FaultPlan* plan = active_plan();
  if (plan == nullptr || world_rank != plan->rank) return;
  // In-process ranks are threads of one process: only the planned rank's thread counts.
  static std::atomic<int> calls{0};
  if (calls.fetch_add(1) != plan->after_points) return;
  switch (plan->mode) {
    case FaultPlan::Mode::kKill:
      std::fprintf(stderr, "moeplan: fault injection: rank %d kills itself (SIGKILL)\n",
                   world_rank);
      ::kill(::getpid(), SIGKILL);
      break;
    case FaultPlan::Mode::kExit:
      std::fprintf(stderr, "moeplan: fault injection: rank %d exits early without MPI_Finalize\n",
                   world_rank);
      std::fflush(stderr);
      std::_Exit(0);
    case FaultPlan::Mode::kOom: throw std::bad_alloc();
  }
}

}  // namespace moeplan::kernels
