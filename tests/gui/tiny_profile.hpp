// A tiny real profile for the GUI tests (Qwen1.5-MoE at 1/16 width, quick sweep capped at 32
// rows and 16 KiB, a 4 MiB cold rotation, two in-process ranks; a few seconds): written once per
// test process through the profiler library, as `moeplan profile` writes it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "profiler/profile.hpp"

namespace moeplan::gui {

inline constexpr const char* kTinyModel = "qwen1.5-moe-a2.7b";
inline constexpr int kTinyScale = 16;
inline constexpr int kTinyRanks = 2;
inline constexpr int kTinyMaxTokens = 32;
inline constexpr int kTinyMaxBytes = 16384;
/// What the views are tested for does not depend on how cold the weights are.
inline constexpr int kTinyColdMib = 4;

/// A fresh folder for one test's files (the test removes it).
inline std::string testDir(const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("moeplan_gui_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

inline profiler::ProfileOptions tinyProfileOptions(const std::string& out) {
  profiler::ProfileOptions o;
  o.model = kTinyModel;
  o.scale = kTinyScale;
  o.quick = true;
  o.max_tokens = kTinyMaxTokens;
  o.max_bytes = kTinyMaxBytes;
  o.max_seconds = 0.05;
  o.cold_mib = kTinyColdMib;
  o.out = out;
  return o;
}

/// The shared tiny profile's path (profiled on first use).
inline const std::string& tinyProfileDb() {
  static const std::string path = [] {
    static const std::string dir = testDir("shared");
    std::atexit([] { std::filesystem::remove_all(dir); });
    const std::string p = dir + "/tiny.db";
    auto req = profiler::make_profile_request(tinyProfileOptions(p), kTinyRanks);
    EXPECT_TRUE(req.ok()) << (req.ok() ? "" : req.error().message);
    Result<profiler::ProfileSummary> sum = Error{"not run"};
    kernels::run_in_process(kTinyRanks, [&](kernels::Communicator& world) {
      auto r = profiler::run_profile(world, *req, {}, {});
      if (world.rank() == 0) sum = std::move(r);
    });
    EXPECT_TRUE(sum.ok()) << (sum.ok() ? "" : sum.error().message);
    return p;
  }();
  return path;
}

}  // namespace moeplan::gui
