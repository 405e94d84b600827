// `moeplan plan`: every legal layout of a model on a cluster, costed, ranked and recommended.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "app/cli/cli_common.hpp"
#include "app/cli/cost_options.hpp"
#include "app/cli/table.hpp"
#include "models/file_io.hpp"
#include "models/registry.hpp"
#include "models/units.hpp"
#include "planner/plan.hpp"
#include "planner/roofline_costs.hpp"

namespace moeplan::cli {

namespace {

struct PlanOptions {
  std::string model = models::kDefaultModel;
  std::string cluster = planner::kDefaultCluster;
  std::string phase = "prefill";
  int tokens = 0;
  CLI::Option* tokens_opt = nullptr;
  int gpus = 0;
  CLI::Option* gpus_opt = nullptr;
  std::vector<std::string> dispatchers;
  int top = 10;
  CLI::Option* top_opt = nullptr;
  bool json = false;
  bool explain = false;
  bool attention_dp = false;
  std::string output;
  std::string costs;
};

std::string ms(double seconds) { return format_fixed(seconds * 1e3, 3); }
std::string gib(double bytes) { return format_fixed(bytes / (1024.0 * 1024.0 * 1024.0), 2); }

std::string render_plan(const planner::Plan& plan, const planner::Cluster& cluster, int top,
                        bool explain) {
  using planner::LayoutCost;
  std::string out;
  out += "plan: " + plan.model + " on " + plan.cluster + " (" + std::to_string(plan.num_gpus) +
         " of " + std::to_string(cluster.num_gpus()) + " × " + cluster.device().name + "), " +
         planner::phase_name(plan.workload.phase) + ", " +
         std::to_string(plan.workload.tokens_per_gpu) +
         (plan.workload.phase == planner::Phase::kPrefill ? " tokens" : " sequences") +
         " per GPU, " + std::to_string(plan.num_moe_layers) + " MoE layers\n";
  out += "cost source: " + plan.cost_source + "; expert load: " + plan.load_source +
         "; placement: " + plan.placement_policy + "\n";
  out +=
      "times in ms per MoE layer (router .. shared), step = all MoE layers; memory excludes "
      "the KV cache\n\n";
  Table t;
  t.add_column("#", Table::Align::kRight);
  t.add_column("layout");
  t.add_column("dispatcher");
  t.add_column("mapping");
  for (const char* h : {"router", "dispatch", "experts", "combine", "tp", "shared", "layer ms",
                        "step ms", "tokens/s/GPU", "GiB/GPU"}) {
    t.add_column(h, Table::Align::kRight);
  }
  t.add_column("fits");
  const std::size_t n =
      top > 0 ? std::min(plan.layouts.size(), static_cast<std::size_t>(top)) : plan.layouts.size();
  for (std::size_t i = 0; i < n; ++i) {
    const LayoutCost& c = plan.layouts[i];
    const auto& p = c.per_layer;
    t.add_row({std::to_string(i + 1), c.layout.shape_name(),
               planner::dispatcher_name(c.layout.dispatcher),
               planner::mapping_name(c.layout.mapping), ms(p.router.seconds),
               ms(p.dispatch.seconds), ms(p.experts.seconds), ms(p.combine.seconds),
               ms(p.tp.seconds), ms(p.shared.seconds), ms(p.total()), ms(c.step_seconds),
               format_fixed(c.tokens_per_s_per_gpu, 0), gib(c.memory.total()),
               c.feasible ? "yes" : "no"});
  }
  out += t.render();
  if (n < plan.layouts.size()) {
    out += "... " + std::to_string(plan.layouts.size() - n) + " more layouts (--top 0 shows all)\n";
  }
  out += "\n";
  if (plan.recommended >= 0) {
    const auto& best = plan.layouts[static_cast<std::size_t>(plan.recommended)].layout;
    out += "recommended: " + best.shape_name() + " " + planner::dispatcher_name(best.dispatcher) +
           " " + planner::mapping_name(best.mapping) + "\n";
  } else {
    out += "recommended: none\n";
  }
  for (const auto& r : plan.reasons) out += "  - " + r + "\n";
  if (explain) {
    out += "\n";
    if (plan.excluded.empty()) {
      out += "excluded: none (every ep×tp split of " + std::to_string(plan.num_gpus) +
             " GPUs is legal)\n";
    } else {
      out += "excluded (illegal for every dispatcher and mapping):\n";
      Table x;
      x.add_column("layout");
      x.add_column("rule broken");
      for (const auto& e : plan.excluded) {
        planner::Layout l;
        l.dp_size = e.dp_size;
        l.ep_size = e.ep_size;
        l.tp_size = e.tp_size;
        x.add_row({l.shape_name(), e.rule});
      }
      out += x.render();
    }
  }
  return out;
}

std::string source_legend() {
  return std::string(planner::kSourceExact) + " = measured point, " + planner::kSourceInterp +
         " = log-space interpolation between measured points, " + planner::kSourceExtrap +
         " = measured efficiency held outside the measured range, " + planner::kSourceMiss +
         " = not in the profile, roofline used";
}

int run_plan(const PlanOptions& o) {
  auto model = models::load_model(o.model);
  if (!model) return report_error(model.error());
  auto setup = make_cost_setup(o.cluster, o.costs);
  if (!setup) return report_error(setup.error());
  const planner::Cluster* cluster = setup->cluster.get();
  const auto phase = planner::parse_phase(o.phase);
  if (!phase) {
    return report_error(Error{"--phase: expected prefill or decode, got '" + o.phase + "'"});
  }
  planner::PlanRequest req;
  req.workload.phase = *phase;
  req.workload.tokens_per_gpu = *phase == planner::Phase::kPrefill
                                    ? planner::kDefaultPrefillTokensPerGpu
                                    : planner::kDefaultDecodeBatchPerGpu;
  if (o.tokens_opt->count() > 0) {
    if (o.tokens <= 0) {
      return report_error(Error{"--tokens: expected a positive number of tokens per GPU, got " +
                                std::to_string(o.tokens)});
    }
    req.workload.tokens_per_gpu = o.tokens;
  }
  if (o.gpus_opt->count() > 0) {
    if (o.gpus <= 0 || o.gpus > cluster->num_gpus()) {
      return report_error(Error{"--gpus: expected 1.." + std::to_string(cluster->num_gpus()) +
                                " (the GPUs of cluster '" + cluster->name() + "'), got " +
                                std::to_string(o.gpus)});
    }
    req.num_gpus = o.gpus;
  }
  if (o.top < 0) {
    return report_error(
        Error{"--top: expected 0 (all) or a positive count, got " + std::to_string(o.top)});
  }
  if (!o.dispatchers.empty()) {
    req.dispatchers.clear();
    for (const auto& name : o.dispatchers) {
      const auto d = planner::parse_dispatcher(name);
      if (!d) {
        return report_error(
            Error{"--dispatcher: expected padded_a2a, allgather or a2av, got '" + name + "'"});
      }
      if (std::find(req.dispatchers.begin(), req.dispatchers.end(), *d) == req.dispatchers.end()) {
        req.dispatchers.push_back(*d);
      }
    }
  }
  req.attention_dp = o.attention_dp;
  auto plan = planner::make_plan(*model, *cluster, setup->costs(), req);
  if (!plan) return report_error(plan.error());
  std::vector<std::string> misses;
  if (setup->measured) misses = setup->measured->misses();
  std::string text;
  if (o.json) {
    nlohmann::json j = planner::plan_to_json(*plan, o.top_opt->count() > 0 ? o.top : 0, o.explain);
    if (setup->measured) {
      j["cost_source_misses"] = misses;
      j["cost_source_legend"] = source_legend();
    }
    text = j.dump(2) + "\n";
  } else {
    text = render_plan(*plan, *cluster, o.top, o.explain);
    if (setup->measured) {
      text += "\nsources: " + source_legend() + "\n";
      if (misses.empty()) {
        text += "every query was answered from the cost database\n";
      } else {
        text += std::to_string(misses.size()) +
                " kinds of query missed the cost database and used the roofline:\n";
        for (const auto& m : misses) text += "  - " + m + "\n";
      }
    }
  }
  if (!o.output.empty()) {
    const Status s = write_file_atomic(o.output, text);
    if (!s) return report_error(s.error());
    return kExitOk;
  }
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

}  // namespace

void add_plan_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<PlanOptions>();
  auto* cmd = app.add_subcommand(
      "plan", "Rank every legal ep×tp layout, dispatcher and rank mapping; recommend one");
  cmd->add_option("--model", o->model, "Bundled model name or path to a config.json")
      ->capture_default_str();
  cmd->add_option("--cluster", o->cluster,
                  "Bundled cluster name, path to a cluster JSON, or local:N (this machine with N "
                  "ranks; needs --costs)")
      ->capture_default_str();
  cmd->add_option("--costs", o->costs,
                  "Cost database written by moeplan profile (default: the roofline)");
  cmd->add_option("--phase", o->phase, "prefill or decode")->capture_default_str();
  o->tokens_opt = cmd->add_option(
      "--tokens", o->tokens,
      "Tokens per GPU per step (prefill, default 4096) or decode batch per GPU (default 128)");
  o->gpus_opt = cmd->add_option("--gpus", o->gpus, "Plan for the first N GPUs of the cluster");
  cmd->add_option("--dispatcher", o->dispatchers,
                  "Only these dispatchers: padded_a2a, allgather, a2av (repeatable)");
  o->top_opt = cmd->add_option(
      "--top", o->top, "Show the best K layouts (0: all; default 10 in the table, all in JSON)");
  cmd->add_flag("--json", o->json, "Print the plan as JSON (docs/PLAN_SCHEMA.md)");
  cmd->add_flag("--explain", o->explain, "Also list the excluded combinations and their rule");
  cmd->add_flag("--attention-dp", o->attention_dp,
                "Also enumerate attention data-parallel replicas (dp·ep·tp = GPUs)");
  cmd->add_option("-o,--output", o->output, "Write to this file (atomically) instead of stdout");
  cmd->callback([&action, o] { action = [o] { return run_plan(*o); }; });
}

}  // namespace moeplan::cli
