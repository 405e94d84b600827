// Facts about the machine and software a measurement was taken on: host, CPU model, compiler,
// and the versions of CUDA, NCCL and MPI. Every cost-DB row carries them.
#pragma once

#include <cstddef>
#include <string>

namespace moeplan::profiler {

struct Environment {
  std::string host;
  std::string node;  ///< Slurm's node name (SLURMD_NODENAME), else the host
  std::string cpu_model;
  int num_cpus = 0;
  std::string compiler;
  std::string mpi;  ///< empty when MPI is not compiled in
  std::string moeplan_version;
  /// The largest CPU cache of cpu0 (sysfs cache/index*/size of the highest level); 0 when the
  /// system does not say.
  std::size_t last_level_cache_bytes = 0;
};

/// Reads the environment of this process (cheap; no GPU kernel is launched).
Environment current_environment();

/// A sysfs cache size ("32768K", "260M", "1G", a plain byte count) in bytes; 0 when it is none
/// of these.
std::size_t parse_cache_size(const std::string& text);

}  // namespace moeplan::profiler
