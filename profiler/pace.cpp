// The machine's pace probe and validate's check against the profile's.
#include "profiler/pace.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <new>

#include "profiler/ops.hpp"

namespace moeplan::profiler {

namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

/// The signed departure of `v` from [lo, hi]; 0 inside it.
double departure(double v, double lo, double hi) {
  if (v < lo) return v / lo - 1.0;
  if (v > hi) return v / hi - 1.0;
  return 0.0;
}

}  // namespace

std::string pace_probe_text() {
  return "bf16 GEMM " + std::to_string(kPaceGemmM) + "×" + std::to_string(kPaceGemmN) + "×" +
         std::to_string(kPaceGemmK) + ", weights cold";
}

planner::MachinePace measure_pace(kernels::Communicator& world, kernels::Backend& backend,
                                  std::size_t cold_bytes) {
  const OpPoint point =
      projection_gemm_point(backend.name(), DType::kBf16, kPaceGemmM, kPaceGemmN, kPaceGemmK);
  SweepSpec spec;
  spec.backend = backend.name();
  spec.cold_bytes = cold_bytes;
  Result<std::unique_ptr<OpCase>> c = Error{""};
  try {
    c = gemm_op().init(point, spec, nullptr, backend);
  } catch (const std::bad_alloc&) {
    c = Error{"out of memory"};
  }
  // Every rank must agree before any of them times (measure synchronizes the samples).
  if (any_rank(world, !c)) return {};
  HarnessOptions h;
  h.warmup = 1;
  h.min_reps = 5;
  h.max_reps = 30;
  h.max_seconds = 0.2;
  const bool device = backend.device_seconds().has_value();
  h.min_sample_s = device ? 0.0 : 5e-3;  // as profile's samples (make_profile_request)
  if (device) h.device_clock = &backend;
  const Measurement m = measure(**c, world.size() > 1 ? &world : nullptr, h);
  if (m.disposition != planner::Disposition::kPassed || !(m.stats.median_s > 0.0)) return {};
  return {point.flops / m.stats.median_s / 1e9};
}

planner::MachinePace measure_pace_alone(const std::shared_ptr<kernels::Backend>& backend,
                                        std::size_t cold_bytes) {
  const std::shared_ptr<kernels::Backend> b = backend ? backend : kernels::make_cpu_backend();
  planner::MachinePace pace;
  kernels::run_in_process(
      1, [&](kernels::Communicator& world) { pace = measure_pace(world, *b, cold_bytes); });
  return pace;
}

PaceCheck check_pace(const std::vector<planner::RunInfo>& runs, const std::string& device,
                     const planner::MachinePace& before, const planner::MachinePace& after) {
  PaceCheck c;
  c.before = before;
  c.after = after;
  double lo = 0.0, hi = 0.0;
  for (const auto& r : runs) {
    if (r.device != device) continue;
    for (const auto* p : {&r.pace_start, &r.pace_end}) {
      if (!p->recorded()) continue;
      lo = c.profile_recorded ? std::min(lo, p->gemm_gflops) : p->gemm_gflops;
      hi = c.profile_recorded ? std::max(hi, p->gemm_gflops) : p->gemm_gflops;
      c.profile_recorded = true;
    }
  }
  if (!c.profile_recorded) return c;
  c.profile_low = {lo};
  c.profile_high = {hi};
  for (const auto* now : {&before, &after}) {
    if (!now->recorded()) continue;
    const double d = departure(now->gemm_gflops, lo, hi);
    if (std::abs(d) > std::abs(c.drift)) c.drift = d;
  }
  c.stale = std::abs(c.drift) > kPaceTolerance;
  return c;
}

Result<PaceCheck> check_profile_pace(const planner::CostSetup& setup,
                                     const planner::MachinePace& before,
                                     const planner::MachinePace& after) {
  if (!setup.db || !setup.measured) return check_pace({}, "", before, after);
  auto runs = setup.db->runs();
  if (!runs) return runs.error();
  return check_pace(*runs, setup.measured->device(), before, after);
}

std::size_t recorded_cold_bytes(const planner::RunInfo& run) {
  return run.cold_bytes > 0 ? static_cast<std::size_t>(run.cold_bytes) : kColdBytes;
}

Result<std::size_t> profiled_cold_bytes(const planner::CostSetup& setup) {
  if (!setup.db || !setup.measured) return kColdBytes;
  auto runs = setup.db->runs();
  if (!runs) return runs.error();
  std::size_t bytes = 0;
  for (const auto& r : *runs) {
    if (r.device == setup.measured->device()) bytes = std::max(bytes, recorded_cold_bytes(r));
  }
  return bytes > 0 ? bytes : kColdBytes;
}

std::string pace_text(const planner::MachinePace& p) {
  return p.recorded() ? fixed(p.gemm_gflops, 1) + " GFLOP/s" : std::string("not measured");
}

std::string describe_pace(const PaceCheck& c) {
  std::string s = "machine pace (" + pace_probe_text() + "): ";
  const std::string now =
      pace_text(c.before) + " before the cases, " + pace_text(c.after) + " after";
  if (!c.profile_recorded) {
    return s + "now " + now +
           "; the profile recorded none (profiled before moeplan recorded it, or imported), so "
           "whether the machine still runs at its profiled pace is not known";
  }
  const std::string lo = fixed(c.profile_low.gemm_gflops, 1);
  const std::string hi = fixed(c.profile_high.gemm_gflops, 1);
  s += "profile " + (lo == hi ? lo : lo + "–" + hi) + " GFLOP/s, now " + now;
  const std::string by = fixed(100.0 * std::abs(c.drift), 0) + "%";
  const std::string tolerance = fixed(100.0 * kPaceTolerance, 0) + "%";
  if (c.stale) {
    s += ". STALE PROFILE: the machine ran the probe " + by +
         (c.drift < 0.0 ? " slower" : " faster") + " than when profiled, more than the " +
         tolerance +
         " a prediction may err by: the errors above measure the machine's drift as much as the "
         "planner (re-profile, or validate when the machine runs at its profiled pace)";
  } else if (c.drift != 0.0) {
    s += " (" + by + " outside the profile's range, within " + tolerance + ")";
  } else {
    s += " (within the profile's range)";
  }
  return s;
}

}  // namespace moeplan::profiler
