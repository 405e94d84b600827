// Facts about the machine and software a measurement was taken on: host, CPU model, compiler,
// and the versions of CUDA, NCCL and MPI. Every cost-DB row carries them.
#pragma once

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
};

/// Reads the environment of this process (cheap; no GPU kernel is launched).
Environment current_environment();

}  // namespace moeplan::profiler
