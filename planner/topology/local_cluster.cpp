// The local cluster: N ranks on one host joined through shared memory.
#include "planner/topology/local_cluster.hpp"

#include <unistd.h>

namespace moeplan::planner {

std::optional<Result<int>> parse_local_cluster(const std::string& text) {
  const std::string prefix = "local:";
  if (text.rfind(prefix, 0) != 0) return std::nullopt;
  const std::string digits = text.substr(prefix.size());
  const auto bad = input_error(
      "cluster",
      " '" + text + "': expected local:N with N the number of ranks (1 to 4096), e.g. local:2");
  if (digits.empty() || digits.size() > 4 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return Result<int>(bad);
  }
  const int n = std::stoi(digits);
  if (n < 1 || n > 4096) return Result<int>(bad);
  return Result<int>(n);
}

Result<Cluster> local_cluster(int num_ranks, const DeviceSpec& device, double latency_s) {
  if (num_ranks < 1) return Error{"local cluster: expected at least one rank"};
  if (!(device.nvlink_bandwidth > 0.0) && num_ranks > 1) {
    return Error{"local cluster of device '" + device.name +
                 "': expected a measured link bandwidth (profile the collectives under mpirun)"};
  }
  auto graph = std::make_shared<TopologyGraph>();
  TopologyGraph& g = *graph;
  for (int i = 0; i < num_ranks; ++i) {
    const auto v = boost::add_vertex(g);
    g[v] = VertexInfo{"gpu" + std::to_string(i), VertexKind::kGpu, i};
  }
  const auto shm = boost::add_vertex(g);
  g[shm] = VertexInfo{"shared_memory", VertexKind::kNvSwitch, -1};
  const double bw = device.nvlink_bandwidth > 0.0 ? device.nvlink_bandwidth : 1.0;
  for (int i = 0; i < num_ranks; ++i) {
    const int n = static_cast<int>(boost::num_edges(g));
    const auto v = static_cast<TopologyGraph::vertex_descriptor>(i);
    boost::add_edge(v, shm, LinkInfo{bw, latency_s / 2.0, n}, g);
    boost::add_edge(shm, v, LinkInfo{bw, latency_s / 2.0, n + 1}, g);
  }
  ClusterInfo info;
  info.name = "local:" + std::to_string(num_ranks);
  info.source = "local:" + std::to_string(num_ranks);
  info.description =
      std::to_string(num_ranks) + " ranks of " + device.name + " on one host (shared memory)";
  info.form = "local";
  info.device = device;
  info.num_nodes = 1;
  info.gpus_per_node = num_ranks;
  info.nvlink_domain_gpus = num_ranks;
  return Cluster::from_graph(std::move(graph), std::move(info));
}

double host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

}  // namespace moeplan::planner
