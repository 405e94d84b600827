// MPI library facts readable before MPI_Init.
#include "kernels/mpi_info.hpp"

#include <unistd.h>

#include <cstdlib>
#include <string_view>

#if MOEPLAN_HAVE_MPI
#include <mpi.h>
#endif

namespace moeplan::kernels {

namespace {

/// A positive count from `var`, or 0 when unset or not a positive number.
int count_of(const EnvLookup& env, const char* var) {
  const char* v = env(var);
  if (v == nullptr) return 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || n < 1 || n > (1 << 24)) return 0;
  return static_cast<int>(n);
}

/// A rank (≥ 0) from `var`, or 0 when unset or malformed.
int rank_of(const EnvLookup& env, const char* var) {
  const char* v = env(var);
  if (v == nullptr) return 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || n < 0 || n > (1 << 24)) return 0;
  return static_cast<int>(n);
}

}  // namespace

std::string mpi_library_version() {
#if MOEPLAN_HAVE_MPI
  char buffer[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(buffer, &length) != MPI_SUCCESS) return "";
  std::string v(buffer, static_cast<std::size_t>(length));
  if (const auto nl = v.find_first_of("\n,"); nl != std::string::npos) v.resize(nl);
  return v;
#else
  return "";
#endif
}

Launcher detect_launcher(const EnvLookup& env, bool open_mpi) {
  Launcher l;
  if (const int n = count_of(env, "OMPI_COMM_WORLD_SIZE"); n > 0) {
    l.name = "mpirun";
    l.tasks = n;
    l.rank = rank_of(env, "OMPI_COMM_WORLD_RANK");
    return l;
  }
  if (env("SLURM_STEP_ID") != nullptr) {
    if (const int n = count_of(env, "SLURM_STEP_NUM_TASKS"); n > 0) {
      l.name = "srun";
      l.tasks = n;
      l.rank = rank_of(env, "SLURM_PROCID");
      // NOTE: Open MPI (Debian's 4.1) joins srun's tasks through PMIx only; srun's default
      // (MpiDefault=none) and --mpi=pmi2 leave every task an MPI singleton or fail in MPI_Init.
      l.wired = env("PMIX_RANK") != nullptr || (!open_mpi && env("PMI_RANK") != nullptr);
      if (!l.wired && n > 1) {
        const char* type = env("SLURM_MPI_TYPE");
        l.hint = "srun started " + std::to_string(n) + " tasks without PMIx (--mpi=" +
                 std::string(type != nullptr && *type != '\0' ? type : "none") + "); this " +
                 (open_mpi ? "Open MPI" : "MPI") + " needs srun --mpi=pmix";
      }
      return l;
    }
  }
  for (const char* var : {"PMI_SIZE", "PMIX_SIZE"}) {
    if (const int n = count_of(env, var); n > 0) {
      l.name = "mpiexec";
      l.tasks = n;
      l.rank = rank_of(env, std::string_view(var) == "PMIX_SIZE" ? "PMIX_RANK" : "PMI_RANK");
      return l;
    }
  }
  return l;
}

Launcher detect_launcher() {
  const std::string version = mpi_library_version();
  return detect_launcher([](const char* var) { return std::getenv(var); },
                         version.find("Open MPI") != std::string::npos);
}

int launcher_world_size() { return detect_launcher().tasks; }

int launcher_local_rank() {
  for (const char* var :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMIX_LOCAL_RANK", "SLURM_LOCALID"}) {
    if (const char* v = std::getenv(var); v != nullptr) {
      const int n = std::atoi(v);
      if (n >= 0) return n;
    }
  }
  return 0;
}

std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "unknown";
  return host;
}

std::string node_name() {
  if (const char* n = std::getenv("SLURMD_NODENAME"); n != nullptr && *n != '\0') return n;
  return host_name();
}

}  // namespace moeplan::kernels
