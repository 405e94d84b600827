// The cluster and cost source a planning run uses: a bundled or file cluster, or `local:N` (this
// machine with N ranks, its device spec derived from a profile); the roofline (calibrated where
// the device has a calibration), or the measured cost database (a file written by `moeplan
// profile` or `moeplan costs import`). `moeplan plan --costs`, `validate` and
// moeplan-gui's "profile DB" cost source all set up their costs here.
#pragma once

#include <memory>
#include <string>

#include "planner/costs/cost_db.hpp"
#include "planner/costs/measured_costs.hpp"
#include "planner/costs/roofline_costs.hpp"

namespace moeplan::planner {

struct CostSetup {
  std::unique_ptr<Cluster> cluster;
  /// The device's bundled calibration (resources/devices/calibration/), or null.
  std::shared_ptr<const Calibration> calibration;
  /// Calibrated where the device has a calibration, else the plain roofline.
  std::unique_ptr<RooflineCosts> roofline;
  std::unique_ptr<CostDb> db;               ///< null without a cost database
  std::unique_ptr<MeasuredCosts> measured;  ///< null without a cost database
  /// For a `local:` cluster: what its profile measured, e.g. "cpu:…/ranks=2/nodes=2: 2 ranks on
  /// 2 nodes (nodeA: 0; nodeB: 1); collectives of 2 ranks crossed nodes". Empty otherwise.
  std::string profile_note;
  /// The measured source when a cost database was given, else the roofline.
  const CostSource& costs() const {
    return measured ? static_cast<const CostSource&>(*measured) : *roofline;
  }
};

/// Loads the cluster (`local:N` and `local:KxM` need `costs_path`: the device is the profile of
/// N = K·M ranks on one node, `…/ranks=N`, or on K nodes, `…/ranks=N/nodes=K`; local:N takes a
/// profile of N ranks on several nodes when there is no one-node profile, and says so) and, when
/// `costs_path` is not empty, the cost database (it must exist; it is opened, never created).
/// Errors name the option (--cluster,
/// --costs) and the file. `emulated_nodes`: local:KxM groups the ranks of a one-node profile
/// into K nodes on that one host (validate --ranks-per-node), so the network between them is the
/// host's shared memory, with the figures measured within the node.
Result<CostSetup> make_cost_setup(const std::string& cluster, const std::string& costs_path,
                                  CostStatistic statistic = CostStatistic::kMedian,
                                  bool emulated_nodes = false);

/// The same for a cluster already built (a GUI's edited cluster): the roofline of `cluster` and,
/// when `costs_path` is not empty, the database's measured costs for it, read as
/// make_cost_setup reads them for a named cluster.
Result<CostSetup> make_cost_setup(const Cluster& cluster, const std::string& costs_path,
                                  CostStatistic statistic = CostStatistic::kMedian);

}  // namespace moeplan::planner
