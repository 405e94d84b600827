// The shared measurement harness.
#include "profiler/harness.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace moeplan::profiler {

namespace {

using Clock = std::chrono::steady_clock;

double quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double f = pos - static_cast<double>(lo);
  return sorted[lo] + f * (sorted[hi] - sorted[lo]);
}

/// Element-wise max over the ranks of `sync` (nanosecond resolution), in place.
void max_over_ranks(kernels::Communicator* sync, std::vector<double>& seconds) {
  if (sync == nullptr || sync->size() == 1) return;
  std::vector<std::int64_t> ns(seconds.size());
  for (std::size_t i = 0; i < ns.size(); ++i) ns[i] = std::llround(seconds[i] * 1e9);
  sync->all_reduce_max(ns);
  for (std::size_t i = 0; i < ns.size(); ++i) seconds[i] = static_cast<double>(ns[i]) * 1e-9;
}

/// One sample: seconds per run of `inner` back-to-back runs (and the case's settle()), by
/// `clock`'s device time when it has one (else wall time); `wall` gets the wall seconds the
/// sample took.
double timed(OpCase& c, int inner, kernels::Communicator* sync, const kernels::Backend* clock,
             double& wall) {
  if (sync != nullptr && sync->size() > 1) sync->barrier();
  const auto d0 = clock != nullptr ? clock->device_seconds() : std::nullopt;
  const auto t0 = Clock::now();
  for (int i = 0; i < inner; ++i) c.run();
  c.settle();
  wall = std::chrono::duration<double>(Clock::now() - t0).count();
  if (d0) return (*clock->device_seconds() - *d0) / inner;
  return wall / inner;
}

}  // namespace

Stats summarize(std::vector<double> samples) {
  Stats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.median_s = quantile(samples, 0.5);
  s.p10_s = quantile(samples, 0.1);
  s.p90_s = quantile(samples, 0.9);
  s.repetitions = static_cast<int>(samples.size());
  return s;
}

double spread(const Stats& s) { return s.median_s > 0.0 ? (s.p90_s - s.p10_s) / s.median_s : 0.0; }

Measurement measure(OpCase& c, kernels::Communicator* sync, const HarnessOptions& o) {
  Measurement out;
  for (int i = 0; i < o.warmup; ++i) c.run();
  // Verify before recording: every rank checks its own output; one failure fails the point.
  const Check check = c.verify();
  std::vector<std::int64_t> failed{check.passed ? 0 : 1};
  if (sync != nullptr && sync->size() > 1) {
    failed[0] = check.passed ? 0 : sync->rank() + 1;
    sync->all_reduce_max(failed);
  }
  if (failed[0] != 0) {
    out.disposition = planner::Disposition::kIncorrect;
    out.detail = !check.passed ? check.detail
                               : "rank " + std::to_string(failed[0] - 1) + " failed verification";
    return out;
  }
  // Back-to-back runs per sample so timer and barrier overheads stay small against the op.
  const kernels::Backend* clock = o.device_clock;
  if (clock != nullptr && !clock->device_seconds()) clock = nullptr;
  double wall = 0.0;
  std::vector<double> probe{timed(c, 1, sync, clock, wall)};
  max_over_ranks(sync, probe);
  const int inner =
      probe[0] > 0.0 ? std::clamp(static_cast<int>(std::ceil(o.min_sample_s / probe[0])), 1, 10000)
                     : 10000;
  std::vector<double> samples;
  double total = 0.0;
  const int batch = std::max(1, o.min_reps);
  while (true) {
    std::vector<double> b(static_cast<std::size_t>(batch));
    // The time spent bounds the repetitions, the same on every rank: the samples (the slowest
    // rank's) or, with a device clock, the wall time (the copies around the kernels too).
    std::vector<double> spent(1, 0.0);
    for (double& t : b) {
      t = timed(c, inner, sync, clock, wall);
      spent[0] += wall;
    }
    max_over_ranks(sync, b);  // identical samples on every rank → identical decisions
    if (clock != nullptr) {
      max_over_ranks(sync, spent);
      total += spent[0];
    } else {
      for (const double t : b) total += t * inner;
    }
    samples.insert(samples.end(), b.begin(), b.end());
    const Stats s = summarize(samples);
    const bool stable = s.median_s > 0.0 && spread(s) <= o.target_spread;
    if (static_cast<int>(samples.size()) >= o.min_reps &&
        (stable || static_cast<int>(samples.size()) >= o.max_reps || total >= o.max_seconds)) {
      out.stats = s;
      break;
    }
  }
  out.detail = "inner=" + std::to_string(inner);
  return out;
}

std::vector<double> powers_of_two(double lo, double hi) {
  std::vector<double> out;
  for (double v = std::exp2(std::round(std::log2(std::max(1.0, lo)))); v <= hi * (1.0 + 1e-12);
       v *= 2.0) {
    out.push_back(v);
  }
  return out;
}

std::vector<int> row_counts(int max_rows, bool dense) {
  std::vector<int> out;
  for (int v = 1; v <= max_rows; v *= 2) {
    out.push_back(v);
    if (dense && v >= 2 && v + v / 2 <= max_rows) out.push_back(v + v / 2);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool any_rank(kernels::Communicator& world, bool flag) {
  std::vector<std::int64_t> v{flag ? 1 : 0};
  if (world.size() > 1) world.all_reduce_max(v);
  return v[0] != 0;
}

}  // namespace moeplan::profiler
