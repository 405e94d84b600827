// Cluster and cost-source setup shared by `plan`, `validate` and moeplan-gui.
#include "planner/costs/cost_setup.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <utility>

#include "planner/topology/local_cluster.hpp"

namespace moeplan::planner {

namespace {

Result<std::unique_ptr<CostDb>> open_costs(const std::string& costs_path) {
  std::error_code ec;
  if (std::filesystem::is_directory(costs_path, ec)) {
    return input_error(
        "costs", " " + costs_path +
                     ": expected a cost database file written by moeplan profile, got a directory");
  }
  if (!std::filesystem::exists(costs_path, ec)) {
    return input_error("costs", " " + costs_path +
                                    ": no such file; expected a cost database written "
                                    "by moeplan profile");
  }
  if (!std::filesystem::is_regular_file(costs_path, ec)) {
    return input_error("costs", " " + costs_path +
                                    ": expected a cost database file written by moeplan "
                                    "profile, got a device or other special file");
  }
  auto db = CostDb::open(costs_path, false);
  if (!db) return input_error("costs", " " + db.error().message);
  return std::move(*db);
}

/// The roofline and, with a database, its measured costs for `device` of the set-up cluster.
Status finish_setup(CostSetup& s, const std::string& device, CostStatistic statistic) {
  auto calibration = load_calibration(s.cluster->device().name);
  if (!calibration) return calibration.error();
  if (*calibration) s.calibration = std::make_shared<const Calibration>(std::move(**calibration));
  s.roofline = std::make_unique<RooflineCosts>(*s.cluster, s.calibration);
  if (s.db) {
    auto m = MeasuredCosts::load(*s.db, *s.cluster, device, statistic, s.calibration);
    if (!m) return input_error("costs", " " + m.error().message);
    s.measured = std::move(*m);
  }
  return Status::Ok();
}

/// Whether a collective group size's groups stayed within one node.
enum class GroupKind { kIntra, kInter, kMixed };

std::string kind_text(GroupKind k) {
  switch (k) {
    case GroupKind::kIntra: return "within a node";
    case GroupKind::kInter: return "across nodes";
    case GroupKind::kMixed: return "some within a node, some across";
  }
  return "?";
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The device of a local cluster's profile. local:N: `…/ranks=N` (one node), else a profile of
/// N ranks on several nodes; local:KxM: `…/ranks=N/nodes=K` (K > 1) or `…/ranks=N` (K = 1);
/// either way the database's only device when none matches.
Result<std::string> choose_local_device(const std::vector<std::string>& devices,
                                        const LocalShape& shape, const std::string& costs_path) {
  const std::string ranks = "/ranks=" + std::to_string(shape.num_ranks());
  const std::string wanted =
      shape.nodes > 1 ? ranks + "/nodes=" + std::to_string(shape.nodes) : ranks;
  std::string device;
  for (const auto& d : devices) {
    if (ends_with(d, wanted)) device = d;
  }
  if (device.empty() && !shape.nodes_given) {
    for (const auto& d : devices) {
      const auto at = d.rfind(ranks + "/nodes=");
      if (at != std::string::npos && d.find('/', at + ranks.size() + 1) == std::string::npos) {
        device = d;
      }
    }
  }
  if (device.empty() && devices.size() == 1) device = devices.front();
  if (device.empty()) {
    std::string list;
    for (const auto& d : devices) list += (list.empty() ? "" : ", ") + d;
    return input_error(
        "costs", " " + costs_path + ": no profile of " + std::to_string(shape.num_ranks()) +
                     " ranks" +
                     (shape.nodes > 1 ? " on " + std::to_string(shape.nodes) + " nodes" : "") +
                     "; expected a device ending in '" + wanted +
                     "' among: " + (list.empty() ? "(none)" : list));
  }
  return device;
}

/// For each run of `device` and each collective group size g (groups of g consecutive ranks, as
/// the profiler splits them): whether its groups stayed within one shared-memory domain. Runs
/// that did not record their ranks (schema 1) are taken as one node.
std::map<std::pair<std::int64_t, int>, GroupKind> classify_groups(const std::vector<RunInfo>& runs,
                                                                  const std::string& device) {
  std::map<std::pair<std::int64_t, int>, GroupKind> out;
  for (const auto& run : runs) {
    if (run.device != device) continue;
    const int n = static_cast<int>(run.ranks.size());
    // Not recorded (or not every rank): left out, and split_points takes it as one node.
    if (n < 2 || n != run.world_size) continue;
    for (int g = 2; g <= n; ++g) {
      if (n % g != 0) continue;
      int intra = 0;
      int inter = 0;
      for (int first = 0; first < n; first += g) {
        bool one = true;
        for (int r = first; r < first + g; ++r) {
          one = one && run.ranks[static_cast<std::size_t>(r)].shm_domain ==
                           run.ranks[static_cast<std::size_t>(first)].shm_domain;
        }
        (one ? intra : inter) += 1;
      }
      out[{run.id, g}] = inter == 0   ? GroupKind::kIntra
                         : intra == 0 ? GroupKind::kInter
                                      : GroupKind::kMixed;
    }
  }
  return out;
}

struct SplitPoints {
  std::vector<CostPoint> intra;  ///< every non-collective point and the collectives within a node
  std::vector<CostPoint> inter;  ///< the collectives whose groups crossed nodes (all or some)
};

SplitPoints split_points(const std::vector<CostPoint>& points, const std::string& device,
                         const std::map<std::pair<std::int64_t, int>, GroupKind>& kinds) {
  SplitPoints out;
  for (const auto& p : points) {
    if (p.device != device) continue;
    GroupKind k = GroupKind::kIntra;
    if (p.group_size > 1) {
      const auto it = kinds.find({p.run_id, p.group_size});
      if (it != kinds.end()) k = it->second;
    }
    (k == GroupKind::kIntra ? out.intra : out.inter).push_back(p);
  }
  return out;
}

/// The ranks of `device`'s latest run that recorded them; empty when none did.
std::vector<RunRank> profile_shape(const std::vector<RunInfo>& runs, const std::string& device) {
  std::vector<RunRank> ranks;
  for (const auto& run : runs) {
    if (run.device == device && !run.ranks.empty()) ranks = run.ranks;
  }
  return ranks;
}

std::string describe_profile(const std::string& device, const std::vector<RunInfo>& runs,
                             const std::map<std::pair<std::int64_t, int>, GroupKind>& kinds,
                             const std::vector<RunRank>& ranks, const LocalShape& shape) {
  std::string out = "profile " + device + ": ";
  if (ranks.empty()) {
    return out +
           "where its ranks ran was not recorded (made before cost-database schema 3); "
           "taken as one node";
  }
  out += describe_ranks(ranks);
  // Group sizes by kind, from the latest run that recorded its ranks.
  std::int64_t run_id = 0;
  for (const auto& run : runs) {
    if (run.device == device && !run.ranks.empty()) run_id = run.id;
  }
  std::map<GroupKind, std::vector<int>> by_kind;
  for (const auto& [key, kind] : kinds) {
    if (key.first == run_id) by_kind[kind].push_back(key.second);
  }
  const int nodes = count_domains(ranks);
  if (nodes == 1) {
    out += "; every collective within the node (shared memory)";
  } else {
    std::string parts;
    for (const auto& [kind, sizes] : by_kind) {
      std::string list;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        list += (i == 0 ? "" : i + 1 == sizes.size() ? " and " : ", ") + std::to_string(sizes[i]);
      }
      parts += (parts.empty() ? "" : ", ") + std::string("collectives of ") + list + " ranks " +
               kind_text(kind);
    }
    if (!parts.empty()) out += "; " + parts;
    const int per_node = static_cast<int>(ranks.size()) / nodes;
    if (!shape.nodes_given && nodes * per_node == static_cast<int>(ranks.size())) {
      out +=
          "; local:" + std::to_string(nodes) + "x" + std::to_string(per_node) + " plans that shape";
    }
  }
  return out;
}

}  // namespace

Result<CostSetup> make_cost_setup(const std::string& cluster, const std::string& costs_path,
                                  CostStatistic statistic, bool emulated_nodes) {
  CostSetup s;
  const auto local = parse_local_cluster(cluster);
  if (local && !*local) return local->error();
  if (!costs_path.empty()) {
    auto db = open_costs(costs_path);
    if (!db) return db.error();
    s.db = std::move(*db);
  }
  std::string device;
  if (local) {
    const LocalShape shape = **local;
    if (!s.db) {
      return input_error(
          "cluster",
          " " + cluster +
              ": expected {costs} FILE too (a local cluster's device spec is derived from "
              "its profile)");
    }
    auto points = s.db->points();
    if (!points) return points.error();
    auto runs = s.db->runs();
    if (!runs) return runs.error();
    const auto devices = point_devices(*points);
    auto chosen = choose_local_device(devices, shape, costs_path);
    if (!chosen) return chosen.error();
    device = *chosen;
    const auto kinds = classify_groups(*runs, device);
    const auto split = split_points(*points, device, kinds);
    const auto measured = profile_shape(*runs, device);
    s.profile_note = describe_profile(device, *runs, kinds, measured, shape);
    const int n = shape.num_ranks();
    const double memory = host_memory_bytes() / n;
    Result<Cluster> c = Error{""};
    if (shape.nodes == 1) {
      const auto spec = derive_device_spec(*points, device, memory);
      c = local_cluster(shape, spec, derive_link_latency(*points, device), 0.0);
    } else if (emulated_nodes && split.inter.empty()) {
      // Nodes emulated on the profiled host: its shared memory is also the "network".
      auto spec = derive_device_spec(split.intra, device, memory);
      spec.nic_bandwidth = spec.nvlink_bandwidth;
      const double latency = derive_link_latency(split.intra, device);
      c = local_cluster(shape, spec, latency, latency);
      s.profile_note +=
          " Nodes emulated on one host: the links between them are its shared "
          "memory, as measured within the node.";
    } else {
      // Within a node the collectives measured within one; between nodes those that crossed.
      const auto inter_spec = derive_device_spec(split.inter, device, memory);
      auto spec = derive_device_spec(split.intra, device, memory);
      spec.nic_bandwidth = inter_spec.nvlink_bandwidth;
      if (!(spec.nvlink_bandwidth > 0.0)) spec.nvlink_bandwidth = spec.nic_bandwidth;
      const double inter_latency = derive_link_latency(split.inter, device);
      const double intra_latency = derive_link_latency(split.intra, device);
      c = local_cluster(shape, spec, intra_latency > 0.0 ? intra_latency : inter_latency,
                        inter_latency);
    }
    if (!c) return c.error();
    s.cluster = std::make_unique<Cluster>(std::move(*c));
  } else {
    auto c = load_cluster(cluster);
    if (!c) return c.error();
    s.cluster = std::make_unique<Cluster>(std::move(*c));
  }
  MOEPLAN_TRY_STATUS(finish_setup(s, device, statistic));
  return s;
}

Result<CostSetup> make_cost_setup(const Cluster& cluster, const std::string& costs_path,
                                  CostStatistic statistic) {
  CostSetup s;
  if (!costs_path.empty()) {
    auto db = open_costs(costs_path);
    if (!db) return db.error();
    s.db = std::move(*db);
  }
  s.cluster = std::make_unique<Cluster>(cluster);
  MOEPLAN_TRY_STATUS(finish_setup(s, "", statistic));
  return s;
}

}  // namespace moeplan::planner
