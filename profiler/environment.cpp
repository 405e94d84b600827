// Measurement environment.
#include "profiler/environment.hpp"

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "kernels/mpi_info.hpp"

namespace moeplan::profiler {

namespace {

std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown CPU";
}

std::string compiler_text() {
#if defined(__clang__)
  return std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  return "gcc " + std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__) + "." +
         std::to_string(__GNUC_PATCHLEVEL__);
#else
  return "unknown compiler";
#endif
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::size_t read_last_level_cache() {
  int best_level = 0;
  std::size_t best = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    const std::string level = read_line(dir + "level");
    if (level.empty()) continue;
    const std::size_t bytes = parse_cache_size(read_line(dir + "size"));
    const int l = std::atoi(level.c_str());
    if (bytes > 0 && (l > best_level || (l == best_level && bytes > best))) {
      best_level = l;
      best = bytes;
    }
  }
  return best;
}

}  // namespace

std::size_t parse_cache_size(const std::string& text) {
  std::size_t i = 0, value = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (value > (std::size_t{1} << 40)) return 0;
    value = value * 10 + static_cast<std::size_t>(text[i] - '0');
    ++i;
  }
  if (i == 0) return 0;
  const std::string unit = text.substr(i);
  if (unit.empty()) return value;
  if (unit == "K") return value << 10;
  if (unit == "M") return value << 20;
  if (unit == "G") return value << 30;
  return 0;
}

Environment current_environment() {
  Environment e;
  e.host = kernels::host_name();
  e.node = kernels::node_name();
  e.cpu_model = read_cpu_model();
  e.last_level_cache_bytes = read_last_level_cache();
  e.num_cpus = static_cast<int>(std::thread::hardware_concurrency());
  e.compiler = compiler_text();
  e.mpi = kernels::mpi_library_version();
  e.moeplan_version = MOEPLAN_VERSION;
  return e;
}

}  // namespace moeplan::profiler
