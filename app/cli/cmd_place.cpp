// `moeplan place`: places experts (with redundant slots) on EP ranks for a measured, traced or
// synthetic load and reports balance on the load and on steps the placement has not seen.
#include <cstdio>
#include <memory>
#include <optional>

#include "app/cli/cli_common.hpp"
#include "app/cli/table.hpp"
#include "models/registry.hpp"
#include "models/units.hpp"
#include "planner/placement/load_io.hpp"
#include "planner/placement/place_run.hpp"
#include "planner/placement/placement.hpp"
#include "planner/placement/placement_file.hpp"
#include "planner/placement/placement_metrics.hpp"
#include "profiler/routed_load.hpp"

namespace moeplan::cli {

namespace {

struct PlaceOptions {
  std::string load;
  std::string trace;
  std::string synthetic;
  std::string model;
  std::string policy = "best";
  std::string out;
  int gpus = 0;
  int nodes = 1;
  int slots = 0;
  int groups = 0;
  int eval_steps = 0;
  int fit_steps = -1;
  std::int64_t step_tokens = 4096;
  std::uint64_t seed = 0;
  double locality_weight = 0.25;
  bool json = false;
};

nlohmann::json scores_json(const planner::StepScores& s) {
  return {{"steps", s.num_steps},
          {"mean_balancedness", s.mean_balancedness},
          {"p99_balancedness", s.p99_balancedness}};
}

std::string scores_text(const planner::StepScores& s) {
  return "mean " + format_fixed(s.mean_balancedness, 4) + ", p99 " +
         format_fixed(s.p99_balancedness, 4);
}

int run_place(const PlaceOptions& o) {
  const int sources = static_cast<int>(!o.load.empty()) + static_cast<int>(!o.trace.empty()) +
                      static_cast<int>(!o.synthetic.empty());
  if (sources != 1) {
    return report_error(Error{"place: expected exactly one of --load, --trace or --synthetic"});
  }
  planner::PlaceRequest request;
  request.num_gpus = o.gpus;
  request.num_nodes = o.nodes;
  request.num_slots = o.slots;
  request.num_groups = o.groups;
  request.eval_steps = o.eval_steps;
  request.fit_steps = o.fit_steps;
  request.step_tokens = o.step_tokens;
  request.seed = o.seed;
  request.locality_weight = o.locality_weight;
  if (auto s = planner::check_place_request(request); !s) return report_error(s.error());
  auto policy = planner::parse_policy(o.policy);
  if (!policy) return report_error(policy.error());
  request.policy = *policy;

  std::optional<models::MoeModel> model;
  if (!o.model.empty()) {
    auto m = models::load_model(o.model);
    if (!m) return report_error(m.error());
    model = std::move(*m);
  }
  const models::MoeModel* mp = model ? &*model : nullptr;
  auto data = !o.load.empty()    ? planner::read_load_file(o.load, mp)
              : !o.trace.empty() ? planner::read_trace_file(o.trace, mp)
                                 : profiler::synthetic_any(o.synthetic, mp);
  if (!data) return report_error(data.error());
  auto outcome = planner::run_placement(*data, request, mp);
  if (!outcome) return report_error(outcome.error());
  const planner::PlacementConfig& config = outcome->config;
  const planner::ExpertLoad& fit = outcome->fit;
  const auto* placed = &outcome->placed;
  const auto* figures = &outcome->figures;
  const auto& held_out = outcome->held_out;
  const auto& sampled = outcome->sampled;
  const auto& spread = outcome->spread;
  const int num_file_steps = outcome->num_file_steps;
  const int fit_steps = outcome->fit_steps;
  const std::int64_t pairs_per_step = outcome->pairs_per_step;

  planner::PlacementFile file{*placed, config, data->layer_ids, data->load.source};
  if (!o.out.empty()) {
    if (auto st = planner::write_placement_file(o.out, file); !st.ok()) {
      return report_error(st.error());
    }
  }

  const int num_slots = placed->placement.num_slots;
  if (o.json) {
    nlohmann::json j = planner::placement_to_json(file);
    j.erase("format");
    j.erase("version");
    j["load_format"] = data->format;
    j["num_layers"] = fit.num_layers();
    j["hierarchical"] = config.hierarchical();
    j["balancedness"] = figures->balancedness;
    j["imbalance"] = figures->imbalance;
    j["upper_bound"] = figures->upper_bound;
    j["layer_balancedness"] = figures->layer_balancedness;
    j["seconds"] = placed->seconds;
    if (num_file_steps >= 2) j["fit_steps"] = fit_steps;
    if (held_out) j["held_out"] = scores_json(*held_out);
    if (sampled) {
      j["sampled_steps"] = scores_json(*sampled);
      j["sampled_steps"]["step_tokens"] = o.step_tokens;
      j["sampled_steps"]["routed_pairs"] = pairs_per_step;
    }
    if (spread) {
      j["trace"] = {{"nodes_per_token", spread->nodes_per_token},
                    {"gpus_per_token", spread->gpus_per_token},
                    {"cross_node_fraction", spread->cross_node_fraction}};
    }
    const std::string text = j.dump(2) + "\n";
    std::fputs(text.c_str(), stdout);
    return kExitOk;
  }
  std::vector<std::pair<std::string, std::string>> rows;
  rows.emplace_back("policy", placed->placement.policy);
  rows.emplace_back("load", data->load.source + " (" + data->format + ", " +
                                std::to_string(fit.num_layers()) + " layers × " +
                                std::to_string(fit.num_experts) + " experts)");
  if (num_file_steps >= 2) {
    rows.emplace_back("fit on", "steps [0, " + std::to_string(fit_steps) + ") of " +
                                    std::to_string(num_file_steps));
  }
  rows.emplace_back(
      "machine", std::to_string(config.num_gpus) + " GPUs on " + std::to_string(config.num_nodes) +
                     (config.num_nodes == 1 ? " node, " : " nodes, ") + std::to_string(num_slots) +
                     " slots (" + std::to_string(num_slots - fit.num_experts) + " redundant), " +
                     std::to_string(config.num_groups) +
                     (config.num_groups == 1 ? " group, " : " groups, ") +
                     (config.hierarchical() ? "hierarchical" : "global"));
  rows.emplace_back("balancedness", format_fixed(figures->balancedness, 4) + " (upper bound " +
                                        format_fixed(figures->upper_bound, 4) + ")");
  rows.emplace_back("imbalance", format_fixed(figures->imbalance, 4));
  if (held_out) {
    rows.emplace_back("held-out steps",
                      std::to_string(held_out->num_steps) + " steps: " + scores_text(*held_out));
  }
  if (sampled) {
    rows.emplace_back("sampled steps", std::to_string(sampled->num_steps) + " steps of " +
                                           std::to_string(o.step_tokens) +
                                           " tokens: " + scores_text(*sampled));
  }
  if (spread) {
    rows.emplace_back("trace spread", format_fixed(spread->nodes_per_token, 3) + " nodes, " +
                                          format_fixed(spread->gpus_per_token, 3) +
                                          " GPUs per token; cross-node " +
                                          format_fixed(spread->cross_node_fraction, 4));
  }
  rows.emplace_back("seconds", format_fixed(placed->seconds, 4));
  if (!o.out.empty()) rows.emplace_back("written", o.out);
  const std::string text = render_key_values(rows);
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

}  // namespace

void add_place_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<PlaceOptions>();
  auto* cmd = app.add_subcommand(
      "place", "Place experts (and redundant replicas) on EP ranks for a load; report balance");
  cmd->add_option("--load", o->load,
                  "Expert counts: SGLang JSON (logical_count [L,E] or [S,L,E]), CSV or .npy");
  cmd->add_option("--trace", o->trace, "Per-token top-k trace: JSON topk_ids [L,T,k] or .npy");
  cmd->add_option("--synthetic", o->synthetic,
                  "Synthetic load: uniform | powerlaw:alpha=A | hot:n=N,share=S "
                  "[,layers=,experts=,tokens=,seed=,shuffle=1]");
  cmd->add_option("--gpus", o->gpus, "EP ranks (GPUs)");
  cmd->add_option("--nodes", o->nodes, "Nodes (GPUs split evenly)")->capture_default_str();
  cmd->add_option("--slots", o->slots, "Physical expert slots per layer (0: one per expert)")
      ->capture_default_str();
  cmd->add_option("--groups", o->groups,
                  "Expert groups (default: the model's n_group, else 1); hierarchical when "
                  "groups % nodes == 0");
  cmd->add_option("--policy", o->policy, "contiguous | round_robin | eplb | best")
      ->capture_default_str();
  cmd->add_option("--model", o->model, "Bundled model name or config.json (checks the load)");
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->add_option("--out", o->out, "Write the placement file (JSON, atomically)");
  cmd->add_option("--eval-steps", o->eval_steps,
                  "Score on N steps drawn as multinomials from the load's frequencies");
  cmd->add_option("--step-tokens", o->step_tokens,
                  "Tokens per step (× top-k routed pairs) for drawn steps")
      ->capture_default_str();
  cmd->add_option("--fit-steps", o->fit_steps,
                  "For [S,L,E] loads: fit on the first K steps, score on the rest (default S/2)");
  cmd->add_option("--seed", o->seed, "Seed of drawn steps")->capture_default_str();
  cmd->add_option("--locality-weight", o->locality_weight,
                  "best with a trace: balancedness traded per unit of split co-activated pairs")
      ->capture_default_str();
  cmd->callback([&action, o] { action = [o] { return run_place(*o); }; });
}

}  // namespace moeplan::cli
