// Shared pieces of the libFuzzer targets (tests/fuzz, docs/RELIABILITY.md): the input as a
// string, a bundled model and cluster loaded once, and a scratch file for readers that take a
// path (in /dev/shm when it exists, so a run stays in memory).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "models/registry.hpp"
#include "planner/topology/cluster.hpp"

namespace moeplan::fuzz {

inline std::string as_string(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// A bundled model; a target aborts (a finding) if the bundled resources do not load.
inline const models::MoeModel& bundled_model(const char* name) {
  static const models::MoeModel m = [&] {
    auto r = models::load_model(name);
    if (!r) {
      std::fprintf(stderr, "fuzz: %s\n", r.error().message.c_str());
      std::abort();
    }
    return *r;
  }();
  return m;
}

inline const planner::Cluster& bundled_cluster(const char* name) {
  static const planner::Cluster c = [&] {
    auto r = planner::load_cluster(name);
    if (!r) {
      std::fprintf(stderr, "fuzz: %s\n", r.error().message.c_str());
      std::abort();
    }
    return *r;
  }();
  return c;
}

/// A per-process scratch path ending in `suffix`; removed (with SQLite's -wal/-shm/-journal
/// siblings) by remove_scratch.
inline std::filesystem::path scratch_path(const std::string& suffix) {
  const std::filesystem::path dir = std::filesystem::is_directory("/dev/shm")
                                        ? std::filesystem::path("/dev/shm")
                                        : std::filesystem::temp_directory_path();
  return dir / ("moeplan_fuzz_" + std::to_string(::getpid()) + suffix);
}

inline void write_scratch(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline void remove_scratch(const std::filesystem::path& path) {
  std::error_code ec;
  for (const char* s : {"", "-wal", "-shm", "-journal"}) {
    std::filesystem::remove(path.string() + s, ec);
  }
}

}  // namespace moeplan::fuzz
