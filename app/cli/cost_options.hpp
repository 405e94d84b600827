// The cluster and cost source a planning command uses: a bundled or file cluster, or
// `local:N` (this machine with N ranks, its device spec derived from a profile); the roofline,
// or the measured cost database given with --costs.
#pragma once

#include <memory>
#include <string>

#include "planner/cost_db.hpp"
#include "planner/measured_costs.hpp"
#include "planner/roofline_costs.hpp"

namespace moeplan::cli {

struct CostSetup {
  std::unique_ptr<planner::Cluster> cluster;
  std::unique_ptr<planner::RooflineCosts> roofline;
  std::unique_ptr<planner::CostDb> db;               ///< null without --costs
  std::unique_ptr<planner::MeasuredCosts> measured;  ///< null without --costs
  /// The measured source when --costs was given, else the roofline.
  const planner::CostSource& costs() const {
    return measured ? static_cast<const planner::CostSource&>(*measured) : *roofline;
  }
};

/// Loads the cluster (`local:N` needs `costs_path`) and, when `costs_path` is not empty, the cost
/// database (it must exist; it is opened, never created). Errors name the option and the file.
Result<CostSetup> make_cost_setup(
    const std::string& cluster, const std::string& costs_path,
    planner::CostStatistic statistic = planner::CostStatistic::kMedian);

}  // namespace moeplan::cli
