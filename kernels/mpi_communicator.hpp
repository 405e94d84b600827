// The MPI communicator: real processes under mpirun/srun, the same binary on every rank.
#pragma once

#include <memory>

#include "kernels/communicator.hpp"

namespace moeplan::kernels {

/// True when MPI support is compiled in.
bool mpi_available();

/// Initialises MPI once per process (thread level: funneled) and returns MPI_COMM_WORLD as a
/// Communicator; MPI_Finalize runs at exit. Null when MPI is not compiled in.
std::unique_ptr<Communicator> mpi_world();

/// The world rank of the first rank that shares memory with this one
/// (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)): the same on every rank of one node, as MPI sees
/// nodes. Collective on MPI_COMM_WORLD (after mpi_world()); 0 without MPI.
int mpi_shared_memory_domain();

/// After an error this rank cannot recover from (a failed collective: a peer is gone): when MPI
/// is initialised, MPI_Abort on MPI_COMM_WORLD, which stops every rank now instead of leaving
/// them waiting in collectives or MPI_Finalize. Returns without MPI or before MPI_Init.
void abort_world(int code);

}  // namespace moeplan::kernels
