// Layout enumeration over the shared legality rules.
#include "planner/layout.hpp"

namespace moeplan::planner {

models::LayoutDims layout_dims(const models::MoeModel& model) {
  return {model.num_experts, model.moe_intermediate_size, model.shared_intermediate_total()};
}

std::optional<std::string> layout_rule_violation(const models::MoeModel& model, int ep_size,
                                                 int tp_size, std::int64_t redundant) {
  models::LayoutDims dims = layout_dims(model);
  dims.redundant = redundant;
  if (auto v = models::layout_violation(dims, ep_size, tp_size)) {
    return v->rule_text();
  }
  return std::nullopt;
}

Enumeration enumerate_layouts(const models::MoeModel& model, const EnumerateOptions& options) {
  Enumeration out;
  const int n = options.num_gpus;
  for (int dp = 1; dp <= n; ++dp) {
    if (n % dp != 0 || (dp > 1 && !options.attention_dp)) continue;
    const int group = n / dp;
    for (int ep = 1; ep <= group; ++ep) {
      if (group % ep != 0) continue;
      const int tp = group / ep;
      const std::int64_t redundant = options.redundancy.redundant_at(model.num_experts, ep);
      if (auto rule = layout_rule_violation(model, ep, tp, redundant)) {
        out.excluded.push_back(
            {n, dp, ep, tp, *rule, redundant > 0 && !layout_rule_violation(model, ep, tp, 0)});
        continue;
      }
      for (const Dispatcher d : options.dispatchers) {
        if (models::dispatcher_violation(d, ep, tp, options.gpus_per_node)) continue;
        for (const RankMapping m : models::kAllMappings) {
          if (m == RankMapping::kEpInnermost && (ep == 1 || tp == 1)) continue;
          for (const bool tbo : options.tbo) out.layouts.push_back({n, dp, ep, tp, d, m, tbo});
        }
      }
    }
  }
  return out;
}

}  // namespace moeplan::planner
