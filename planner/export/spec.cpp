// The export spec: checks a plan's layout, model, cluster and placement against each other.
#include "planner/export/spec.hpp"

#include <algorithm>
#include <cstdio>

#include "models/file_io.hpp"
#include "models/index.hpp"
#include "models/registry.hpp"
#include "planner/layout.hpp"

namespace moeplan::planner {

Result<std::string> file_fingerprint(const std::filesystem::path& path) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  std::uint64_t h = 1469598103934665603ULL;
  for (const char ch : *text) {
    h ^= static_cast<unsigned char>(ch);
    h *= 1099511628211ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return "fnv1a64:" + std::string(buf);
}

int ExportSpec::num_nodes() const {
  const int g = std::max(1, gpus_per_node);
  return (chosen.layout.num_gpus + g - 1) / g;
}

Result<ExportSpec> make_export_spec(const PlanSummary& plan, const PlannedLayout& chosen,
                                    const models::MoeModel& model, const Cluster& cluster,
                                    const PlacementFile* placement,
                                    const std::string& placement_source) {
  // A plan read from a file names it: its recorded model or cluster is what disagrees.
  const std::string where = plan.source.empty() ? "" : plan.source + ": ";
  if (model.name != plan.model) {
    return Error{where + "model '" + model.name + "' (" + model.source_path +
                 "): expected the plan's model '" + plan.model + "'"};
  }
  if (cluster.num_gpus() < plan.num_gpus) {
    return Error{where + "cluster '" + cluster.name() + "' has " +
                 std::to_string(cluster.num_gpus()) + " GPUs, the plan needs " +
                 std::to_string(plan.num_gpus)};
  }
  // The slots the layout holds: its placement's, else those the plan costed it with.
  const int planned_slots = chosen.num_slots > 0 ? chosen.num_slots : model.num_experts;
  const bool placement_fits =
      placement != nullptr && placement->result.placement.num_experts == model.num_experts;
  const int slots = placement_fits ? placement->result.placement.num_slots : planned_slots;
  if (auto rule = layout_rule_violation(model, chosen.layout.ep_size, chosen.layout.tp_size,
                                        slots - model.num_experts)) {
    return input_error("layout", " " + chosen.layout.shape_name() + " is illegal for '" +
                                     model.name + "': " + *rule);
  }
  if (placement == nullptr && planned_slots != model.num_experts) {
    return input_error("placement",
                       ": layout " + chosen.layout.shape_name() + " was planned with " +
                           std::to_string(planned_slots) + " expert slots (" +
                           std::to_string(planned_slots - model.num_experts) +
                           " redundant); expected its placement file (moeplan place --gpus " +
                           std::to_string(chosen.layout.ep_size) + " --slots " +
                           std::to_string(planned_slots) + " --out FILE)");
  }
  ExportSpec s;
  s.model = model.name;
  s.model_source = model.source_path;
  // The plan's weight format by name (plans written before formats were recorded: the
  // model's own), and the checkpoint's as its config.json says.
  s.checkpoint_weights = model.checkpoint_weights;
  if (plan.weights.empty() || plan.weights == model.weights.name()) {
    s.weights = model.weights;
  } else if (plan.weights == model.checkpoint_weights.name()) {
    s.weights = model.checkpoint_weights;
  } else {
    auto f = parse_weight_format(plan.weights, model.checkpoint_weights.plain);
    if (!f) {
      return Error{(plan.source.empty() ? std::string("plan") : plan.source) +
                   ": key 'model.weights.name': " + f.error().message};
    }
    s.weights = *f;
  }
  auto mf = file_fingerprint(model.source_path);
  if (!mf) return mf.error();
  s.model_fingerprint = *mf;
  s.num_hidden_layers = model.num_hidden_layers;
  for (int h = 0; h < model.num_hidden_layers; ++h) {
    if (model.moe_layers[uz(h)]) s.moe_layer_ids.push_back(h);
  }
  s.num_experts = model.num_experts;
  s.top_k = model.num_experts_per_tok;
  s.num_attention_heads = model.attention.num_heads;
  s.num_kv_heads = model.attention.num_kv_heads;
  s.cluster = cluster.name();
  s.cluster_source = cluster.info().source;
  auto cf = file_fingerprint(cluster.info().source);
  if (!cf) return cf.error();
  s.cluster_fingerprint = *cf;
  s.device = cluster.device().name;
  s.gpus_per_node = cluster.info().gpus_per_node;
  s.plan_source = plan.source;
  s.cost_source = plan.cost_source;
  s.load_source = plan.load_source;
  s.cost_placement = plan.placement_policy;
  s.workload = plan.workload;
  s.chosen = chosen;
  for (const auto& l : plan.layouts) {
    if (l.rank != chosen.rank) s.alternatives.push_back(l);
  }
  if (placement != nullptr) {
    const Placement& p = placement->result.placement;
    const std::string& src = placement_source;
    if (p.num_experts != model.num_experts) {
      return Error{src + ": key 'num_experts': expected " + std::to_string(model.num_experts) +
                   " (the routed experts of " + model.name + "), got " +
                   std::to_string(p.num_experts)};
    }
    if (p.ep_size != chosen.layout.ep_size) {
      return Error{src + ": key 'num_gpus': the placement is for " + std::to_string(p.ep_size) +
                   " EP ranks, expected " + std::to_string(chosen.layout.ep_size) +
                   " (the EP size of layout " + chosen.layout.shape_name() + ")"};
    }
    const int num_moe = static_cast<int>(s.moe_layer_ids.size());
    Placement full = p;
    if (p.num_layers() == 1) {
      full.physical_to_logical.assign(uz(num_moe), p.physical_to_logical.front());
    } else if (p.num_layers() == num_moe) {
      std::vector<int> rows(uz(num_moe));
      for (int i = 0; i < num_moe; ++i) rows[uz(i)] = i;
      if (placement->layer_ids != s.moe_layer_ids && placement->layer_ids != rows) {
        return Error{src + ": key 'layer_ids': expected the MoE layers of " + model.name + " (" +
                     std::to_string(s.moe_layer_ids.front()) + ".." +
                     std::to_string(s.moe_layer_ids.back()) + ")"};
      }
    } else {
      return Error{src + ": key 'physical_to_logical_map': expected 1 layer or the " +
                   std::to_string(num_moe) + " MoE layers of " + model.name + ", got " +
                   std::to_string(p.num_layers())};
    }
    if (full.policy.empty()) full.policy = src;
    s.placement = std::move(full);
  }
  return s;
}

Result<ExportSpec> export_spec_from_plan(const PlanSummary& plan, const std::string& selector,
                                         const std::string& placement_path) {
  auto chosen = select_layout(plan, selector);
  if (!chosen) return chosen.error();
  std::error_code ec;
  auto model = models::load_model(
      std::filesystem::is_regular_file(plan.model_source, ec) ? plan.model_source : plan.model);
  if (!model) return model.error();
  auto cluster =
      load_cluster(std::filesystem::is_regular_file(plan.cluster_source, ec) ? plan.cluster_source
                                                                             : plan.cluster);
  if (!cluster) return cluster.error();
  if (placement_path.empty()) {
    return make_export_spec(plan, *chosen, *model, *cluster, nullptr, "");
  }
  auto placement = load_placement_file(placement_path);
  if (!placement) return placement.error();
  return make_export_spec(plan, *chosen, *model, *cluster, &*placement, placement_path);
}

}  // namespace moeplan::planner
