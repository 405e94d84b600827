// MPI library facts and the launcher's promises, readable before MPI_Init.
#pragma once

#include <functional>
#include <string>

namespace moeplan::kernels {

/// The MPI library's version line (MPI_Get_library_version), or empty when MPI is not built in.
std::string mpi_library_version();

/// The launcher that started this process, read from the environment alone (before MPI_Init).
struct Launcher {
  std::string name;   ///< "mpirun", "srun", "mpiexec", or "" outside a launcher
  int tasks = 1;      ///< processes the launcher started (1 outside a launcher)
  int rank = 0;       ///< this process's rank among them (OMPI_COMM_WORLD_RANK, SLURM_PROCID, …)
  bool wired = true;  ///< this MPI can join the tasks (srun: a PMI this MPI speaks is present)
  std::string hint;   ///< when !wired: why, and the flag that fixes it
  /// More than one process: the ranks are the launcher's processes, joined by MPI.
  bool launched() const { return tasks > 1; }
};

/// Looks an environment variable up: its value, or null when unset.
using EnvLookup = std::function<const char*(const char*)>;

/// The launcher as `env` describes it, in this order: OMPI_COMM_WORLD_SIZE → mpirun (also
/// inside an sbatch script: it wins over Slurm's variables); SLURM_STEP_ID and
/// SLURM_STEP_NUM_TASKS → srun, wired when PMIX_RANK is set (and, for an MPI other than Open MPI,
/// PMI_RANK); PMI_SIZE or PMIX_SIZE → mpiexec; otherwise none. SLURM_NTASKS alone (an sbatch
/// script running moeplan directly) is not a launcher.
Launcher detect_launcher(const EnvLookup& env, bool open_mpi);

/// detect_launcher on this process's environment and MPI library.
Launcher detect_launcher();

/// World size promised by the launcher (detect_launcher().tasks), or 1 outside a launcher.
int launcher_world_size();

/// This process's rank among the launcher's processes on its node (OMPI_COMM_WORLD_LOCAL_RANK,
/// MPI_LOCALRANKID, SLURM_LOCALID), or 0 outside a launcher: it picks the GPU.
int launcher_local_rank();

/// The node this process runs on: Slurm's node name (SLURMD_NODENAME: emulated nodes of one
/// host differ there) or else the host name.
std::string node_name();

/// This host's name (gethostname), or "unknown".
std::string host_name();

}  // namespace moeplan::kernels
