// Cluster and cost-source setup shared by `plan`, `validate` and moeplan-gui.
#include "planner/costs/cost_setup.hpp"

#include <algorithm>
#include <filesystem>

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
  if (!std::filesystem::is_regular_file(costs_path, ec)) {
    return input_error("costs", " " + costs_path +
                                    ": no such file; expected a cost database written "
                                    "by moeplan profile");
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

}  // namespace

Result<CostSetup> make_cost_setup(const std::string& cluster, const std::string& costs_path,
                                  CostStatistic statistic) {
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
    const int n = **local;
    if (!s.db) {
      return input_error(
          "cluster",
          " " + cluster +
              ": expected {costs} FILE too (a local cluster's device spec is derived from "
              "its profile)");
    }
    auto points = s.db->points();
    if (!points) return points.error();
    const auto devices = point_devices(*points);
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
      return input_error("costs", " " + costs_path + ": no profile of " + std::to_string(n) +
                                      " ranks; expected a device ending in '" + suffix +
                                      "' among: " + (list.empty() ? "(none)" : list));
    }
    const double memory = host_memory_bytes() / n;
    const auto spec = derive_device_spec(*points, device, memory);
    auto c = local_cluster(n, spec, derive_link_latency(*points, device));
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
