// MPI library facts that can be read without initialising MPI.
#pragma once

#include <string>

namespace moeplan::kernels {

/// The MPI library's version line (MPI_Get_library_version), or empty when MPI is not built in.
std::string mpi_library_version();

/// World size promised by the launcher (mpirun/srun environment), or 1 outside a launcher.
int launcher_world_size();

/// This process's rank among the launcher's processes on its node (OMPI_COMM_WORLD_LOCAL_RANK,
/// MPI_LOCALRANKID, SLURM_LOCALID), or 0 outside a launcher: it picks the GPU.
int launcher_local_rank();

}  // namespace moeplan::kernels
