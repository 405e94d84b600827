// "This machine with N ranks" as a cluster (`--cluster local:N`): N ranks of one device type
// joined through shared memory, so the planner can predict CPU + MPI runs of the real layer.
#pragma once

#include <optional>
#include <string>

#include "planner/topology/cluster.hpp"

namespace moeplan::planner {

/// N from "local:N" (1 ≤ N ≤ 4096); nullopt when `text` does not start with "local:". Errors
/// name the text and what was expected.
std::optional<Result<int>> parse_local_cluster(const std::string& text);

/// N ranks ("gpu0".."gpuN-1", the planner's word for a rank) each linked to one shared-memory
/// switch at `device.nvlink_bandwidth` per direction; `latency_s` is rank to rank (half per hop).
Result<Cluster> local_cluster(int num_ranks, const DeviceSpec& device, double latency_s);

/// Physical memory of this host in bytes (0 when unknown).
double host_memory_bytes();

}  // namespace moeplan::planner
