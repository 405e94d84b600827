// "This machine with N ranks" as a cluster (`--cluster local:N`): N ranks of one device type
// joined through shared memory, so the planner can predict CPU + MPI runs of the real layer; and
// `local:KxM`, K such nodes of M ranks joined by a network, for profiles made on several nodes.
#pragma once

#include <optional>
#include <string>

#include "planner/topology/cluster.hpp"

namespace moeplan::planner {

/// The shape a `local:` cluster names.
struct LocalShape {
  int nodes = 1;
  int ranks_per_node = 1;
  bool nodes_given = false;  ///< written as local:KxM (else local:N: one node)
  int num_ranks() const { return nodes * ranks_per_node; }
};

/// The shape of "local:N" (one node of N ranks, 1 ≤ N ≤ 4096) or "local:KxM" (K nodes × M ranks,
/// K·M ≤ 4096); nullopt when `text` does not start with "local:". Errors name the text and what
/// was expected.
std::optional<Result<LocalShape>> parse_local_cluster(const std::string& text);

/// N ranks ("gpu0".."gpuN-1", the planner's word for a rank) each linked to one shared-memory
/// switch at `device.nvlink_bandwidth` per direction; `latency_s` is rank to rank (half per hop).
Result<Cluster> local_cluster(int num_ranks, const DeviceSpec& device, double latency_s);

/// K nodes × M ranks: the ranks of a node linked to its shared-memory switch at
/// `device.nvlink_bandwidth` (rank to rank `intra_latency_s`), and every rank to one network
/// switch at `device.nic_bandwidth` (rank to rank `inter_latency_s`); traffic within a node takes
/// the shared memory, between nodes the network. One node is local_cluster(M, …).
Result<Cluster> local_cluster(const LocalShape& shape, const DeviceSpec& device,
                              double intra_latency_s, double inter_latency_s);

/// Physical memory of this host in bytes (0 when unknown).
double host_memory_bytes();

}  // namespace moeplan::planner
