// Cluster and cost-source setup shared by `plan` and `validate`.
#include "app/cli/cost_options.hpp"

#include <algorithm>
#include <filesystem>

#include "planner/local_cluster.hpp"

namespace moeplan::cli {

Result<CostSetup> make_cost_setup(const std::string& cluster, const std::string& costs_path,
                                  planner::CostStatistic statistic) {
  CostSetup s;
  const auto local = planner::parse_local_cluster(cluster);
  if (local && !*local) return local->error();
  if (!costs_path.empty()) {
    std::error_code ec;
    if (std::filesystem::is_directory(costs_path, ec)) {
      return Error{"--costs " + costs_path +
                   ": expected a cost database file written by moeplan profile, got a directory"};
    }
    if (!std::filesystem::is_regular_file(costs_path, ec)) {
      return Error{"--costs " + costs_path +
                   ": no such file; expected a cost database written "
                   "by moeplan profile"};
    }
    auto db = planner::CostDb::open(costs_path, false);
    if (!db) return Error{"--costs: " + db.error().message};
    s.db = std::move(*db);
  }
  std::string device;
  if (local) {
    const int n = **local;
    if (!s.db) {
      return Error{"--cluster " + cluster +
                   ": expected --costs FILE too (a local cluster's device spec is derived from "
                   "its profile)"};
    }
    auto points = s.db->points();
    if (!points) return points.error();
    const auto devices = planner::point_devices(*points);
    const std::string suffix = "/ranks=" + std::to_string(n);
    for (const auto& d : devices) {
      if (d.size() >= suffix.size() &&
          d.compare(d.size() - suffix.size(), suffix.size(), suffix) == 0) {
        device = d;
      }
    }
    if (device.empty() && devices.size() == 1) device = devices.front();
    if (device.empty()) {
      std::string list;
      for (const auto& d : devices) list += (list.empty() ? "" : ", ") + d;
      return Error{"--costs " + costs_path + ": no profile of " + std::to_string(n) +
                   " ranks; expected a device ending in '" + suffix +
                   "' among: " + (list.empty() ? "(none)" : list)};
    }
    const double memory = planner::host_memory_bytes() / n;
    const auto spec = planner::derive_device_spec(*points, device, memory);
    auto c = planner::local_cluster(n, spec, planner::derive_link_latency(*points, device));
    if (!c) return c.error();
    s.cluster = std::make_unique<planner::Cluster>(std::move(*c));
  } else {
    auto c = planner::load_cluster(cluster);
    if (!c) return c.error();
    s.cluster = std::make_unique<planner::Cluster>(std::move(*c));
  }
  s.roofline = std::make_unique<planner::RooflineCosts>(*s.cluster);
  if (s.db) {
    auto m = planner::MeasuredCosts::load(*s.db, *s.cluster, device, statistic);
    if (!m) return Error{"--costs: " + m.error().message};
    s.measured = std::move(*m);
  }
  return s;
}

}  // namespace moeplan::cli
