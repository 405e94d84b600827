// `moeplan rebalance`: a fixed placement against re-fitting it every N steps on the last W steps
// of a load trace with drift, on one layout of a cluster — experts copied, the wait on the links,
// the predicted MoE time of the steps and the net time per step; recommends N and W.
#include <cstdio>
#include <memory>
#include <optional>

#include "app/cli/cli_common.hpp"
#include "app/cli/table.hpp"
#include "models/registry.hpp"
#include "models/units.hpp"
#include "planner/costs/cost_setup.hpp"
#include "planner/layout.hpp"
#include "planner/layout_figures.hpp"
#include "planner/plan_request.hpp"
#include "planner/rebalance.hpp"
#include "profiler/routed_load.hpp"

namespace moeplan::cli {

namespace {

struct RebalanceOptions {
  std::string load;
  std::string model = models::kDefaultModel;
  std::string cluster = planner::kDefaultCluster;
  std::string costs;
  std::string weights;
  std::string phase = "decode";
  int tokens = 0;
  CLI::Option* tokens_opt = nullptr;
  int ep = 0;
  int tp = 1;
  std::string dispatcher = "a2av";
  std::string redundant = "0";
  std::string policy = "eplb";
  std::vector<int> every = {1, 2, 4, 8};
  std::vector<int> windows = {1, 2, 4, 8};
  int record_steps = 1;
  bool no_align = false;
  bool json = false;
  std::string output;
};

std::string scheme_name(const planner::RebalanceScheme& s) {
  if (s.every == 0) return "fixed (fit on " + std::to_string(s.window) + " steps)";
  return "every " + std::to_string(s.every) + ", window " + std::to_string(s.window);
}

std::vector<double> in_ms(const std::vector<double>& seconds) {
  std::vector<double> ms;
  for (const double x : seconds) ms.push_back(1e3 * x);
  return ms;
}

nlohmann::json scheme_json(const planner::RebalanceScheme& s) {
  return {{"every", s.every},
          {"window", s.window},
          {"rebalances", s.rebalances},
          {"bytes_moved", s.bytes_moved},
          {"cross_node_bytes", s.cross_node_bytes},
          {"move_ms", 1e3 * s.move_seconds},
          {"moe_ms", 1e3 * s.step_seconds},
          {"net_ms_per_step", 1e3 * s.net_seconds_per_step},
          {"mean_balancedness", s.mean_balancedness},
          {"series",
           {{"moe_ms", in_ms(s.series_step_seconds)},
            {"move_ms", in_ms(s.series_move_seconds)},
            {"balancedness", s.series_balancedness}}}};
}

int run_rebalance(const RebalanceOptions& o) {
  if (o.load.empty()) {
    return report_error(input_error("load",
                                    ": expected a load file with steps ([steps][layers]"
                                    "[experts]: SGLang JSON, .npy)"));
  }
  auto model = models::load_model(o.model);
  if (!model) return report_error(model.error());
  if (auto st = models::apply_weights_choice(*model, o.weights); !st) {
    return report_error(st.error());
  }
  auto setup = planner::make_cost_setup(o.cluster, o.costs);
  if (!setup) return report_error(setup.error());
  const planner::Cluster& cluster = *setup->cluster;
  auto policy = planner::parse_policy(o.policy);
  if (!policy) return report_error(with_input(policy.error(), "policy"));
  if (*policy != planner::PlacementPolicy::kEplb && *policy != planner::PlacementPolicy::kBest) {
    return report_error(input_error("policy",
                                    ": expected eplb or best (a policy that fits a "
                                    "load), got '" +
                                        o.policy + "'"));
  }
  const auto phase = planner::parse_phase(o.phase);
  if (!phase) {
    return report_error(
        input_error("phase", ": expected prefill or decode, got '" + o.phase + "'"));
  }
  planner::Workload workload;
  workload.phase = *phase;
  workload.tokens_per_gpu = *phase == planner::Phase::kPrefill
                                ? planner::kDefaultPrefillTokensPerGpu
                                : planner::kDefaultDecodeBatchPerGpu;
  if (o.tokens_opt != nullptr && o.tokens_opt->count() > 0) {
    if (o.tokens <= 0) {
      return report_error(input_error("tokens",
                                      ": expected a positive number of tokens per "
                                      "GPU, got " +
                                          std::to_string(o.tokens)));
    }
    workload.tokens_per_gpu = o.tokens;
  }
  const int ep = o.ep > 0 ? o.ep : cluster.num_gpus() / std::max(1, o.tp);
  if (o.ep < 0 || o.tp < 1 || ep * o.tp > cluster.num_gpus() || ep < 1) {
    return report_error(
        input_error("ep", ": expected ep × tp ≤ " + std::to_string(cluster.num_gpus()) +
                              " (the GPUs of cluster '" + cluster.name() + "'), got ep " +
                              std::to_string(ep) + " × tp " + std::to_string(o.tp)));
  }
  const auto dispatcher = planner::parse_dispatcher(o.dispatcher);
  if (!dispatcher) {
    return report_error(input_error("dispatcher",
                                    ": expected padded_a2a, allgather, a2av, deepep_normal or "
                                    "deepep_ll, got '" +
                                        o.dispatcher + "'"));
  }
  auto redundancy = planner::parse_plan_redundancy(o.redundant);
  if (!redundancy) return report_error(redundancy.error());
  planner::PolicyFit fit =
      planner::policy_fit(*model, cluster, *policy, *redundancy, workload.tokens_per_gpu);
  planner::RebalanceRequest request;
  request.policy = *policy;
  request.config = planner::policy_config(fit, model->num_experts, ep);
  if (auto rule = planner::layout_rule_violation(*model, ep, o.tp,
                                                 request.config.num_slots - model->num_experts)) {
    return report_error(input_error(
        "ep", " " + std::to_string(ep) + " × tp " + std::to_string(o.tp) + " is illegal for '" +
                  model->name + "': " + *rule + " (redundant slots: {redundant})"));
  }
  const planner::Layout layout =
      planner::Layout::of(ep, o.tp, planner::RankMapping::kTpInnermost, *dispatcher);
  if (auto why =
          models::dispatcher_violation(*dispatcher, ep, o.tp, cluster.info().gpus_per_node)) {
    return report_error(input_error(
        "dispatcher", " " + o.dispatcher + " cannot run " + layout.shape_name() + ": " + *why));
  }
  request.every = o.every;
  request.windows = o.windows;
  request.record_steps = o.record_steps;
  request.align = !o.no_align;

  // As plan --load reads it (a synthetic spec too, which has no steps and is refused below).
  auto data = profiler::load_any(o.load, &*model);
  if (!data) return report_error(data.error());
  if (data->steps.size() < 2) {
    return report_error(Error{"rebalance: load '" + o.load + "' has no steps; expected a load " +
                              "with steps over time ([steps][layers][experts])"});
  }
  const planner::ExpertLoad empty;
  planner::CostContext ctx{*model, cluster, setup->costs(), workload, empty, nullptr};
  auto result = planner::simulate_rebalancing(data->steps, data->load.source, ctx, layout, request);
  if (!result) return report_error(result.error());
  const auto& r = *result;
  const auto& best = r.schemes[static_cast<std::size_t>(r.recommended)];

  if (o.json) {
    nlohmann::json j;
    j["model"] = model->name;
    j["cluster"] = cluster.name();
    j["cost_source"] = setup->costs().name();
    j["layout"] = layout.shape_name();
    j["dispatcher"] = planner::dispatcher_name(layout.dispatcher);
    j["phase"] = planner::phase_name(workload.phase);
    j["tokens_per_gpu"] = workload.tokens_per_gpu;
    j["policy"] = r.policy;
    j["slots"] = request.config.num_slots;
    j["load"] = data->load.source;
    j["steps"] = r.num_steps;
    j["first_scored_step"] = r.first_scored;
    j["record_steps"] = r.record_steps;
    j["aligned"] = request.align;
    j["expert_bytes_per_gpu"] = r.expert_bytes;
    j["schemes"] = nlohmann::json::array();
    for (const auto& s : r.schemes) j["schemes"].push_back(scheme_json(s));
    j["recommended"] = r.recommended;
    return emit_text(j.dump(2) + "\n", o.output);
  }
  std::vector<std::pair<std::string, std::string>> head;
  head.emplace_back("model", model->name);
  head.emplace_back("cluster", cluster.name() + " (" + cluster.device().name + ")");
  head.emplace_back("layout", layout.shape_name() + " " +
                                  planner::dispatcher_name(layout.dispatcher) + ", " +
                                  std::to_string(request.config.num_slots) + " slots per layer");
  head.emplace_back("workload", planner::phase_name(workload.phase) + ", " +
                                    std::to_string(workload.tokens_per_gpu) + " tokens per GPU");
  head.emplace_back(
      "load",
      data->load.source + ": " + std::to_string(r.num_steps) + " steps, scored on steps " +
          std::to_string(r.first_scored) + ".." + std::to_string(r.num_steps - 1) +
          (r.record_steps > 1 ? ", each " + std::to_string(r.record_steps) + " forward passes"
                              : std::string()));
  head.emplace_back("policy",
                    r.policy + " (re-fit on the last W steps every N steps" +
                        std::string(request.align ? ", nodes and ranks relabelled to keep experts "
                                                    "in place)"
                                                  : ", its map copied as it is)"));
  head.emplace_back("expert copy", format_bytes(r.expert_bytes) + " per GPU");
  head.emplace_back("times", "cost model: " + setup->costs().name() +
                                 "; copies on the cluster's links (busiest link)");
  std::string text = render_key_values(head) + "\n";
  Table t;
  t.add_column("scheme");
  t.add_column("rebalances", Table::Align::kRight);
  t.add_column("moved GiB", Table::Align::kRight);
  t.add_column("cross-node GiB", Table::Align::kRight);
  t.add_column("wait ms", Table::Align::kRight);
  t.add_column("MoE ms/step", Table::Align::kRight);
  t.add_column("net ms/step", Table::Align::kRight);
  t.add_column("balancedness", Table::Align::kRight);
  for (std::size_t i = 0; i < r.schemes.size(); ++i) {
    const auto& s = r.schemes[i];
    const double passes = static_cast<double>(r.num_steps - r.first_scored) * r.record_steps;
    t.add_row(
        {scheme_name(s) + (static_cast<int>(i) == r.recommended ? " *" : ""),
         std::to_string(s.rebalances), format_fixed(s.bytes_moved / (1ULL << 30), 2),
         format_fixed(s.cross_node_bytes / (1ULL << 30), 2), format_fixed(1e3 * s.move_seconds, 3),
         format_fixed(1e3 * s.step_seconds / passes, 3),
         format_fixed(1e3 * s.net_seconds_per_step, 3), format_fixed(s.mean_balancedness, 4)});
  }
  text += t.render();
  const auto& fixed = r.schemes[0];
  text += "\nrecommended: " + scheme_name(best) + ": net " +
          format_fixed(1e3 * best.net_seconds_per_step, 3) + " ms per step, " +
          (r.recommended == 0
               ? std::string("no re-fit saves more than its copies cost")
               : format_fixed(
                     100.0 * (1.0 - best.net_seconds_per_step / fixed.net_seconds_per_step), 1) +
                     "% below the fixed placement") +
          "\n";
  return emit_text(text, o.output);
}

}  // namespace

void add_rebalance_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<RebalanceOptions>();
  auto* cmd = app.add_subcommand(
      "rebalance",
      "Fixed placement vs re-fitting every N steps on the last W steps of a load with steps");
  cmd->add_option("--load", o->load,
                  "Expert counts with steps: SGLang JSON logical_count [S,L,E] or .npy [S,L,E]");
  cmd->add_option("--model", o->model, "Bundled model name or path to a config.json")
      ->capture_default_str();
  cmd->add_option("--cluster", o->cluster, "Bundled cluster name or path to a cluster JSON")
      ->capture_default_str();
  cmd->add_option("--costs", o->costs, "Cost database (default: the roofline)");
  cmd->add_option("--weights", o->weights, weights_flag_help());
  cmd->add_option("--phase", o->phase, "prefill or decode")->capture_default_str();
  o->tokens_opt = cmd->add_option(
      "--tokens", o->tokens,
      "Tokens per GPU per step (prefill, default 4096) or decode batch per GPU (default 128)");
  cmd->add_option("--ep", o->ep, "EP size (default: the cluster's GPUs / tp)");
  cmd->add_option("--tp", o->tp, "TP size of the experts")->capture_default_str();
  cmd->add_option("--dispatcher", o->dispatcher,
                  "padded_a2a, allgather, a2av, deepep_normal or deepep_ll")
      ->capture_default_str();
  cmd->add_option("--redundant", o->redundant,
                  "Redundant expert slots: N per EP rank, total:R, or auto")
      ->capture_default_str();
  cmd->add_option("--policy", o->policy, "eplb or best (fitted load only)")->capture_default_str();
  cmd->add_option("--every", o->every, "Steps between rebalances to try (N)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--window", o->windows, "Steps each re-fit uses to try (W, the last W)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--record-steps", o->record_steps,
                  "Forward passes each step of the load stands for")
      ->capture_default_str();
  cmd->add_flag("--no-align", o->no_align,
                "Copy what each re-fit's map says (default: first relabel its nodes and the "
                "ranks within each node to keep experts in place)");
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->add_option("-o,--output", o->output, "Write to this file (atomically) instead of stdout");
  cmd->callback([&action, o] { action = [o] { return run_rebalance(*o); }; });
}

}  // namespace moeplan::cli
