// MPI library facts readable before MPI_Init.
#include "kernels/mpi_info.hpp"

#include <cstdlib>
#include <string_view>

#if MOEPLAN_HAVE_MPI
#include <mpi.h>
#endif

namespace moeplan::kernels {

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

int launcher_world_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"}) {
    if (const char* v = std::getenv(var); v != nullptr) {
      const int n = std::atoi(v);
      if (n > 0) return n;
    }
  }
  return 1;
}

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

}  // namespace moeplan::kernels
