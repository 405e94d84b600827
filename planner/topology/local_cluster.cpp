// The local cluster: N ranks on one host joined through shared memory, or K such nodes joined by
// a network.
#include "planner/topology/local_cluster.hpp"

#include <unistd.h>

namespace moeplan::planner {

namespace {

/// A count of 1 to 4 digits, or -1.
int small_count(const std::string& digits) {
  if (digits.empty() || digits.size() > 4 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return -1;
  }
  return std::stoi(digits);
}

void add_link(TopologyGraph& g, TopologyGraph::vertex_descriptor a,
              TopologyGraph::vertex_descriptor b, double bandwidth, double latency) {
  const int n = static_cast<int>(boost::num_edges(g));
  boost::add_edge(a, b, LinkInfo{bandwidth, latency, n}, g);
  boost::add_edge(b, a, LinkInfo{bandwidth, latency, n + 1}, g);
}

}  // namespace

std::optional<Result<LocalShape>> parse_local_cluster(const std::string& text) {
  const std::string prefix = "local:";
  if (text.rfind(prefix, 0) != 0) return std::nullopt;
  const std::string spec = text.substr(prefix.size());
  const auto bad = input_error(
      "cluster", " '" + text +
                     "': expected local:N with N the number of ranks (1 to 4096), e.g. local:2, "
                     "or local:KxM for K nodes of M ranks, e.g. local:2x1");
  LocalShape shape;
  const auto x = spec.find('x');
  if (x == std::string::npos) {
    shape.ranks_per_node = small_count(spec);
  } else {
    shape.nodes = small_count(spec.substr(0, x));
    shape.ranks_per_node = small_count(spec.substr(x + 1));
    shape.nodes_given = true;
  }
  if (shape.nodes < 1 || shape.ranks_per_node < 1 || shape.num_ranks() > 4096) {
    return Result<LocalShape>(bad);
  }
  return Result<LocalShape>(shape);
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
    add_link(g, static_cast<TopologyGraph::vertex_descriptor>(i), shm, bw, latency_s / 2.0);
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

Result<Cluster> local_cluster(const LocalShape& shape, const DeviceSpec& device,
                              double intra_latency_s, double inter_latency_s) {
  if (shape.nodes < 1 || shape.ranks_per_node < 1) {
    return Error{"local cluster: expected at least one node of at least one rank"};
  }
  if (shape.nodes == 1) {
    auto c = local_cluster(shape.ranks_per_node, device, intra_latency_s);
    if (!c) return c;
    if (!shape.nodes_given) return c;
    ClusterInfo info = c->info();
    info.name = info.source = "local:1x" + std::to_string(shape.ranks_per_node);
    return Cluster::from_graph(std::make_shared<TopologyGraph>(c->graph()), std::move(info));
  }
  if (!(device.nic_bandwidth > 0.0)) {
    return Error{"local cluster of device '" + device.name +
                 "': expected a measured bandwidth between nodes (profile the collectives on "
                 "several nodes)"};
  }
  const int m = shape.ranks_per_node;
  auto graph = std::make_shared<TopologyGraph>();
  TopologyGraph& g = *graph;
  for (int i = 0; i < shape.num_ranks(); ++i) {
    const auto v = boost::add_vertex(g);
    g[v] = VertexInfo{"gpu" + std::to_string(i), VertexKind::kGpu, i};
  }
  // NOTE: the shared-memory links are added first, so that routing (hop count, ties broken by
  // the order links were added) keeps traffic within a node off the network.
  const double intra_bw =
      device.nvlink_bandwidth > 0.0 ? device.nvlink_bandwidth : device.nic_bandwidth;
  for (int node = 0; node < shape.nodes; ++node) {
    const auto shm = boost::add_vertex(g);
    g[shm] = VertexInfo{"shared_memory" + std::to_string(node), VertexKind::kNvSwitch, -1};
    for (int i = node * m; i < (node + 1) * m; ++i) {
      add_link(g, static_cast<TopologyGraph::vertex_descriptor>(i), shm, intra_bw,
               intra_latency_s / 2.0);
    }
  }
  const auto net = boost::add_vertex(g);
  g[net] = VertexInfo{"network", VertexKind::kSwitch, -1};
  for (int i = 0; i < shape.num_ranks(); ++i) {
    add_link(g, static_cast<TopologyGraph::vertex_descriptor>(i), net, device.nic_bandwidth,
             inter_latency_s / 2.0);
  }
  const std::string name =
      "local:" + std::to_string(shape.nodes) + "x" + std::to_string(shape.ranks_per_node);
  ClusterInfo info;
  info.name = name;
  info.source = name;
  info.description = std::to_string(shape.nodes) + " nodes × " + std::to_string(m) + " ranks of " +
                     device.name + " (shared memory within a node, a network between nodes)";
  info.form = "local";
  info.device = device;
  info.num_nodes = shape.nodes;
  info.gpus_per_node = m;
  info.nvlink_domain_gpus = m;
  return Cluster::from_graph(std::move(graph), std::move(info));
}

double host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

}  // namespace moeplan::planner
