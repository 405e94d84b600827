// Layout legality, rank mapping and enumeration.
#include "planner/layout.hpp"

namespace moeplan::planner {

std::string dispatcher_name(Dispatcher d) {
  switch (d) {
    case Dispatcher::kPaddedA2a: return "padded_a2a";
    case Dispatcher::kAllGather: return "allgather";
    case Dispatcher::kA2av: return "a2av";
  }
  return "?";
}

std::string mapping_name(RankMapping m) {
  return m == RankMapping::kTpInnermost ? "tp_innermost" : "ep_innermost";
}

std::optional<Dispatcher> parse_dispatcher(const std::string& name) {
  for (const Dispatcher d : kAllDispatchers) {
    if (dispatcher_name(d) == name) return d;
  }
  return std::nullopt;
}

int Layout::gpu(int replica, int ep_rank, int tp_rank) const {
  const int base = replica * ep_size * tp_size;
  return base + (mapping == RankMapping::kTpInnermost ? ep_rank * tp_size + tp_rank
                                                      : tp_rank * ep_size + ep_rank);
}

std::vector<std::vector<int>> Layout::ep_groups() const {
  std::vector<std::vector<int>> out;
  for (int r = 0; r < dp_size; ++r) {
    for (int t = 0; t < tp_size; ++t) {
      std::vector<int> g;
      for (int e = 0; e < ep_size; ++e) g.push_back(gpu(r, e, t));
      out.push_back(std::move(g));
    }
  }
  return out;
}

std::vector<std::vector<int>> Layout::tp_groups() const {
  std::vector<std::vector<int>> out;
  for (int r = 0; r < dp_size; ++r) {
    for (int e = 0; e < ep_size; ++e) {
      std::vector<int> g;
      for (int t = 0; t < tp_size; ++t) g.push_back(gpu(r, e, t));
      out.push_back(std::move(g));
    }
  }
  return out;
}

std::string Layout::shape_name() const {
  std::string s = "ep" + std::to_string(ep_size) + "×tp" + std::to_string(tp_size);
  return dp_size > 1 ? "dp" + std::to_string(dp_size) + "×" + s : s;
}

std::optional<std::string> layout_rule_violation(const models::MoeModel& model, int ep_size,
                                                 int tp_size) {
  if (model.num_experts % ep_size != 0) {
    return "num_experts % ep_size == 0: " + std::to_string(model.num_experts) + " % " +
           std::to_string(ep_size) + " = " + std::to_string(model.num_experts % ep_size);
  }
  if (model.moe_intermediate_size % tp_size != 0) {
    return "moe_intermediate_size % tp_size == 0: " + std::to_string(model.moe_intermediate_size) +
           " % " + std::to_string(tp_size) + " = " +
           std::to_string(model.moe_intermediate_size % tp_size);
  }
  const std::int64_t shared = model.shared_intermediate_total();
  if (shared > 0 && shared % tp_size != 0) {
    return "shared expert width % tp_size == 0: " + std::to_string(shared) + " % " +
           std::to_string(tp_size) + " = " + std::to_string(shared % tp_size);
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
      if (auto rule = layout_rule_violation(model, ep, tp)) {
        out.excluded.push_back({n, dp, ep, tp, *rule});
        continue;
      }
      for (const Dispatcher d : options.dispatchers) {
        for (const RankMapping m : {RankMapping::kTpInnermost, RankMapping::kEpInnermost}) {
          if (m == RankMapping::kEpInnermost && (ep == 1 || tp == 1)) continue;
          out.layouts.push_back({n, dp, ep, tp, d, m});
        }
      }
    }
  }
  return out;
}

}  // namespace moeplan::planner
