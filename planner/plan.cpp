// Plan: enumerate, cost, rank, recommend; JSON serialisation.
#include "planner/plan.hpp"

#include <algorithm>
#include <cmath>

#include "models/units.hpp"

namespace moeplan::planner {

namespace {

std::string ms(double seconds) { return format_fixed(seconds * 1e3, 3) + " ms"; }

std::string layout_label(const Layout& l) { return l.full_name(); }

std::vector<std::pair<std::string, const CostItem*>> parts(const LayerCost& c) {
  return {{"router", &c.router},   {"dispatch", &c.dispatch},
          {"experts", &c.experts}, {"combine", &c.combine},
          {"tp", &c.tp},           {"shared", &c.shared}};
}

/// Equal step times up to rounding (relative 1e-9): a tie, not a win.
bool same_time(const LayoutCost& a, const LayoutCost& b) {
  return std::abs(a.step_seconds - b.step_seconds) <=
         1e-9 * std::max(a.step_seconds, b.step_seconds);
}

std::vector<std::string> recommend_reasons(const Plan& plan) {
  std::vector<std::string> reasons;
  const auto& layouts = plan.layouts;
  if (plan.recommended < 0) {
    double smallest = layouts.empty() ? 0.0 : layouts.front().memory.total();
    for (const auto& l : layouts) smallest = std::min(smallest, l.memory.total());
    reasons.push_back("no layout fits in the " + plan.device + "'s " +
                      format_bytes(layouts.empty() ? 0.0 : layouts.front().memory_capacity) +
                      " per GPU: the smallest needs " + format_bytes(smallest) +
                      "; use more GPUs ({gpus}) or a larger cluster");
    return reasons;
  }
  const LayoutCost& best = layouts[static_cast<std::size_t>(plan.recommended)];
  std::string r = "fastest feasible layout: " + ms(best.step_seconds) + " per step over " +
                  std::to_string(plan.num_moe_layers) + " MoE layers, " +
                  format_fixed(best.tokens_per_s_per_gpu, 0) + " tokens/s/GPU";
  if (layouts.size() > 1 && layouts[1].feasible) {
    const double gain = layouts[1].step_seconds / best.step_seconds - 1.0;
    r += same_time(best, layouts[1]) ? "; tied with " + layout_label(layouts[1].layout) +
                                           " (listed first by enumeration order)"
                                     : "; " + format_fixed(gain * 100.0, 1) + "% ahead of " +
                                           layout_label(layouts[1].layout);
  }
  reasons.push_back(r);
  const auto p = parts(best.per_layer);
  const auto top = std::max_element(p.begin(), p.end(), [](const auto& a, const auto& b) {
    return a.second->seconds < b.second->seconds;
  });
  reasons.push_back("largest part of its layer: " + top->first + " " + ms(top->second->seconds) +
                    " of " + ms(best.per_layer.total()) + " (" +
                    format_fixed(100.0 * top->second->seconds / best.per_layer.total(), 0) + "%)");
  std::string others;
  bool all_slower = true;
  for (const auto& l : layouts) {
    if (l.layout.ep_size == best.layout.ep_size && l.layout.tp_size == best.layout.tp_size &&
        l.layout.dp_size == best.layout.dp_size && l.layout.mapping == best.layout.mapping &&
        l.layout.dispatcher != best.layout.dispatcher) {
      others += (others.empty() ? "" : ", ") + dispatcher_name(l.layout.dispatcher) + " " +
                ms(l.step_seconds);
      all_slower = all_slower && !same_time(best, l);
    }
  }
  if (!others.empty()) {
    reasons.push_back("dispatcher " + dispatcher_name(best.layout.dispatcher) +
                      (all_slower ? " beats" : " is at least as fast as") +
                      " the others on the same layout: " + others + " per step");
  }
  for (const auto& l : layouts) {
    if (l.layout.ep_size == best.layout.ep_size && l.layout.tp_size == best.layout.tp_size &&
        l.layout.dp_size == best.layout.dp_size && l.layout.dispatcher == best.layout.dispatcher &&
        l.layout.mapping != best.layout.mapping) {
      reasons.push_back(same_time(best, l) ? "rank mappings " + mapping_name(best.layout.mapping) +
                                                 " and " + mapping_name(l.layout.mapping) +
                                                 " cost the same here (their groups use the "
                                                 "same kinds of links)"
                                           : "rank mapping " + mapping_name(best.layout.mapping) +
                                                 " beats " + mapping_name(l.layout.mapping) + " (" +
                                                 ms(l.step_seconds) + " per step)");
    }
  }
  if (best.imbalance > 1.0 + 1e-9 || best.expert_rows > best.useful_rows * (1.0 + 1e-9)) {
    reasons.push_back("its slowest rank computes " + format_fixed(best.expert_rows, 0) +
                      " rows for " + format_fixed(best.useful_rows, 0) + " routed pairs (load " +
                      "imbalance " + format_fixed(best.imbalance, 2) + ")");
  }
  reasons.push_back("memory " + format_bytes(best.memory.total()) + " of " +
                    format_bytes(best.memory_capacity) + " per GPU");
  const auto infeasible = std::count_if(layouts.begin(), layouts.end(),
                                        [](const LayoutCost& l) { return !l.feasible; });
  if (infeasible > 0) {
    reasons.push_back(std::to_string(infeasible) + " of " + std::to_string(layouts.size()) +
                      " legal layouts do not fit in memory");
  }
  return reasons;
}

nlohmann::json cost_item_json(const LayerCost& c) {
  nlohmann::json ms_obj = nlohmann::json::object();
  nlohmann::json src = nlohmann::json::object();
  for (const auto& [name, item] : parts(c)) {
    ms_obj[name] = item->seconds * 1e3;
    src[name] = item->source;
  }
  ms_obj["total"] = c.total() * 1e3;
  return {{"ms", ms_obj}, {"source", src}};
}

}  // namespace

Result<Plan> make_plan(const models::MoeModel& model, const Cluster& cluster,
                       const CostSource& costs, const PlanRequest& request) {
  const int n = request.num_gpus == 0 ? cluster.num_gpus() : request.num_gpus;
  if (n < 1 || n > cluster.num_gpus()) {
    return Error{"GPU count: expected 1.." + std::to_string(cluster.num_gpus()) + " (cluster '" +
                 cluster.name() + "'), got " + std::to_string(n)};
  }
  if (request.workload.tokens_per_gpu <= 0) {
    return Error{"tokens per GPU: expected a positive count, got " +
                 std::to_string(request.workload.tokens_per_gpu)};
  }
  if (request.dispatchers.empty()) return Error{"dispatchers: expected at least one"};
  Plan plan;
  plan.model = model.name;
  plan.model_source = model.source_path;
  plan.cluster = cluster.name();
  plan.cluster_source = cluster.info().source;
  plan.device = cluster.device().name;
  plan.cost_source = costs.name();
  plan.workload = request.workload;
  plan.num_gpus = n;
  plan.num_moe_layers = model.num_moe_layers();
  plan.attention_dp = request.attention_dp;

  EnumerateOptions opt;
  opt.num_gpus = n;
  opt.attention_dp = request.attention_dp;
  opt.dispatchers = request.dispatchers;
  Enumeration en = enumerate_layouts(model, opt);
  plan.excluded = std::move(en.excluded);
  if (en.layouts.empty()) {
    std::string msg =
        "model '" + model.name + "' has no legal layout on " + std::to_string(n) + " GPUs: ";
    for (std::size_t i = 0; i < plan.excluded.size() && i < 3; ++i) {
      const auto& e = plan.excluded[i];
      msg += (i == 0 ? "" : "; ") + std::string("ep") + std::to_string(e.ep_size) + "×tp" +
             std::to_string(e.tp_size) + " breaks " + e.rule;
    }
    if (plan.excluded.size() > 3) {
      msg += "; and " + std::to_string(plan.excluded.size() - 3) + " more";
    }
    for (int m = n - 1; m >= 1; --m) {
      EnumerateOptions smaller = opt;
      smaller.num_gpus = m;
      if (!enumerate_layouts(model, smaller).layouts.empty()) {
        msg += " (the largest GPU count below it with a legal layout is " + std::to_string(m) +
               ": {gpus} " + std::to_string(m) + ")";
        break;
      }
    }
    return Error{msg};
  }

  const ExpertLoad load = request.load.num_layers() > 0
                              ? request.load
                              : ExpertLoad::uniform(model.num_moe_layers(), model.num_experts);
  plan.load_source = load.source;
  const CostContext ctx{model, cluster, costs, request.workload, load, request.placement};
  if (request.only_ep_size > 0) {
    std::vector<Layout> kept;
    for (const Layout& l : en.layouts) {
      if (l.ep_size == request.only_ep_size) {
        kept.push_back(l);
        continue;
      }
      const bool listed =
          std::any_of(plan.excluded.begin(), plan.excluded.end(), [&](const auto& e) {
            return e.dp_size == l.dp_size && e.ep_size == l.ep_size && e.tp_size == l.tp_size;
          });
      if (!listed)
        plan.excluded.push_back(
            {l.num_gpus, l.dp_size, l.ep_size, l.tp_size, request.only_ep_rule});
    }
    if (kept.empty()) {
      return Error{"no legal layout of '" + model.name + "' on " + std::to_string(n) +
                   " GPUs has ep_size " + std::to_string(request.only_ep_size) + " (" +
                   request.only_ep_rule + ")"};
    }
    en.layouts = std::move(kept);
  }
  plan.placement_policy = "contiguous";
  if (request.placement) {
    auto p = request.placement(en.layouts.front().ep_size);
    if (!p) return p.error();
    plan.placement_policy = p->policy;
  }
  plan.layouts.reserve(en.layouts.size());
  for (const Layout& l : en.layouts) {
    auto c = cost_layout(ctx, l);
    if (!c) return c.error();
    plan.layouts.push_back(std::move(*c));
  }
  std::stable_sort(plan.layouts.begin(), plan.layouts.end(),
                   [](const LayoutCost& a, const LayoutCost& b) {
                     if (a.feasible != b.feasible) return a.feasible;
                     if (a.step_seconds != b.step_seconds) return a.step_seconds < b.step_seconds;
                     return a.memory.total() < b.memory.total();
                   });
  plan.recommended = plan.layouts.front().feasible ? 0 : -1;
  plan.reasons = recommend_reasons(plan);
  return plan;
}

nlohmann::json plan_to_json(const Plan& plan, int top, bool include_excluded) {
  nlohmann::json j;
  j["schema_version"] = 1;
  j["model"] = {{"name", plan.model}, {"source", plan.model_source}};
  j["cluster"] = {{"name", plan.cluster}, {"source", plan.cluster_source}, {"device", plan.device}};
  j["num_gpus"] = plan.num_gpus;
  j["num_moe_layers"] = plan.num_moe_layers;
  j["attention_dp"] = plan.attention_dp;
  j["workload"] = {{"phase", phase_name(plan.workload.phase)},
                   {"tokens_per_gpu", plan.workload.tokens_per_gpu}};
  j["cost_source"] = plan.cost_source;
  j["expert_load"] = plan.load_source;
  j["placement"] = plan.placement_policy;
  nlohmann::json layouts = nlohmann::json::array();
  const std::size_t count =
      top > 0 ? std::min(plan.layouts.size(), static_cast<std::size_t>(top)) : plan.layouts.size();
  for (std::size_t i = 0; i < count; ++i) {
    const LayoutCost& c = plan.layouts[i];
    nlohmann::json l;
    l["rank"] = i + 1;
    l["legal"] = true;
    l["dp_size"] = c.layout.dp_size;
    l["ep_size"] = c.layout.ep_size;
    l["tp_size"] = c.layout.tp_size;
    l["dispatcher"] = dispatcher_name(c.layout.dispatcher);
    l["mapping"] = mapping_name(c.layout.mapping);
    l["feasible"] = c.feasible;
    const auto items = cost_item_json(c.per_layer);
    l["layer_ms"] = items.at("ms");
    l["sources"] = items.at("source");
    l["step_ms"] = c.step_seconds * 1e3;
    l["tokens_per_s_per_gpu"] = c.tokens_per_s_per_gpu;
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    l["memory_gib"] = {{"experts", c.memory.experts / kGiB},
                       {"shared", c.memory.shared / kGiB},
                       {"dense", c.memory.dense / kGiB},
                       {"buffers", c.memory.buffers / kGiB},
                       {"activations", c.memory.activations / kGiB},
                       {"total", c.memory.total() / kGiB},
                       {"capacity", c.memory_capacity / kGiB}};
    l["balance"] = {
        {"imbalance", c.imbalance}, {"expert_rows", c.expert_rows}, {"useful_rows", c.useful_rows}};
    if (!c.layers.empty()) {
      nlohmann::json per_layer = nlohmann::json::array();
      for (std::size_t li = 0; li < c.layers.size(); ++li) {
        per_layer.push_back({{"layer_ms", c.layers[li].total() * 1e3},
                             {"experts_ms", c.layers[li].experts.seconds * 1e3},
                             {"imbalance", c.layer_imbalance[li]}});
      }
      l["per_layer"] = per_layer;
    }
    layouts.push_back(std::move(l));
  }
  if (include_excluded) {
    for (const auto& e : plan.excluded) {
      layouts.push_back({{"legal", false},
                         {"dp_size", e.dp_size},
                         {"ep_size", e.ep_size},
                         {"tp_size", e.tp_size},
                         {"dispatcher", "any"},
                         {"mapping", "any"},
                         {"feasible", false},
                         {"rule", e.rule}});
    }
  }
  j["layouts"] = std::move(layouts);
  j["recommendation"] = {{"rank", plan.recommended < 0 ? nlohmann::json(nullptr)
                                                       : nlohmann::json(plan.recommended + 1)},
                         {"reasons", plan.reasons}};
  return j;
}

}  // namespace moeplan::planner
