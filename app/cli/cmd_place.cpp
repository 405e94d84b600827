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
#include "planner/placement/placement.hpp"
#include "planner/placement/placement_file.hpp"
#include "planner/placement/placement_metrics.hpp"
#include "profiler/routed_load.hpp"

namespace moeplan::cli {

namespace {

// A routed load needs the model whose router it runs.
Result<planner::LoadData> routed_or_error(const std::string& spec, const models::MoeModel* model) {
  if (model == nullptr) {
    return Error{"--synthetic " + spec +
                 ": a routed load needs --model (it runs that model's router)"};
  }
  return profiler::routed_load(spec, *model);
}

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

// Samples `best` optimises for when the load has no steps of its own.
constexpr int kBestSamples = 512;
constexpr int kMinFileSamples = 64;

using Steps = std::vector<std::vector<std::vector<double>>>;

planner::ExpertLoad sum_steps(const Steps& steps, int first, int last,
                              const planner::ExpertLoad& like) {
  planner::ExpertLoad load = like;
  for (auto& row : load.counts) std::fill(row.begin(), row.end(), 0.0);
  for (int s = first; s < last; ++s) {
    const auto& step = steps[static_cast<std::size_t>(s)];
    for (std::size_t l = 0; l < step.size(); ++l) {
      for (std::size_t e = 0; e < step[l].size(); ++e) load.counts[l][e] += step[l][e];
    }
  }
  return load;
}

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
  if (o.gpus <= 0) return report_error(Error{"place: expected --gpus N with N ≥ 1"});
  if (o.nodes <= 0) return report_error(Error{"place: expected --nodes ≥ 1"});
  if (o.slots < 0) return report_error(Error{"place: expected --slots ≥ 0 (0: one per expert)"});
  if (o.groups < 0) return report_error(Error{"place: expected --groups ≥ 1"});
  if (o.eval_steps < 0 || o.eval_steps > 1000000) {
    return report_error(Error{"place: expected --eval-steps in [0, 1000000]"});
  }
  if (o.step_tokens <= 0 || o.step_tokens > (std::int64_t{1} << 40)) {
    return report_error(Error{"place: expected --step-tokens in [1, 2^40]"});
  }
  if (!(o.locality_weight >= 0.0 && o.locality_weight <= 100.0)) {
    return report_error(Error{"place: expected --locality-weight in [0, 100]"});
  }
  auto policy = planner::parse_policy(o.policy);
  if (!policy) return report_error(policy.error());

  std::optional<models::MoeModel> model;
  if (!o.model.empty()) {
    auto m = models::load_model(o.model);
    if (!m) return report_error(m.error());
    model = std::move(*m);
  }
  const models::MoeModel* mp = model ? &*model : nullptr;
  auto data = !o.load.empty()    ? planner::read_load_file(o.load, mp)
              : !o.trace.empty() ? planner::read_trace_file(o.trace, mp)
                                 : (profiler::is_routed_spec(o.synthetic)
                                        ? routed_or_error(o.synthetic, mp)
                                        : planner::synthetic_load(o.synthetic, mp));
  if (!data) return report_error(data.error());

  // Fit on the first steps of a [steps, L, E] load, score on the rest.
  const int num_file_steps = static_cast<int>(data->steps.size());
  int fit_steps = num_file_steps;
  if (num_file_steps >= 2) {
    fit_steps = o.fit_steps < 0 ? num_file_steps / 2 : o.fit_steps;
    if (fit_steps < 1 || fit_steps > num_file_steps) {
      return report_error(Error{"place: expected --fit-steps in [1, " +
                                std::to_string(num_file_steps) + "] for " + o.load});
    }
  } else if (o.fit_steps >= 0) {
    return report_error(
        Error{"place: --fit-steps needs a load with steps ([steps][layers][experts])"});
  }
  const planner::ExpertLoad fit =
      num_file_steps >= 2 ? sum_steps(data->steps, 0, fit_steps, data->load) : data->load;

  planner::PlacementConfig config;
  config.num_gpus = o.gpus;
  config.num_nodes = o.nodes;
  config.num_slots = o.slots;
  config.num_groups = o.groups > 0 ? o.groups : (mp != nullptr ? mp->router.num_groups : 1);

  // Routed pairs per step: tokens × top-k (the model's, else the trace's, else 1).
  const int top_k = mp != nullptr ? mp->num_experts_per_tok : data->trace ? data->trace->top_k : 1;
  const std::int64_t pairs_per_step = o.step_tokens * top_k;

  planner::BestOptions best;
  best.locality_weight = o.locality_weight;
  if (*policy == planner::PlacementPolicy::kBest) {
    // Real fit steps when there are enough of them to split into a search and a check half,
    // else multinomial steps drawn from the fitted frequencies.
    if (fit_steps >= kMinFileSamples && num_file_steps >= 2) {
      best.samples =
          planner::samples_by_layer(Steps(data->steps.begin(), data->steps.begin() + fit_steps));
    } else {
      best.samples = planner::samples_by_layer(
          planner::sample_steps(fit, kBestSamples, pairs_per_step, o.seed));
    }
    if (data->trace) best.coactivation = data->trace->coactivation();
  }
  auto placed = planner::place_experts(fit, *policy, config, best);
  if (!placed) return report_error(placed.error());
  auto figures = planner::balance_figures(fit, placed->placement);
  if (!figures) return report_error(figures.error());

  std::optional<planner::StepScores> held_out, sampled;
  if (num_file_steps >= 2 && fit_steps < num_file_steps) {
    auto s = planner::score_steps(Steps(data->steps.begin() + fit_steps, data->steps.end()),
                                  placed->placement);
    if (!s) return report_error(s.error());
    held_out = *s;
  }
  if (o.eval_steps > 0) {
    // Another seed than best's own samples: the placement never saw these steps.
    const auto steps =
        planner::sample_steps(fit, o.eval_steps, pairs_per_step, o.seed ^ 0x9E3779B97F4A7C15ULL);
    auto s = planner::score_steps(steps, placed->placement);
    if (!s) return report_error(s.error());
    sampled = *s;
  }
  std::optional<planner::TraceFigures> spread;
  if (data->trace) {
    auto t = planner::trace_figures(*data->trace, placed->placement, config.num_nodes);
    if (!t) return report_error(t.error());
    spread = *t;
  }

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
