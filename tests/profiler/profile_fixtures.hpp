// The small profiles and fast harness settings the profiler tests share: a sweep of
// Qwen1.5-MoE-A2.7B at 1/16 width, bf16, up to 8 tokens and 4 KiB messages, and two timed samples
// per point.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "models/registry.hpp"
#include "planner/costs/cost_db.hpp"
#include "profiler/harness.hpp"
#include "profiler/sweep.hpp"

namespace moeplan::profiler::fixtures {

inline SweepSpec tiny_sweep(int world) {
  auto model = models::load_model("qwen1.5-moe-a2.7b");
  EXPECT_TRUE(model.ok());
  SweepRequest r;
  r.scale = 16;
  r.world_size = world;
  r.dtypes = {DType::kBf16};
  r.quick = true;
  r.max_tokens = 8;
  r.max_bytes = 4096;
  auto s = make_sweep(*model, r);
  EXPECT_TRUE(s.ok()) << s.error().message;
  // A rotation of 4 MiB, not kColdBytes: what these profiles are checked for (which points are
  // written, kept, resumed, measured again) does not depend on how cold the operands are, and a
  // 256 MiB rotation per point is most of their time (minutes under ThreadSanitizer).
  s->cold_bytes = std::size_t{4} << 20;
  return *s;
}

inline HarnessOptions fast() {
  HarnessOptions o;
  o.warmup = 1;
  o.min_reps = 2;
  o.max_reps = 2;
  o.min_sample_s = 0.0;
  return o;
}

/// A database path in the temporary directory with no database there (nor its -wal, -shm).
inline std::string fresh_db(const std::string& name) {
  const auto path = (std::filesystem::temp_directory_path() / name).string();
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  return path;
}

/// What a profile wrote: its runs and points (a failed read fails the test and gives none).
struct ProfileDbContents {
  std::vector<planner::RunInfo> runs;
  std::vector<planner::CostPoint> points;
};
inline ProfileDbContents read_profile_db(const std::string& path) {
  ProfileDbContents out;
  auto db = planner::CostDb::open(path, false);
  EXPECT_TRUE(db.ok()) << path;
  if (!db) return out;
  auto runs = (*db)->runs();
  auto points = (*db)->points();
  EXPECT_TRUE(runs.ok() && points.ok()) << path;
  if (runs) out.runs = std::move(*runs);
  if (points) out.points = std::move(*points);
  return out;
}

}  // namespace moeplan::profiler::fixtures
