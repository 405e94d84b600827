// Cluster topology (resources/clusters/NAME.json) as a Boost.Graph of GPUs, NVSwitches, NICs and
// network switches, and the routing of GPU-to-GPU traffic over it to per-link load and time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <boost/graph/adjacency_list.hpp>
#include <nlohmann/json.hpp>

#include "models/result.hpp"
#include "planner/topology/device_spec.hpp"

namespace moeplan::planner {

enum class VertexKind : std::uint8_t { kGpu, kNvSwitch, kNic, kSwitch };

/// "gpu", "nvswitch", "nic", "switch".
std::string vertex_kind_name(VertexKind k);

struct VertexInfo {
  std::string name;
  VertexKind kind = VertexKind::kGpu;
  int gpu_index = -1;  ///< 0..num_gpus-1 for GPUs, -1 otherwise
};

/// One direction of a physical link. A cable is two edges, one per direction.
struct LinkInfo {
  double bandwidth = 0.0;  ///< bytes per second in this direction
  double latency = 0.0;    ///< seconds
  int index = 0;           ///< 0..num_edges-1, the position in per-link load vectors
};

using TopologyGraph =
    boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, VertexInfo, LinkInfo>;

/// Bytes sent from one GPU to another (global GPU indices).
struct Flow {
  int src = 0;
  int dst = 0;
  double bytes = 0.0;
};

/// Result of routing a set of flows: bytes per directed link and the busiest link's figures.
struct LinkLoad {
  std::vector<double> bytes;      ///< per edge index
  int busiest_edge = -1;          ///< edge with the largest bytes / bandwidth; -1 if no traffic
  double busiest_seconds = 0.0;   ///< its bytes / bandwidth
  double max_path_latency = 0.0;  ///< the slowest path's summed link latency, seconds
};

/// What a cluster file says besides its graph.
struct ClusterInfo {
  std::string name;
  std::string source;       ///< file the cluster was read from
  std::string description;  ///< free text from the file
  std::string form;         ///< "compact/rail_optimized", "compact/fat_tree" or "explicit"
  DeviceSpec device;
  int num_nodes = 1;
  int gpus_per_node = 1;
  int nvlink_domain_gpus = 1;
};

/// A cluster: a device type and a topology graph. Immutable after loading; routing tables are
/// built once (shortest paths by hop count, ties broken by the order links were added, which
/// for rail-optimized networks sends cross-rail traffic over NVLink first, as NCCL's PXN does).
class Cluster {
 public:
  const ClusterInfo& info() const { return info_; }
  const std::string& name() const { return info_.name; }
  const DeviceSpec& device() const { return info_.device; }
  int num_gpus() const { return static_cast<int>(gpu_vertices_.size()); }
  const TopologyGraph& graph() const { return *graph_; }
  int num_links() const { return static_cast<int>(edges_.size()); }
  /// The link with edge index `edge_index`.
  const LinkInfo& link(int edge_index) const;
  /// "gpu3 -> nvswitch0" for an edge index.
  std::string link_name(int edge_index) const;

  /// Edge indices on the route from GPU `src` to GPU `dst` (empty when src == dst).
  std::vector<int> path(int src, int dst) const;
  /// Summed link latency from GPU `src` to GPU `dst`, seconds.
  double path_latency(int src, int dst) const;

  /// Routes flows (bytes between GPU pairs; self-flows carry nothing) to per-link load.
  LinkLoad route(const std::vector<Flow>& flows) const;

  /// Builds a cluster from a graph; checks that there is a GPU, that every link has a positive
  /// bandwidth and that every GPU reaches every other. Errors name `info.source`.
  static Result<Cluster> from_graph(std::shared_ptr<const TopologyGraph> graph, ClusterInfo info);

 private:
  ClusterInfo info_;
  // NOTE: shared, so copying a Cluster neither copies the graph (Boost's graph copy trips GCC
  // 12's -Wmaybe-uninitialized) nor the routing tables.
  std::shared_ptr<const TopologyGraph> graph_;
  std::vector<TopologyGraph::vertex_descriptor> gpu_vertices_;
  std::vector<TopologyGraph::edge_descriptor> edges_;
  std::vector<int> edge_src_;  ///< source vertex per edge index
  /// pred_[g][v]: edge index arriving at vertex v on the route from GPU g; -1 at the root.
  std::shared_ptr<const std::vector<std::vector<int>>> pred_;
};

/// The largest cluster moeplan plans: routing tables take GPUs × vertices entries and an
/// all-to-all GPUs² flows (docs/RELIABILITY.md, "Resource limits"). Larger ones are refused.
inline constexpr int kMaxClusterGpus = 8192;
/// Routing-table entries (4 bytes each) a cluster may need: 2^28, 1 GiB.
inline constexpr std::size_t kMaxRouteEntries = std::size_t{1} << 28;

/// Parses a cluster JSON document (compact or explicit form); `source` names it in errors.
Result<Cluster> parse_cluster(const nlohmann::json& j, const std::string& source);

/// The compact form's settings, in the JSON's units (what a cluster editor edits). Defaults are
/// the compact form's own: an NVLink domain of one node, no network for one domain.
struct CompactCluster {
  std::string device = "h200";  ///< a device name or device file (resources/devices/)
  int nodes = 1;
  int gpus_per_node = 8;
  int nvlink_domain_gpus = 8;
  double nvlink_bandwidth_gb_per_s = 450.0;
  double nvlink_latency_us = 2.0;
  std::string network = "none";  ///< "none", "rail_optimized" or "fat_tree"
  int nics_per_node = 8;
  double nic_bandwidth_gb_per_s = 50.0;
  double network_latency_us = 5.0;
  double oversubscription = 1.0;
};

/// Reads and checks the compact form's keys (the same checks as parse_cluster; the device name
/// is kept as written). Errors name `source` and the key; the explicit form is an error.
Result<CompactCluster> read_compact_cluster(const nlohmann::json& j, const std::string& source);

/// `c` written into `base` (a cluster JSON whose other keys, such as name and description, are
/// kept): the compact form, with inter_node only when there is a network.
nlohmann::json compact_cluster_json(const CompactCluster& c, nlohmann::json base);

/// Reads and validates a cluster JSON file.
Result<Cluster> load_cluster_file(const std::filesystem::path& path);

/// The cluster used when none is named.
inline constexpr const char* kDefaultCluster = "2x-hgx-h200";

/// Loads a bundled cluster by name or a cluster JSON by path (anything with '/' or ".json").
Result<Cluster> load_cluster(const std::string& name_or_path);

/// Names of the bundled clusters, sorted.
std::vector<std::string> bundled_cluster_names();

}  // namespace moeplan::planner
