// Placement judged by time (issue 19, part 3): a placement's predicted MoE time on steps it did
// not see, from the full cost model (experts, dispatch, combine, the slowest rank of each layer).
#pragma once

#include <string>
#include <vector>

#include "models/moe_model.hpp"
#include "planner/costs/cost_model.hpp"
#include "planner/placement/placement.hpp"

namespace moeplan::planner {

/// Steps [S][L][E] of routed pairs per expert.
using PlacementSteps = std::vector<std::vector<std::vector<double>>>;

/// Predicted MoE time of one forward pass, mean over `steps` (seconds, all MoE layers): each
/// step's load costed by cost_layout on `layout` with `placement` (ctx's model, cluster, costs
/// and workload; its load and placement are replaced). Errors: no steps, steps whose layers
/// are neither 1 nor the model's MoE layers, what cost_layout reports.
Result<double> mean_moe_seconds(const CostContext& ctx, const Layout& layout,
                                const Placement& placement, const PlacementSteps& steps,
                                const std::string& source);

}  // namespace moeplan::planner
