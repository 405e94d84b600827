// `moeplan place`: places experts (with redundant slots) on EP ranks for a measured, traced or
// synthetic load and reports balance on the load and on steps the placement has not seen.
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "app/cli/cli_common.hpp"
#include "app/cli/progress.hpp"
#include "app/cli/table.hpp"
#include "models/registry.hpp"
#include "models/units.hpp"
#include "planner/costs/cost_setup.hpp"
#include "planner/placement/load_io.hpp"
#include "planner/placement/place_run.hpp"
#include "planner/placement/placement.hpp"
#include "planner/placement/placement_file.hpp"
#include "planner/placement/placement_metrics.hpp"
#include "planner/rebalance.hpp"
#include "planner/time_search.hpp"
#include "profiler/routed_load.hpp"

namespace moeplan::cli {

namespace {

struct PlaceOptions {
  std::string load;
  std::string trace;
  std::string synthetic;
  std::string model;
  std::string weights;
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
  CLI::Option* nodes_opt = nullptr;
  // Predicted MoE time on the unseen steps.
  std::string cluster;
  std::string costs;
  std::string phase;       // "" = prefill
  std::string dispatcher;  // "" = a2av
  std::string objective;   // "" = tokens
};

/// The layout and cost model the placement is timed on (with --cluster).
struct TimeScoring {
  planner::CostSetup setup;
  planner::Layout layout;
  planner::Workload workload;
  std::size_t steps_scored = 0;
  double mean_seconds = 0.0;
  /// The same steps' balanced reference (planner::balanced_reference_seconds), or why there
  /// is none.
  std::optional<double> reference_seconds;
  std::string no_reference;
  /// --objective time: what the search on predicted time did.
  std::optional<planner::TimeSearchReport> search;
};

/// At most this many unseen steps are costed (each one costs every MoE layer).
constexpr std::size_t kMaxTimedSteps = 256;

nlohmann::json scores_json(const planner::StepScores& s) {
  return {{"steps", s.num_steps},
          {"mean_balancedness", s.mean_balancedness},
          {"p99_balancedness", s.p99_balancedness}};
}

std::string scores_text(const planner::StepScores& s) {
  return "mean " + format_fixed(s.mean_balancedness, 4) + ", p99 " +
         format_fixed(s.p99_balancedness, 4);
}

/// What the placement's slots hold per GPU in the model's weight format: the routed experts'
/// weights and scales (WeightFormat::matrix_bytes), per MoE layer and over the model's MoE
/// layers; the redundant slots' share of it.
struct SlotMemory {
  std::string format;
  std::string source;
  int slots_per_gpu = 0;
  double redundant_per_gpu = 0.0;  ///< redundant slots per GPU (may be fractional)
  double bytes_per_expert = 0.0;
  int moe_layers = 0;
  double per_layer() const { return slots_per_gpu * bytes_per_expert; }
  double total() const { return per_layer() * moe_layers; }
  double redundant_total() const { return redundant_per_gpu * bytes_per_expert * moe_layers; }
};

SlotMemory slot_memory(const models::MoeModel& m, const planner::PlaceOutcome& out) {
  SlotMemory s;
  s.format = m.weights.name();
  s.source = m.weights.source;
  const int slots = out.placed.placement.num_slots;
  const int gpus = out.config.num_gpus;
  s.slots_per_gpu = slots / gpus;
  s.redundant_per_gpu = static_cast<double>(slots - m.num_experts) / gpus;
  s.bytes_per_expert = m.expert_weight_bytes(1);
  s.moe_layers = m.num_moe_layers();
  return s;
}

nlohmann::json place_json(const PlaceOptions& o, const planner::LoadData& data,
                          const planner::PlaceOutcome& out, const planner::PlacementFile& file,
                          const std::optional<SlotMemory>& memory, const TimeScoring* timing) {
  nlohmann::json j = planner::placement_to_json(file);
  j.erase("format");
  j.erase("version");
  j["load_format"] = data.format;
  j["num_layers"] = out.fit.num_layers();
  j["hierarchical"] = out.config.hierarchical();
  j["balancedness"] = out.figures.balancedness;
  j["imbalance"] = out.figures.imbalance;
  j["upper_bound"] = out.figures.upper_bound;
  j["layer_balancedness"] = out.figures.layer_balancedness;
  const std::string& policy = out.placed.placement.policy;
  if (policy == planner::policy_name(planner::PlacementPolicy::kBest) ||
      policy == planner::kTimeSearchPolicy) {
    j["objective"] = timing != nullptr && timing->search ? "time" : "tokens";
  }
  j["seconds"] = out.placed.seconds;
  if (out.num_file_steps >= 2) j["fit_steps"] = out.fit_steps;
  if (out.held_out) j["held_out"] = scores_json(*out.held_out);
  if (out.sampled) {
    j["sampled_steps"] = scores_json(*out.sampled);
    j["sampled_steps"]["step_tokens"] = o.step_tokens;
    j["sampled_steps"]["routed_pairs"] = out.pairs_per_step;
  }
  if (memory) {
    j["expert_weights_per_gpu"] = {{"format", memory->format},
                                   {"source", memory->source},
                                   {"slots", memory->slots_per_gpu},
                                   {"redundant_slots", memory->redundant_per_gpu},
                                   {"bytes_per_expert", memory->bytes_per_expert},
                                   {"bytes_per_moe_layer", memory->per_layer()},
                                   {"moe_layers", memory->moe_layers},
                                   {"bytes", memory->total()},
                                   {"redundant_bytes", memory->redundant_total()}};
  }
  if (timing) {
    j["predicted_moe_ms"] = {{"mean_per_step", timing->mean_seconds * 1e3},
                             {"steps", timing->steps_scored},
                             {"layout", timing->layout.full_name()},
                             {"phase", planner::phase_name(timing->workload.phase)},
                             {"tokens_per_gpu", timing->workload.tokens_per_gpu},
                             {"cluster", timing->setup.cluster->name()},
                             {"cost_source", timing->setup.costs().name()}};
    if (timing->search) {
      const planner::TimeSearchReport& r = *timing->search;
      j["time_search"] = {{"search_steps", r.search_steps},
                          {"check_steps", r.check_steps},
                          {"rounds", r.rounds},
                          {"moves_tried", r.moves_tried},
                          {"moves_kept", r.moves_kept},
                          {"layers", r.layers},
                          {"layers_refined", r.layers_refined},
                          {"layers_best", r.layers_best},
                          {"layers_started_from_best", r.layers_from_best},
                          {"eplb_search_ms_per_step", r.eplb_search_seconds * 1e3},
                          {"start_search_ms_per_step", r.start_search_seconds * 1e3},
                          {"refined_search_ms_per_step", r.refined_search_seconds * 1e3},
                          {"eplb_check_ms_per_step", r.eplb_check_seconds * 1e3},
                          {"best_check_ms_per_step", r.best_check_seconds * 1e3},
                          {"result_check_ms_per_step", r.result_check_seconds * 1e3},
                          {"seconds", r.seconds}};
    }
    if (timing->reference_seconds) {
      j["predicted_moe_ms"]["balanced_reference_per_step"] = *timing->reference_seconds * 1e3;
    } else {
      j["predicted_moe_ms"]["balanced_reference_absent"] = timing->no_reference;
    }
  }
  if (out.spread) {
    j["trace"] = {{"nodes_per_token", out.spread->nodes_per_token},
                  {"gpus_per_token", out.spread->gpus_per_token},
                  {"cross_node_fraction", out.spread->cross_node_fraction}};
  }
  return j;
}

/// The objective row of --objective time: what the search kept and what it gained.
std::string time_search_text(const planner::TimeSearchReport& r) {
  std::string t = "predicted MoE time: best and eplb refined on " + std::to_string(r.search_steps) +
                  " search steps (";
  t += std::to_string(r.moves_kept) + " of " + std::to_string(r.moves_tried) + " moves kept in " +
       std::to_string(r.rounds) + " rounds, ";
  t += format_fixed(r.start_search_seconds * 1e3, 3) + " → " +
       format_fixed(r.refined_search_seconds * 1e3, 3) + " ms per step); on ";
  t += std::to_string(r.check_steps) +
       " check steps a layer leaves eplb's map only for a significant gain: refined " +
       std::to_string(r.layers_refined) + ", best " + std::to_string(r.layers_best) + ", eplb " +
       std::to_string(r.layers - r.layers_refined - r.layers_best) + " of " +
       std::to_string(r.layers) + " (eplb " + format_fixed(r.eplb_check_seconds * 1e3, 3) +
       ", best " + format_fixed(r.best_check_seconds * 1e3, 3) + ", this " +
       format_fixed(r.result_check_seconds * 1e3, 3) + " ms per step)";
  return t;
}

/// "4.66% above it" / "0.21% below it" for a placement's time over the reference's − 1.
std::string relative_to_reference(double fraction) {
  return format_fixed(std::abs(fraction) * 100.0, 2) + (fraction >= 0.0 ? "% above" : "% below") +
         " it";
}

std::string place_text(const PlaceOptions& o, const planner::LoadData& data,
                       const planner::PlaceOutcome& out, const std::optional<SlotMemory>& memory,
                       const TimeScoring* timing) {
  const planner::PlacementConfig& config = out.config;
  const planner::ExpertLoad& fit = out.fit;
  const int num_slots = out.placed.placement.num_slots;
  std::vector<std::pair<std::string, std::string>> rows;
  rows.emplace_back("policy", out.placed.placement.policy);
  if (timing != nullptr && timing->search) {
    rows.emplace_back("objective", time_search_text(*timing->search));
  } else if (out.placed.placement.policy == planner::policy_name(planner::PlacementPolicy::kBest)) {
    rows.emplace_back("objective", "routed tokens per GPU (balancedness on sampled steps)");
  }
  rows.emplace_back("load", data.load.source + " (" + data.format + ", " +
                                std::to_string(fit.num_layers()) + " layers × " +
                                std::to_string(fit.num_experts) + " experts)");
  if (out.num_file_steps >= 2) {
    rows.emplace_back("fit on", "steps [0, " + std::to_string(out.fit_steps) + ") of " +
                                    std::to_string(out.num_file_steps));
  }
  rows.emplace_back(
      "machine", std::to_string(config.num_gpus) + " GPUs on " + std::to_string(config.num_nodes) +
                     (config.num_nodes == 1 ? " node, " : " nodes, ") + std::to_string(num_slots) +
                     " slots (" + std::to_string(num_slots - fit.num_experts) + " redundant), " +
                     std::to_string(config.num_groups) +
                     (config.num_groups == 1 ? " group, " : " groups, ") +
                     (config.hierarchical() ? "hierarchical" : "global"));
  rows.emplace_back("balancedness", format_fixed(out.figures.balancedness, 4) + " (upper bound " +
                                        format_fixed(out.figures.upper_bound, 4) + ")");
  rows.emplace_back("imbalance", format_fixed(out.figures.imbalance, 4));
  if (memory) {
    rows.emplace_back("expert weights",
                      std::to_string(memory->slots_per_gpu) + " slots per GPU × " +
                          format_bytes(memory->bytes_per_expert) + " = " +
                          format_bytes(memory->per_layer()) + " per MoE layer, " +
                          format_gib(memory->total()) + " per GPU over " +
                          std::to_string(memory->moe_layers) + " MoE layers (redundant slots " +
                          format_gib(memory->redundant_total()) + "); " + memory->format +
                          " from " + memory->source);
  }
  if (out.held_out) {
    rows.emplace_back("held-out steps", std::to_string(out.held_out->num_steps) +
                                            " steps: " + scores_text(*out.held_out));
  }
  if (out.sampled) {
    rows.emplace_back("sampled steps", std::to_string(out.sampled->num_steps) + " steps of " +
                                           std::to_string(o.step_tokens) +
                                           " tokens: " + scores_text(*out.sampled));
  }
  if (timing) {
    rows.emplace_back("predicted MoE time",
                      format_fixed(timing->mean_seconds * 1e3, 3) + " ms per step, mean of " +
                          std::to_string(timing->steps_scored) + " unseen steps (" +
                          timing->layout.full_name() + " on " + timing->setup.cluster->name() +
                          ", " + planner::phase_name(timing->workload.phase) + ", " +
                          std::to_string(timing->workload.tokens_per_gpu) + " tokens per GPU; " +
                          timing->setup.costs().name() + ")");
    rows.emplace_back(
        "balanced reference",
        timing->reference_seconds
            ? format_fixed(*timing->reference_seconds * 1e3, 3) +
                  " ms per step (the same tokens spread evenly over the experts, one slot each; "
                  "this placement " +
                  relative_to_reference(timing->mean_seconds / *timing->reference_seconds - 1.0) +
                  ")"
            : "none (" + timing->no_reference + ")");
  }
  if (out.spread) {
    rows.emplace_back("trace spread", format_fixed(out.spread->nodes_per_token, 3) + " nodes, " +
                                          format_fixed(out.spread->gpus_per_token, 3) +
                                          " GPUs per token; cross-node " +
                                          format_fixed(out.spread->cross_node_fraction, 4));
  }
  rows.emplace_back("seconds", format_fixed(out.placed.seconds, 4));
  if (!o.out.empty()) rows.emplace_back("written", o.out);
  return render_key_values(rows);
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
  if (!o.weights.empty() && o.model.empty()) {
    return report_error(input_error(
        "weights", ": expected --model too (the bytes are that model's experts' in the format)"));
  }
  if (!o.model.empty()) {
    auto m = models::load_model(o.model);
    if (!m) return report_error(m.error());
    if (auto st = models::apply_weights_choice(*m, o.weights); !st) {
      return report_error(st.error());
    }
    model = std::move(*m);
  }
  const models::MoeModel* mp = model ? &*model : nullptr;
  auto data = !o.load.empty()    ? profiler::load_any(o.load, mp)
              : !o.trace.empty() ? planner::read_trace_file(o.trace, mp)
                                 : profiler::synthetic_any(o.synthetic, mp);
  if (!data) return report_error(data.error());
  // With a cluster: the layout the placement is timed on.
  std::optional<TimeScoring> timing;
  for (const auto& [flag, value] : {std::pair<const char*, const std::string*>{"costs", &o.costs},
                                    {"phase", &o.phase},
                                    {"dispatcher", &o.dispatcher}}) {
    if (!value->empty() && o.cluster.empty()) {
      return report_error(input_error(flag, ": expected --cluster too (it times the placement)"));
    }
  }
  const std::string objective = o.objective.empty() ? "tokens" : o.objective;
  if (objective != "tokens" && objective != "time") {
    return report_error(
        input_error("objective", ": expected tokens or time, got '" + o.objective + "'"));
  }
  if (objective == "time") {
    if (o.cluster.empty()) {
      return report_error(input_error(
          "objective", " time: expected --cluster too (the cost model the search runs on)"));
    }
    if (*policy != planner::PlacementPolicy::kBest) {
      return report_error(
          input_error("objective",
                      " time: refines best's map, expected --policy best, got '" + o.policy + "'"));
    }
  }
  if (!o.cluster.empty()) {
    if (!model) return report_error(input_error("cluster", ": expected --model too"));
    if (data->steps.size() < 2 && o.eval_steps <= 0) {
      return report_error(
          input_error("cluster",
                      ": the predicted MoE time is scored on unseen steps: expected a load with "
                      "steps ([steps][layers][experts]) or --eval-steps N"));
    }
    auto setup = planner::make_cost_setup(o.cluster, o.costs);
    if (!setup) return report_error(setup.error());
    TimeScoring t;
    t.setup = std::move(*setup);
    const planner::Cluster& cluster = *t.setup.cluster;
    if (o.gpus > cluster.num_gpus()) {
      return report_error(input_error("gpus", " " + std::to_string(o.gpus) + ": cluster '" +
                                                  cluster.name() + "' has " +
                                                  std::to_string(cluster.num_gpus()) + " GPUs"));
    }
    const int per_node = cluster.info().gpus_per_node;
    if (o.nodes_opt->count() == 0) {
      // The placement's nodes are the cluster's nodes its EP ranks occupy.
      if (o.gpus > per_node && o.gpus % per_node != 0) {
        return report_error(input_error(
            "gpus", " " + std::to_string(o.gpus) + ": expected whole nodes of " +
                        std::to_string(per_node) + " GPUs on cluster '" + cluster.name() + "'"));
      }
      request.num_nodes = o.gpus > per_node ? o.gpus / per_node : 1;
    }
    const std::string dispatcher_name = o.dispatcher.empty() ? "a2av" : o.dispatcher;
    const auto dispatcher = planner::parse_dispatcher(dispatcher_name);
    if (!dispatcher) {
      return report_error(
          input_error("dispatcher",
                      ": expected padded_a2a, allgather, a2av, deepep_normal or deepep_ll, got '" +
                          dispatcher_name + "'"));
    }
    const auto phase = planner::parse_phase(o.phase.empty() ? "prefill" : o.phase);
    if (!phase) {
      return report_error(
          input_error("phase", ": expected prefill or decode, got '" + o.phase + "'"));
    }
    t.layout.num_gpus = o.gpus;
    t.layout.ep_size = o.gpus;
    t.layout.tp_size = 1;
    t.layout.dispatcher = *dispatcher;
    t.workload.phase = *phase;
    t.workload.tokens_per_gpu = static_cast<int>(std::max<std::int64_t>(1, o.step_tokens / o.gpus));
    timing = std::move(t);
    request.keep_unseen_steps = kMaxTimedSteps;
  }
  planner::PlaceRefine refine;
  if (objective == "time") {
    refine =
        [&](const planner::PlaceRefineInput& in) -> Result<std::pair<planner::Placement, double>> {
      const planner::ExpertLoad none;
      const planner::CostContext ctx{
          *model, *timing->setup.cluster, timing->setup.costs(), timing->workload, none, nullptr};
      Progress bar("time search", in.eplb.num_layers());
      planner::TimeSearchOptions options;
      options.progress = [&bar](int settled, int, int round, double seconds_per_step) {
        bar.update(settled, "round " + std::to_string(round) + ", " +
                                format_fixed(seconds_per_step * 1e3, 3) + " ms/step");
      };
      auto r = planner::search_placement_by_time(ctx, timing->layout, in.eplb,
                                                 in.outcome.placed.placement, in.search, in.check,
                                                 data->load.source, options);
      bar.finish();
      if (!r) return r.error();
      timing->search = r->report;
      return std::pair<planner::Placement, double>{std::move(r->placement), r->report.seconds};
    };
  }
  auto outcome = planner::run_placement(*data, request, mp, refine);
  if (!outcome) return report_error(outcome.error());
  if (timing) {
    if (outcome->unseen_steps.empty()) {
      return report_error(
          input_error("cluster",
                      ": the predicted MoE time is scored on unseen steps: expected held-out "
                      "steps ({fit_steps} below the load's steps) or --eval-steps N"));
    }
    const planner::ExpertLoad none;
    const planner::CostContext ctx{
        *model, *timing->setup.cluster, timing->setup.costs(), timing->workload, none, nullptr};
    auto mean = planner::mean_moe_seconds(ctx, timing->layout, outcome->placed.placement,
                                          outcome->unseen_steps, data->load.source);
    if (!mean) return report_error(mean.error());
    timing->mean_seconds = *mean;
    timing->steps_scored = outcome->unseen_steps.size();
    auto reference = planner::balanced_reference_seconds(ctx, timing->layout, outcome->unseen_steps,
                                                         data->load.source);
    if (reference) {
      timing->reference_seconds = *reference;
    } else {
      // The row (and JSON key) already says what it is about.
      const std::string prefix = "balanced reference: ";
      const std::string& m = reference.error().message;
      timing->no_reference = m.rfind(prefix, 0) == 0 ? m.substr(prefix.size()) : m;
    }
  }
  planner::PlacementFile file{outcome->placed, outcome->config, data->layer_ids, data->load.source};
  if (!o.out.empty()) {
    if (auto st = planner::write_placement_file(o.out, file); !st.ok()) {
      return report_error(st.error());
    }
  }
  std::optional<SlotMemory> memory;
  if (model) memory = slot_memory(*model, *outcome);
  const TimeScoring* tp = timing ? &*timing : nullptr;
  const std::string text = o.json ? place_json(o, *data, *outcome, file, memory, tp).dump(2) + "\n"
                                  : place_text(o, *data, *outcome, memory, tp);
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

}  // namespace

void add_place_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<PlaceOptions>();
  auto* cmd = app.add_subcommand(
      "place", "Place experts (and redundant replicas) on EP ranks for a load; report balance");
  cmd->add_option("--load", o->load,
                  "Expert counts: SGLang JSON (logical_count [L,E] or [S,L,E]), CSV or .npy; or a "
                  "synthetic spec, as plan --load and --synthetic take it");
  cmd->add_option("--trace", o->trace, "Per-token top-k trace: JSON topk_ids [L,T,k] or .npy");
  cmd->add_option("--synthetic", o->synthetic,
                  "Synthetic load: uniform | powerlaw:alpha=A | hot:n=N,share=S "
                  "[,layers=,experts=,tokens=,seed=,shuffle=1]");
  cmd->add_option("--gpus", o->gpus, "EP ranks (GPUs)");
  o->nodes_opt = cmd->add_option("--nodes", o->nodes,
                                 "Nodes (GPUs split evenly; default 1, or with --cluster the "
                                 "cluster's nodes the GPUs fill)");
  cmd->add_option("--slots", o->slots, "Physical expert slots per layer (0: one per expert)")
      ->capture_default_str();
  cmd->add_option("--groups", o->groups,
                  "Expert groups (default: the model's n_group, else 1); hierarchical when "
                  "groups % nodes == 0");
  cmd->add_option("--policy", o->policy, "contiguous | round_robin | eplb | best")
      ->capture_default_str();
  cmd->add_option("--model", o->model,
                  "Bundled model name or config.json (checks the load; reports the slots' expert "
                  "weight bytes per GPU)");
  std::string formats;
  for (const auto& n : weight_format_names()) formats += (formats.empty() ? "" : "|") + n;
  cmd->add_option("--weights", o->weights,
                  "Weight format of the expert bytes reported: " + formats +
                      " (default: the model's own; needs --model)");
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
  cmd->add_option("--cluster", o->cluster,
                  "Time the placement on this cluster (needs --model): the cost model's "
                  "predicted MoE time per step on the unseen steps (at most 256), ep = --gpus, "
                  "tp 1, --step-tokens / --gpus tokens per GPU");
  cmd->add_option("--costs", o->costs, "With --cluster: a cost database instead of the roofline");
  cmd->add_option("--phase", o->phase, "With --cluster: prefill (default) or decode");
  cmd->add_option("--dispatcher", o->dispatcher,
                  "With --cluster: the layout's dispatcher (default a2av)");
  cmd->add_option(
      "--objective", o->objective,
      "tokens (default: best balances routed tokens per GPU) or time (needs "
      "--cluster and --policy best: best's and eplb's maps refined on the cost "
      "model's predicted MoE layer time, kept per layer where significantly faster than "
      "eplb's on check steps)");
  cmd->callback([&action, o] { action = [o] { return run_place(*o); }; });
}

}  // namespace moeplan::cli
