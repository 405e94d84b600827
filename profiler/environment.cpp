// Measurement environment.
#include "profiler/environment.hpp"

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

}  // namespace

Environment current_environment() {
  Environment e;
  e.host = kernels::host_name();
  e.node = kernels::node_name();
  e.cpu_model = read_cpu_model();
  e.num_cpus = static_cast<int>(std::thread::hardware_concurrency());
  e.compiler = compiler_text();
  e.mpi = kernels::mpi_library_version();
  e.moeplan_version = MOEPLAN_VERSION;
  return e;
}

}  // namespace moeplan::profiler
