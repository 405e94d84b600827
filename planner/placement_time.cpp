// Placement judged by time: the predicted MoE time of a placement on unseen steps.
#include "planner/placement_time.hpp"

namespace moeplan::planner {

Result<double> mean_moe_seconds(const CostContext& ctx, const Layout& layout,
                                const Placement& placement, const PlacementSteps& steps,
                                const std::string& source) {
  if (steps.empty()) return Error{"predicted MoE time: no steps to score '" + source + "' on"};
  double total = 0.0;
  for (const auto& step : steps) {
    ExpertLoad load;
    load.source = source;
    load.num_experts = step.empty() ? 0 : static_cast<int>(step.front().size());
    load.counts = step;
    const CostContext c{ctx.model, ctx.cluster,
                        ctx.costs, ctx.workload,
                        load,      [&placement](int) -> Result<Placement> { return placement; }};
    auto cost = cost_layout(c, layout);
    if (!cost) return cost.error();
    total += cost->step_seconds;
  }
  return total / static_cast<double>(steps.size());
}

}  // namespace moeplan::planner
