// Cluster topology: reading both JSON forms, expanding the compact form, routing traffic.
#include "planner/topology/cluster.hpp"

#include <algorithm>
#include <map>

#include <boost/graph/breadth_first_search.hpp>

#include "models/json_reader.hpp"
#include "models/resources.hpp"

namespace moeplan::planner {

namespace fs = std::filesystem;
using Vertex = TopologyGraph::vertex_descriptor;

std::string vertex_kind_name(VertexKind k) {
  switch (k) {
    case VertexKind::kGpu: return "gpu";
    case VertexKind::kNvSwitch: return "nvswitch";
    case VertexKind::kNic: return "nic";
    case VertexKind::kSwitch: return "switch";
  }
  return "?";
}

namespace {

constexpr double kGb = 1e9;   // bandwidth_gb_per_s: 1 GB/s = 1e9 bytes/s
constexpr double kUs = 1e-6;  // latency_us

/// Records, for every vertex the search reaches, the edge it was reached through.
struct PredRecorder : boost::default_bfs_visitor {
  std::vector<int>* pred = nullptr;
  void tree_edge(TopologyGraph::edge_descriptor e, const TopologyGraph& g) const {
    (*pred)[boost::target(e, g)] = g[e].index;
  }
};

Vertex add_vertex(TopologyGraph& g, std::string name, VertexKind kind, int gpu_index = -1) {
  // NOTE: add the vertex, then set its bundle: add_vertex(property, g) goes through Boost's
  // named-graph lookup, which GCC 12 flags as -Wuninitialized in sanitizer builds.
  const Vertex v = boost::add_vertex(g);
  g[v] = VertexInfo{std::move(name), kind, gpu_index};
  return v;
}

/// A full-duplex cable: one edge per direction, each with the given per-direction bandwidth.
void add_cable(TopologyGraph& g, Vertex a, Vertex b, double bandwidth, double latency) {
  const int n = static_cast<int>(boost::num_edges(g));
  boost::add_edge(a, b, LinkInfo{bandwidth, latency, n}, g);
  boost::add_edge(b, a, LinkInfo{bandwidth, latency, n + 1}, g);
}

/// A bandwidth key in GB/s as written (checked positive).
Result<double> bandwidth_gb_key(const JsonReader& r, const std::string& key) {
  auto v = r.number(key, 0.0, 1e9);
  if (!v) return v.error();
  if (*v <= 0.0) {
    return r.error(key,
                   "expected a bandwidth > 0 GB/s, got 0 (a link without bandwidth "
                   "cannot carry traffic)");
  }
  return *v;
}

/// A bandwidth key in bytes/s.
Result<double> bandwidth_key(const JsonReader& r, const std::string& key) {
  auto v = bandwidth_gb_key(r, key);
  if (!v) return v.error();
  return *v * kGb;
}

Result<DeviceSpec> device_key(const JsonReader& r, const fs::path& file) {
  auto name = r.string("device");
  if (!name) return name.error();
  std::string target = *name;
  if (target.find('/') != std::string::npos && fs::path(target).is_relative()) {
    target = (file.parent_path() / target).string();
  }
  auto d = load_device(target);
  if (!d) return r.error("device", d.error().message);
  return d;
}

/// The compact form's keys (without the device, read by device_key), checked.
Result<CompactCluster> read_compact(const nlohmann::json& j, const JsonReader& r) {
  CompactCluster c;
  auto nodes = r.integer("nodes", 1, 4096);
  if (!nodes) return nodes.error();
  auto gpn = r.integer("gpus_per_node", 1, 72);
  if (!gpn) return gpn.error();
  const auto num_gpus = *nodes * *gpn;
  if (num_gpus > kMaxClusterGpus) {
    return r.error("nodes", "expected nodes × gpus_per_node ≤ " + std::to_string(kMaxClusterGpus) +
                                " GPUs (moeplan's cluster limit), got " + std::to_string(*nodes) +
                                " × " + std::to_string(*gpn) + " = " + std::to_string(num_gpus));
  }
  auto domain = r.integer_or("nvlink_domain_gpus", *gpn, 1, num_gpus);
  if (!domain) return domain.error();
  if (*domain % *gpn != 0 || num_gpus % *domain != 0) {
    return r.error("nvlink_domain_gpus",
                   "expected a multiple of gpus_per_node=" + std::to_string(*gpn) +
                       " that divides the " + std::to_string(num_gpus) + " GPUs, got " +
                       std::to_string(*domain));
  }
  c.nodes = static_cast<int>(*nodes);
  c.gpus_per_node = static_cast<int>(*gpn);
  c.nvlink_domain_gpus = static_cast<int>(*domain);

  if (!r.has("intra_node") || !j.at("intra_node").is_object()) {
    return r.error("intra_node",
                   "expected an object {\"kind\": \"nvswitch\", "
                   "\"bandwidth_gb_per_s\", \"latency_us\"}");
  }
  const JsonReader intra(j.at("intra_node"), r.source(), "intra_node.");
  auto kind = intra.string_or("kind", "nvswitch");
  if (!kind) return kind.error();
  if (*kind != "nvswitch") {
    return intra.error("kind",
                       "expected \"nvswitch\" (other fabrics: use the explicit form), "
                       "got \"" +
                           *kind + "\"");
  }
  auto nv_bw = bandwidth_gb_key(intra, "bandwidth_gb_per_s");
  if (!nv_bw) return nv_bw.error();
  c.nvlink_bandwidth_gb_per_s = *nv_bw;
  auto nv_lat = intra.number("latency_us", 0.0, 1e6);
  if (!nv_lat) return nv_lat.error();
  c.nvlink_latency_us = *nv_lat;

  const bool needs_network = num_gpus > *domain;
  if (r.has("inter_node") || needs_network) {
    if (!r.has("inter_node") || !j.at("inter_node").is_object()) {
      return r.error("inter_node", "expected an object (the cluster has " +
                                       std::to_string(num_gpus / *domain) +
                                       " NVLink domains that need a network)");
    }
    const JsonReader inter(j.at("inter_node"), r.source(), "inter_node.");
    auto n = inter.integer("nics_per_node", 1, *gpn);
    if (!n) return n.error();
    if (*gpn % *n != 0) {
      return inter.error("nics_per_node", "expected a divisor of gpus_per_node=" +
                                              std::to_string(*gpn) + ", got " + std::to_string(*n));
    }
    c.nics_per_node = static_cast<int>(*n);
    auto bw = bandwidth_gb_key(inter, "nic_bandwidth_gb_per_s");
    if (!bw) return bw.error();
    c.nic_bandwidth_gb_per_s = *bw;
    auto lat = inter.number("latency_us", 0.0, 1e6);
    if (!lat) return lat.error();
    c.network_latency_us = *lat;
    auto net = inter.string("network");
    if (!net) return net.error();
    if (*net != "rail_optimized" && *net != "fat_tree") {
      return inter.error("network",
                         "expected \"rail_optimized\" or \"fat_tree\", got \"" + *net + "\"");
    }
    c.network = *net;
    auto os = inter.number_or("oversubscription", 1.0, 1.0, 64.0);
    if (!os) return os.error();
    c.oversubscription = *os;
  }
  return c;
}

Result<Cluster> parse_compact(const nlohmann::json& j, const JsonReader& r, ClusterInfo info) {
  auto compact = read_compact(j, r);
  if (!compact) return compact.error();
  const CompactCluster& c = *compact;
  info.num_nodes = c.nodes;
  info.gpus_per_node = c.gpus_per_node;
  info.nvlink_domain_gpus = c.nvlink_domain_gpus;
  const std::string network = c.network;
  const int nics = c.nics_per_node;
  // The graph in bytes/s and seconds; the JSON's values were checked positive and finite.
  const double nv_bw = c.nvlink_bandwidth_gb_per_s * kGb;
  const double nv_lat_us = c.nvlink_latency_us;
  const double nic_bw = c.nic_bandwidth_gb_per_s * kGb;
  const double net_lat = c.network_latency_us * kUs;
  const double oversub = c.oversubscription;
  const auto num_gpus = static_cast<std::int64_t>(c.nodes) * c.gpus_per_node;
  info.form = "compact/" + network;

  auto graph = std::make_shared<TopologyGraph>();
  TopologyGraph& g = *graph;
  const int n_gpus = static_cast<int>(num_gpus);
  for (int i = 0; i < n_gpus; ++i) add_vertex(g, "gpu" + std::to_string(i), VertexKind::kGpu, i);
  const int n_domains = n_gpus / info.nvlink_domain_gpus;
  std::vector<Vertex> nvs;
  for (int d = 0; d < n_domains; ++d) {
    nvs.push_back(add_vertex(g, "nvswitch" + std::to_string(d), VertexKind::kNvSwitch));
  }
  // NOTE: the intra-node latency is GPU to GPU; each of the two NVLink hops carries half of it.
  for (int i = 0; i < n_gpus; ++i) {
    add_cable(g, static_cast<Vertex>(i), nvs[static_cast<std::size_t>(i / info.nvlink_domain_gpus)],
              nv_bw, nv_lat_us * kUs / 2.0);
  }
  if (network != "none") {
    const int gpus_per_nic = info.gpus_per_node / nics;
    std::vector<Vertex> nic_v;
    for (int node = 0; node < info.num_nodes; ++node) {
      for (int k = 0; k < nics; ++k) {
        nic_v.push_back(add_vertex(g, "node" + std::to_string(node) + ".nic" + std::to_string(k),
                                   VertexKind::kNic));
      }
    }
    for (int i = 0; i < n_gpus; ++i) {
      const int node = i / info.gpus_per_node;
      const int k = (i % info.gpus_per_node) / gpus_per_nic;
      add_cable(g, static_cast<Vertex>(i), nic_v[static_cast<std::size_t>(node * nics + k)], nic_bw,
                0.0);
    }
    if (network == "rail_optimized") {
      // NIC k of every node connects to rail switch k; the NIC-to-NIC latency splits over the
      // two hops.
      std::vector<Vertex> rails;
      for (int k = 0; k < nics; ++k) {
        rails.push_back(add_vertex(g, "rail" + std::to_string(k), VertexKind::kSwitch));
      }
      for (int node = 0; node < info.num_nodes; ++node) {
        for (int k = 0; k < nics; ++k) {
          add_cable(g, nic_v[static_cast<std::size_t>(node * nics + k)],
                    rails[static_cast<std::size_t>(k)], nic_bw, net_lat / 2.0);
        }
      }
    } else {
      // Fat tree: every node's NICs reach a leaf switch; leaves reach a non-blocking core over
      // an uplink of (NICs × NIC bandwidth) / oversubscription. Four hops share the latency.
      const Vertex core = add_vertex(g, "core", VertexKind::kSwitch);
      for (int node = 0; node < info.num_nodes; ++node) {
        const Vertex leaf = add_vertex(g, "leaf" + std::to_string(node), VertexKind::kSwitch);
        for (int k = 0; k < nics; ++k) {
          add_cable(g, nic_v[static_cast<std::size_t>(node * nics + k)], leaf, nic_bw,
                    net_lat / 4.0);
        }
        add_cable(g, leaf, core, nics * nic_bw / oversub, net_lat / 4.0);
      }
    }
  }
  return Cluster::from_graph(std::move(graph), std::move(info));
}

Result<Cluster> parse_explicit(const nlohmann::json& j, const JsonReader& r, ClusterInfo info) {
  info.form = "explicit";
  const auto& vs = j.at("vertices");
  if (!vs.is_array() || vs.empty()) {
    return r.error("vertices",
                   "expected a non-empty array of {\"name\", \"kind\"}, got " + describe_json(vs));
  }
  if (!r.has("edges") || !j.at("edges").is_array()) {
    return r.error("edges",
                   "expected an array of {\"from\", \"to\", \"bandwidth_gb_per_s\", "
                   "\"latency_us\"}");
  }
  auto graph = std::make_shared<TopologyGraph>();
  TopologyGraph& g = *graph;
  std::map<std::string, Vertex> by_name;
  int num_gpus = 0;
  for (std::size_t i = 0; i < vs.size(); ++i) {
    const std::string prefix = "vertices[" + std::to_string(i) + "].";
    if (!vs[i].is_object()) {
      return r.error("vertices[" + std::to_string(i) + "]",
                     "expected an object {\"name\", \"kind\"}, got " + describe_json(vs[i]));
    }
    const JsonReader vr(vs[i], r.source(), prefix);
    auto name = vr.string("name");
    if (!name) return name.error();
    if (by_name.count(*name) != 0) {
      return vr.error("name", "expected a unique vertex name, \"" + *name + "\" repeats");
    }
    auto kind = vr.string("kind");
    if (!kind) return kind.error();
    VertexKind k = VertexKind::kGpu;
    if (*kind == "gpu") {
      k = VertexKind::kGpu;
    } else if (*kind == "nvswitch") {
      k = VertexKind::kNvSwitch;
    } else if (*kind == "nic") {
      k = VertexKind::kNic;
    } else if (*kind == "switch") {
      k = VertexKind::kSwitch;
    } else {
      return vr.error(
          "kind", "expected \"gpu\", \"nvswitch\", \"nic\" or \"switch\", got \"" + *kind + "\"");
    }
    by_name[*name] = add_vertex(g, *name, k, k == VertexKind::kGpu ? num_gpus++ : -1);
  }
  const auto& es = j.at("edges");
  for (std::size_t i = 0; i < es.size(); ++i) {
    const std::string prefix = "edges[" + std::to_string(i) + "].";
    if (!es[i].is_object()) {
      return r.error("edges[" + std::to_string(i) + "]",
                     "expected an object {\"from\", \"to\", \"bandwidth_gb_per_s\", "
                     "\"latency_us\"}, got " +
                         describe_json(es[i]));
    }
    const JsonReader er(es[i], r.source(), prefix);
    Vertex ends[2] = {0, 0};
    const char* keys[2] = {"from", "to"};
    for (int e = 0; e < 2; ++e) {
      auto n = er.string(keys[e]);
      if (!n) return n.error();
      const auto it = by_name.find(*n);
      if (it == by_name.end()) {
        return er.error(keys[e], "expected the name of a vertex, got \"" + *n + "\"");
      }
      ends[e] = it->second;
    }
    if (ends[0] == ends[1]) return er.error("to", "expected a vertex other than 'from'");
    auto bw = bandwidth_key(er, "bandwidth_gb_per_s");
    if (!bw) return bw.error();
    auto lat = er.number("latency_us", 0.0, 1e6);
    if (!lat) return lat.error();
    add_cable(g, ends[0], ends[1], *bw, *lat * kUs);
  }
  if (num_gpus == 0) return Error{r.source() + ": the topology has no GPU"};
  info.num_nodes = 1;
  auto gpn = r.integer_or("gpus_per_node", num_gpus, 1, num_gpus);
  if (!gpn) return gpn.error();
  info.gpus_per_node = static_cast<int>(*gpn);
  info.nvlink_domain_gpus = info.gpus_per_node;
  if (num_gpus % info.gpus_per_node == 0) info.num_nodes = num_gpus / info.gpus_per_node;
  return Cluster::from_graph(std::move(graph), std::move(info));
}

}  // namespace

Result<Cluster> Cluster::from_graph(std::shared_ptr<const TopologyGraph> graph, ClusterInfo info) {
  Cluster c;
  c.info_ = std::move(info);
  c.graph_ = std::move(graph);
  const auto& g = *c.graph_;
  for (auto [v, vend] = boost::vertices(g); v != vend; ++v) {
    if (g[*v].kind == VertexKind::kGpu) c.gpu_vertices_.push_back(*v);
  }
  if (c.gpu_vertices_.empty()) return Error{c.info_.source + ": the topology has no GPU"};
  const std::size_t num_gpus = c.gpu_vertices_.size();
  if (num_gpus > static_cast<std::size_t>(kMaxClusterGpus)) {
    return Error{c.info_.source + ": " + std::to_string(num_gpus) + " GPUs, expected at most " +
                 std::to_string(kMaxClusterGpus) + " (moeplan's cluster limit)"};
  }
  if (num_gpus * boost::num_vertices(g) > kMaxRouteEntries) {
    return Error{c.info_.source + ": " + std::to_string(num_gpus) + " GPUs × " +
                 std::to_string(boost::num_vertices(g)) + " vertices, expected at most " +
                 std::to_string(kMaxRouteEntries) +
                 " routing-table entries (moeplan's cluster limit, 1 GiB)"};
  }
  c.edges_.resize(boost::num_edges(g));
  c.edge_src_.resize(boost::num_edges(g));
  // NOTE: out-edges per vertex rather than boost::edges(), whose iterator trips GCC 12's
  // -Wmaybe-uninitialized inside Boost.
  for (auto [v, vend] = boost::vertices(g); v != vend; ++v) {
    for (auto [e, eend] = boost::out_edges(*v, g); e != eend; ++e) {
      const auto idx = static_cast<std::size_t>(g[*e].index);
      MOEPLAN_ASSERT(idx < c.edges_.size(), "edge indices are dense");
      if (!(g[*e].bandwidth > 0.0)) {
        return Error{c.info_.source + ": link " + g[*v].name + " -> " +
                     g[boost::target(*e, g)].name + " has zero bandwidth"};
      }
      c.edges_[idx] = *e;
      c.edge_src_[idx] = static_cast<int>(*v);
    }
  }
  const std::size_t nv = boost::num_vertices(g);
  auto preds = std::make_shared<std::vector<std::vector<int>>>();
  preds->reserve(c.gpu_vertices_.size());
  for (const Vertex src : c.gpu_vertices_) {
    std::vector<int> pred(nv, -1);
    std::vector<boost::default_color_type> color(nv);
    PredRecorder rec;
    rec.pred = &pred;
    boost::breadth_first_search(g, src,
                                boost::visitor(rec).color_map(boost::make_iterator_property_map(
                                    color.begin(), boost::get(boost::vertex_index, g))));
    for (const Vertex dst : c.gpu_vertices_) {
      if (dst != src && pred[dst] < 0) {
        return Error{c.info_.source + ": the topology is disconnected: " + g[src].name +
                     " cannot reach " + g[dst].name};
      }
    }
    preds->push_back(std::move(pred));
  }
  c.pred_ = std::move(preds);
  return c;
}

const LinkInfo& Cluster::link(int edge_index) const {
  return (*graph_)[edges_[static_cast<std::size_t>(edge_index)]];
}

std::string Cluster::link_name(int edge_index) const {
  const auto e = edges_[static_cast<std::size_t>(edge_index)];
  const auto& g = *graph_;
  return g[boost::source(e, g)].name + " -> " + g[boost::target(e, g)].name;
}

std::vector<int> Cluster::path(int src, int dst) const {
  std::vector<int> out;
  const auto& pred = (*pred_)[static_cast<std::size_t>(src)];
  const auto root = gpu_vertices_[static_cast<std::size_t>(src)];
  for (auto v = gpu_vertices_[static_cast<std::size_t>(dst)]; v != root;) {
    const int e = pred[v];
    out.push_back(e);
    v = static_cast<Vertex>(edge_src_[static_cast<std::size_t>(e)]);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

double Cluster::path_latency(int src, int dst) const {
  double t = 0.0;
  for (const int e : path(src, dst)) t += link(e).latency;
  return t;
}

LinkLoad Cluster::route(const std::vector<Flow>& flows) const {
  LinkLoad load;
  load.bytes.assign(edges_.size(), 0.0);
  for (const Flow& f : flows) {
    if (f.src == f.dst || !(f.bytes > 0.0)) continue;
    MOEPLAN_ASSERT(f.src >= 0 && f.src < num_gpus() && f.dst >= 0 && f.dst < num_gpus(),
                   "flow endpoints are GPUs of this cluster");
    const auto& pred = (*pred_)[static_cast<std::size_t>(f.src)];
    const auto root = gpu_vertices_[static_cast<std::size_t>(f.src)];
    double latency = 0.0;
    for (auto v = gpu_vertices_[static_cast<std::size_t>(f.dst)]; v != root;) {
      const auto e = static_cast<std::size_t>(pred[v]);
      load.bytes[e] += f.bytes;
      latency += (*graph_)[edges_[e]].latency;
      v = static_cast<Vertex>(edge_src_[e]);
    }
    load.max_path_latency = std::max(load.max_path_latency, latency);
  }
  for (std::size_t e = 0; e < edges_.size(); ++e) {
    if (load.bytes[e] <= 0.0) continue;
    const double t = load.bytes[e] / (*graph_)[edges_[e]].bandwidth;
    if (t > load.busiest_seconds) {
      load.busiest_seconds = t;
      load.busiest_edge = static_cast<int>(e);
    }
  }
  return load;
}

Result<CompactCluster> read_compact_cluster(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object() || j.contains("vertices")) {
    return Error{source + ": expected a cluster in the compact form (nodes, gpus_per_node, ...)"};
  }
  const JsonReader r(j, source);
  auto c = read_compact(j, r);
  if (!c) return c.error();
  auto device = r.string("device");
  if (!device) return device.error();
  c->device = *device;
  return c;
}

nlohmann::json compact_cluster_json(const CompactCluster& c, nlohmann::json base) {
  if (!base.is_object()) base = nlohmann::json::object();
  base.erase("vertices");
  base.erase("edges");
  base["device"] = c.device;
  base["nodes"] = c.nodes;
  base["gpus_per_node"] = c.gpus_per_node;
  base["nvlink_domain_gpus"] = c.nvlink_domain_gpus;
  auto& intra = base["intra_node"];
  if (!intra.is_object()) intra = nlohmann::json::object();
  intra["bandwidth_gb_per_s"] = c.nvlink_bandwidth_gb_per_s;
  intra["latency_us"] = c.nvlink_latency_us;
  if (c.network == "none") {
    base.erase("inter_node");
  } else {
    auto& inter = base["inter_node"];
    if (!inter.is_object()) inter = nlohmann::json::object();
    inter["nics_per_node"] = c.nics_per_node;
    inter["nic_bandwidth_gb_per_s"] = c.nic_bandwidth_gb_per_s;
    inter["latency_us"] = c.network_latency_us;
    inter["network"] = c.network;
    inter["oversubscription"] = c.oversubscription;
  }
  return base;
}

Result<Cluster> parse_cluster(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) return Error{source + ": expected a JSON object describing a cluster"};
  const JsonReader r(j, source);
  ClusterInfo info;
  info.source = source;
  auto name = r.string_or("name", fs::path(source).stem().string());
  if (!name) return name.error();
  info.name = *name;
  auto desc = r.string_or("description", "");
  if (!desc) return desc.error();
  info.description = *desc;
  auto device = device_key(r, fs::path(source));
  if (!device) return device.error();
  info.device = *device;
  if (r.has("vertices")) {
    if (r.has("nodes")) {
      return r.error("nodes",
                     "expected either the compact form (nodes, gpus_per_node, ...) or "
                     "the explicit form (vertices, edges), not both");
    }
    return parse_explicit(j, r, std::move(info));
  }
  return parse_compact(j, r, std::move(info));
}

Result<Cluster> load_cluster_file(const fs::path& path) {
  auto j = load_json_file(path);
  if (!j) return j.error();
  return parse_cluster(*j, path.string());
}

Result<Cluster> load_cluster(const std::string& name_or_path) {
  if (name_or_path.find('/') != std::string::npos ||
      fs::path(name_or_path).extension() == ".json") {
    return load_cluster_file(name_or_path);
  }
  const fs::path p = resource_dir() / "clusters" / (name_or_path + ".json");
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) {
    std::string known;
    for (const auto& n : bundled_cluster_names()) known += (known.empty() ? "" : ", ") + n;
    return Error{"unknown cluster '" + name_or_path + "': expected one of " + known +
                 " or a path to a cluster JSON"};
  }
  return load_cluster_file(p);
}

std::vector<std::string> bundled_cluster_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(resource_dir() / "clusters", ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->path().extension() == ".json") names.push_back(it->path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace moeplan::planner
