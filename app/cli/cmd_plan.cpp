// `moeplan plan`: every legal layout of a model on a cluster, costed, ranked and recommended.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <tuple>

#include "app/cli/cli_common.hpp"
#include "app/cli/table.hpp"
#include "models/file_io.hpp"
#include "models/registry.hpp"
#include "models/units.hpp"
#include "planner/costs/cost_setup.hpp"
#include "planner/costs/roofline_costs.hpp"
#include "planner/layout_figures.hpp"
#include "planner/placement/load_io.hpp"
#include "planner/placement/placement.hpp"
#include "planner/placement/placement_file.hpp"
#include "planner/plan.hpp"
#include "planner/plan_request.hpp"
#include "planner/serving.hpp"
#include "profiler/routed_load.hpp"

namespace moeplan::cli {

namespace {

struct PlanOptions {
  std::string model = models::kDefaultModel;
  std::string cluster = planner::kDefaultCluster;
  std::string phase = "prefill";
  CLI::Option* phase_opt = nullptr;
  bool disagg = false;
  int tokens = 0;
  CLI::Option* tokens_opt = nullptr;
  int gpus = 0;
  CLI::Option* gpus_opt = nullptr;
  std::vector<std::string> dispatchers;
  std::string tbo = "off";
  int ll_max_tokens = 0;
  CLI::Option* ll_max_tokens_opt = nullptr;
  int isl = 0;
  CLI::Option* isl_opt = nullptr;
  int osl = 0;
  CLI::Option* osl_opt = nullptr;
  double mem_fraction = 0.0;
  CLI::Option* mem_fraction_opt = nullptr;
  double ttft_ms = 0.0;
  CLI::Option* ttft_opt = nullptr;
  double tpot_ms = 0.0;
  CLI::Option* tpot_opt = nullptr;
  double rate = 0.0;
  CLI::Option* rate_opt = nullptr;
  double ttft_percentile = 0.0;
  CLI::Option* ttft_percentile_opt = nullptr;
  std::vector<int> batches;  // --batches: decode batches per GPU (--pareto, --disagg)
  CLI::Option* batches_opt = nullptr;
  int top = 10;
  CLI::Option* top_opt = nullptr;
  bool json = false;
  bool explain = false;
  bool pareto = false;
  bool attention_dp = false;
  std::string load;                      // --load FILE|SPEC
  std::string placement = "contiguous";  // a policy, or a placement file
  std::string redundant = "0";           // N per EP rank, total:R or auto
  int traffic = -1;
  std::string output;
  bool per_layer = false;
  std::string export_format;
  std::string export_layout;
  std::string framework_version;
  std::string out_dir;
  std::string layout_file;
  std::string costs;
  std::string weights;  // --weights: a what-if weight format ("" = the model's own)
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
         "; placement: " + plan.placement_policy +
         (plan.redundancy.none() ? std::string()
                                 : "; redundant slots: " + plan.redundancy.describe()) +
         "\n";
  if (plan.weights.quantized() || plan.weights.source.rfind("--weights", 0) == 0) {
    out += "weights: " + plan.weights.describe() + " [" + plan.weights.name() + ", " +
           plan.weights.source + "]; activations: " + plan.weights.describe_activations() + "\n";
  }
  const planner::Workload& w = plan.workload;
  const bool decode = w.phase == planner::Phase::kDecode;
  out +=
      "times in ms per MoE layer (router .. shared) and per layer's attention block (attn, "
      "at a context of " +
      format_fixed(planner::attention_context(w), 0) + " tokens" +
      (w.counts_kv() ? "" : ", the default without --isl") +
      "); step = one forward of the whole model (every layer's attention and MoE or dense "
      "MLP, the head): " +
      (decode ? "the time per output token" : "the time to first token of its prompts") +
      (plan.step_target_s > 0.0 ? ", target " + ms(plan.step_target_s) + " ms" : "") + "\n";
  if (w.counts_kv()) {
    out +=
        "memory includes "
        "the KV cache of " +
        std::string(w.phase == planner::Phase::kDecode
                        ? "the batch's sequences of " + std::to_string(w.isl) + " + " +
                              std::to_string(w.osl) + " tokens"
                        : "the step's prompts of " + std::to_string(w.isl) + " tokens") +
        " and fits in " + format_fixed(w.mem_fraction, 2) +
        " of the HBM; seqs/GPU = sequences of " + std::to_string(w.isl + w.osl) +
        " tokens whose KV cache fits\n\n";
  } else {
    out += "memory excludes the KV cache\n\n";
  }
  Table t;
  t.add_column("#", Table::Align::kRight);
  t.add_column("layout");
  t.add_column("dispatcher");
  t.add_column("mapping");
  for (const char* h : {"router", "dispatch", "experts", "combine", "tp", "shared", "layer ms",
                        "attn ms", "step ms", "tokens/s/GPU"}) {
    t.add_column(h, Table::Align::kRight);
  }
  if (decode) t.add_column("tok/s/user", Table::Align::kRight);
  t.add_column("GiB/GPU", Table::Align::kRight);
  // With redundant slots each EP size has its own: slots per layer (slots per GPU).
  const bool slots = !plan.redundancy.none();
  if (slots) t.add_column("slots (/GPU)", Table::Align::kRight);
  if (w.counts_kv()) {
    t.add_column("KV GiB", Table::Align::kRight);
    t.add_column("seqs/GPU", Table::Align::kRight);
  }
  t.add_column("fits");
  const std::size_t n =
      top > 0 ? std::min(plan.layouts.size(), static_cast<std::size_t>(top)) : plan.layouts.size();
  for (std::size_t i = 0; i < n; ++i) {
    const LayoutCost& c = plan.layouts[i];
    const auto& p = c.per_layer;
    std::vector<std::string> row = {
        std::to_string(i + 1),
        c.layout.shape_name(),
        planner::dispatcher_name(c.layout.dispatcher) + (c.layout.tbo ? " +tbo" : ""),
        planner::mapping_name(c.layout.mapping),
        ms(p.router.seconds),
        ms(p.dispatch.seconds),
        ms(p.experts.seconds),
        ms(p.combine.seconds),
        ms(p.tp.seconds),
        ms(p.shared.seconds),
        ms(p.total()),
        ms(c.dense.attention.seconds),
        ms(c.step_seconds),
        format_fixed(c.tokens_per_s_per_gpu, 0)};
    if (decode) row.push_back(format_fixed(c.tokens_per_s_per_user, 1));
    row.push_back(gib(c.memory.total()));
    if (slots) {
      row.push_back(std::to_string(c.num_slots) + " (" +
                    std::to_string(c.num_slots / c.layout.ep_size) + ")");
    }
    if (w.counts_kv()) {
      row.push_back(gib(c.memory.kv_cache));
      row.push_back(format_fixed(c.max_sequences_per_gpu, 1));
    }
    row.push_back(c.feasible ? "yes" : "no");
    t.add_row(row);
  }
  out += t.render();
  if (n < plan.layouts.size()) {
    out += "... " + std::to_string(plan.layouts.size() - n) + " more layouts (--top 0 shows all)\n";
  }
  for (std::size_t i = 0; i < n; ++i) {
    const LayoutCost& c = plan.layouts[i];
    if (!c.infeasible_reason.empty()) {
      out += "#" + std::to_string(i + 1) +
             " cannot run: " + render_error(Error{c.infeasible_reason}, flag_of) + "\n";
    }
  }
  out += "\n";
  if (plan.recommended >= 0) {
    const auto& best = plan.layouts[static_cast<std::size_t>(plan.recommended)].layout;
    out += "recommended: " + best.full_name() + "\n";
  } else {
    out += "recommended: none\n";
  }
  // Reasons may name inputs as "{gpus}": the flags here.
  for (const auto& r : plan.reasons) out += "  - " + render_error(Error{r}, flag_of) + "\n";
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

// Each MoE layer of the recommended layout: what skew and placement cost, layer by layer.
std::string render_per_layer(const planner::Plan& plan) {
  if (plan.recommended < 0) return "";
  const auto& c = plan.layouts[static_cast<std::size_t>(plan.recommended)];
  std::string out = "\nper MoE layer of the recommended layout (" + c.layout.shape_name() + " " +
                    planner::dispatcher_name(c.layout.dispatcher) + "):\n";
  if (c.layers.empty()) {
    return out + "  every layer costs the same (" + plan.load_source +
           " load): " + ms(c.per_layer.total()) + " ms, imbalance " + format_fixed(c.imbalance, 2) +
           "\n";
  }
  Table t;
  t.add_column("layer", Table::Align::kRight);
  t.add_column("imbalance", Table::Align::kRight);
  t.add_column("experts ms", Table::Align::kRight);
  t.add_column("layer ms", Table::Align::kRight);
  for (std::size_t i = 0; i < c.layers.size(); ++i) {
    t.add_row({std::to_string(i), format_fixed(c.layer_imbalance[i], 2),
               ms(c.layers[i].experts.seconds), ms(c.layers[i].total())});
  }
  return out + t.render() +
         "imbalance: max / mean routed pairs per EP rank after placement (1.00 = balanced)\n";
}

/// `plan --layout-file`: the layout, its placement and the costs predicted for it; warns when the
/// model or cluster file changed since the layout was exported.
int run_layout_file(const PlanOptions& o) {
  auto spec = planner::load_layout_file(o.layout_file);
  if (!spec) return report_error(spec.error());
  const auto& c = spec->chosen;
  for (const auto& [what, path, recorded] :
       {std::tuple{"model", spec->model_source, spec->model_fingerprint},
        std::tuple{"cluster", spec->cluster_source, spec->cluster_fingerprint}}) {
    auto now = planner::file_fingerprint(path);
    if (!now) {
      std::fprintf(stderr, "moeplan: warning: %s file %s is not readable here: %s\n", what,
                   path.c_str(), now.error().message.c_str());
    } else if (*now != recorded) {
      std::fprintf(stderr,
                   "moeplan: warning: %s file %s changed since the export (%s, recorded %s)\n",
                   what, path.c_str(), now->c_str(), recorded.c_str());
    }
  }
  std::vector<std::pair<std::string, std::string>> rows;
  rows.emplace_back("model", spec->model + " (" + spec->model_fingerprint + ")");
  rows.emplace_back("cluster",
                    spec->cluster + ", " + spec->device + " (" + spec->cluster_fingerprint + ")");
  rows.emplace_back("workload", planner::phase_name(spec->workload.phase) + ", " +
                                    std::to_string(spec->workload.tokens_per_gpu) +
                                    " tokens per GPU");
  rows.emplace_back(
      "layout", c.layout.shape_name() + " " + planner::dispatcher_name(c.layout.dispatcher) + " " +
                    planner::mapping_name(c.layout.mapping) + " on " +
                    std::to_string(c.layout.num_gpus) + " GPUs" +
                    (c.rank > 0 ? " (plan rank " + std::to_string(c.rank) + ")" : std::string()));
  rows.emplace_back(
      "placement", spec->placement
                       ? spec->placement->policy + ", " +
                             std::to_string(spec->placement->num_slots) + " slots per MoE layer (" +
                             std::to_string(spec->placement->num_slots - spec->num_experts) +
                             " redundant)"
                       : std::string("contiguous, no redundant slots"));
  rows.emplace_back("cost source", spec->cost_source + " (placement " + spec->cost_placement +
                                       ", expert load " + spec->load_source + ")");
  const auto& p = c.per_layer;
  rows.emplace_back("ms per MoE layer",
                    "router " + ms(p.router.seconds) + ", dispatch " + ms(p.dispatch.seconds) +
                        ", experts " + ms(p.experts.seconds) + ", combine " +
                        ms(p.combine.seconds) + ", tp " + ms(p.tp.seconds) + ", shared " +
                        ms(p.shared.seconds) + ", total " + ms(p.total()));
  rows.emplace_back("step", ms(c.step_seconds) + " ms per step (as the plan predicted it)");
  rows.emplace_back("throughput", format_fixed(c.tokens_per_s_per_gpu, 0) + " tokens/s/GPU");
  rows.emplace_back("memory", format_fixed(c.memory_gib, 2) + " GiB of " +
                                  format_fixed(c.capacity_gib, 2) + " GiB per GPU" +
                                  (c.feasible ? "" : " (does not fit)"));
  const std::string text = render_key_values(rows);
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

std::string source_legend() {
  return std::string(planner::kSourceExact) + " = measured point, " + planner::kSourceInterp +
         " = log-space interpolation between measured points, " + planner::kSourceExtrap +
         " = measured efficiency held outside the measured range, " + planner::kSourceMiss +
         " = not in the profile, roofline used";
}

/// A time in ms for a table cell, or "unbounded" (a queue at its capacity).
std::string ms_cell(double seconds, int decimals) {
  return std::isfinite(seconds) ? format_fixed(seconds * 1e3, decimals) : "unbounded";
}

std::string render_serving(const planner::ServingPlan& s) {
  std::string out = "serving plan: " + s.model + " on " + s.cluster + ", " +
                    std::to_string(s.gpu_budget) + " GPUs, " + std::to_string(s.isl) + " + " +
                    std::to_string(s.osl) + " tokens per request";
  if (s.ttft_target_s > 0.0) {
    out += ", TTFT ≤ " + format_fixed(s.ttft_target_s * 1e3, 1) + " ms";
    if (s.ttft_percentile > 0.0) out += " at " + planner::percentile_name(s.ttft_percentile);
  }
  if (s.tpot_target_s > 0.0) out += ", TPOT ≤ " + format_fixed(s.tpot_target_s * 1e3, 2) + " ms";
  if (s.arrival_rate > 0.0) out += ", " + format_fixed(s.arrival_rate, 2) + " requests/s offered";
  out += "\ncost source: " + s.cost_source + "; " + std::to_string(s.plans_costed) +
         " instance plans costed (every legal layout of each)\n\n";
  Table t;
  t.add_column("deployment");
  t.add_column("pool");
  t.add_column("instances", Table::Align::kRight);
  t.add_column("GPUs", Table::Align::kRight);
  t.add_column("layout");
  t.add_column("dispatcher");
  t.add_column("batch", Table::Align::kRight);
  const bool pct = s.ttft_percentile > 0.0;
  t.add_column(pct ? "TTFT " + planner::percentile_name(s.ttft_percentile) + " ms" : "TTFT ms",
               Table::Align::kRight);
  for (const char* h : {"TPOT ms", "req/s", "tok/s/GPU", "tok/s/user"}) {
    t.add_column(h, Table::Align::kRight);
  }
  if (s.disaggregated) {
    const auto& d = *s.disaggregated;
    t.add_row({"disaggregated", "prefill", std::to_string(d.prefill_instances),
               std::to_string(d.prefill.gpus), d.prefill.layout.layout.shape_name(),
               planner::dispatcher_name(d.prefill.layout.layout.dispatcher),
               std::to_string(d.prefill.batch) + " prompts",
               ms_cell(pct ? d.ttft_quantile_s : d.ttft_s, 1), "",
               format_fixed(d.prefill_instances * d.prefill.requests_per_s, 2), "", ""});
    t.add_row({"", "decode", std::to_string(d.decode_instances), std::to_string(d.decode.gpus),
               d.decode.layout.layout.shape_name(),
               planner::dispatcher_name(d.decode.layout.layout.dispatcher),
               std::to_string(d.decode.batch) + " seqs/GPU", "", format_fixed(d.tpot_s * 1e3, 2),
               format_fixed(d.decode_instances * d.decode.requests_per_s, 2),
               format_fixed(d.tokens_per_s_per_gpu, 1), format_fixed(d.tokens_per_s_per_user, 1)});
  }
  if (s.aggregated) {
    const auto& a = *s.aggregated;
    t.add_row({"aggregated", "both", std::to_string(a.instances), std::to_string(a.instance.gpus),
               a.instance.layout.layout.shape_name(),
               planner::dispatcher_name(a.instance.layout.layout.dispatcher),
               std::to_string(a.instance.batch) + " seqs/GPU",
               ms_cell(pct ? a.ttft_quantile_s : a.ttft_s, 1), format_fixed(a.tpot_s * 1e3, 2),
               format_fixed(a.requests_per_s, 2), format_fixed(a.tokens_per_s_per_gpu, 1),
               format_fixed(a.tokens_per_s_per_user, 1)});
  }
  if (s.disaggregated || s.aggregated) out += t.render();
  out += "\nrecommended: " + (s.recommended.empty() ? std::string("none") : s.recommended) + "\n";
  for (const auto& r : s.reasons) out += "  - " + render_error(Error{r}, flag_of) + "\n";
  if (s.disaggregated) {
    out += "KV cache per request: " +
           format_fixed(s.disaggregated->kv_bytes_per_request / 1048576.0, 1) +
           " MiB, sent from prefill to decode in " +
           format_fixed(s.disaggregated->kv_transfer_s * 1e3, 2) +
           " ms per prefill step (on the cluster's links, counted in the TTFT)\n";
  }
  out +=
      "TTFT: the mean under Poisson arrivals at the deployment's rate — the wait for the "
      "prefill work ahead (M/D/1 per prefill instance; in an aggregated one, M/D/1 for the "
      "chunks of its mixed passes, its decode passes as vacations) + the prompt's prefill (+ "
      "the KV transfer) + the wait for a free decode slot (M/D/c: GPUs × sequences per GPU "
      "slots, each held osl × TPOT); unbounded where the prefill or the slots run at their "
      "capacity\n";
  out += s.arrival_rate > 0.0
             ? "tok/s/GPU: output tokens per second over the GPUs used; req/s: requests the "
               "pool can complete per second (the deployment runs at the offered rate)\n"
             : "tok/s/GPU: output tokens per second over the whole budget; req/s: requests "
               "completed per second by the pool (the deployment runs at the slower pool's "
               "rate, or below it where the TTFT target needs a shorter queue)\n";
  return out;
}

int run_plan(const PlanOptions& o) {
  if (!o.layout_file.empty()) return run_layout_file(o);
  if (o.batches_opt->count() > 0 && !o.disagg && !o.pareto) {
    return report_error(input_error(
        "batches", ": the decode batches to sweep are for --pareto or --disagg; expected one"));
  }
  auto batches = planner::sweep_batches(o.batches);
  if (!batches) return report_error(batches.error());
  if (o.disagg) {
    const char* clash = o.phase_opt->count() > 0    ? "--phase"
                        : o.tokens_opt->count() > 0 ? "--tokens"
                        : o.pareto                  ? "--pareto"
                        : !o.export_format.empty()  ? "--export"
                        : o.traffic >= 0            ? "--traffic"
                        : o.per_layer               ? "--per-layer"
                                                    : nullptr;
    if (clash != nullptr) {
      return report_error(Error{std::string("plan: --disagg plans both phases over instance "
                                            "sizes and batches; drop ") +
                                clash});
    }
    if (o.isl_opt->count() == 0 || o.osl_opt->count() == 0) {
      return report_error(
          input_error("isl",
                      ": --disagg needs the request's input and output lengths; expected --isl N "
                      "--osl M"));
    }
    for (const auto& [opt, value, name] : {std::tuple{o.ttft_opt, o.ttft_ms, "ttft-ms"},
                                           std::tuple{o.tpot_opt, o.tpot_ms, "tpot-ms"}}) {
      if (opt->count() > 0 && !(value > 0.0 && value < 1e9)) {
        return report_error(
            input_error(name, ": expected a positive time in ms, got " + format_fixed(value, 3)));
      }
    }
    if (o.ttft_percentile_opt->count() > 0 &&
        !(o.ttft_percentile > 0.0 && o.ttft_percentile < 100.0)) {
      return report_error(
          input_error("ttft-percentile",
                      ": expected a percentile between 0 and 100 (exclusive), e.g. 90 or "
                      "99, got " +
                          format_fixed(o.ttft_percentile, 3)));
    }
    if (o.rate_opt->count() > 0 && !(o.rate > 0.0 && o.rate < 1e9)) {
      return report_error(input_error(
          "rate",
          ": expected a positive number of requests per second, got " + format_fixed(o.rate, 3)));
    }
  } else if (o.rate_opt->count() > 0) {
    return report_error(input_error(
        "rate", ": an offered request rate is for serving plans; expected --disagg with it"));
  } else if (o.ttft_percentile_opt->count() > 0) {
    return report_error(input_error("ttft-percentile",
                                    ": the TTFT's percentile is for serving plans (their "
                                    "queueing); expected --disagg with it"));
  }
  std::optional<planner::ExportFormat> export_format;
  if (!o.export_format.empty()) {
    auto f = planner::parse_export_format(o.export_format);
    if (!f) return report_error(with_input(f.error(), "export"));
    export_format = *f;
    if (o.pareto) {
      return report_error(
          Error{"plan: --export writes one layout's files; drop --pareto (a sweep of batches)"});
    }
    if (o.json || !o.output.empty()) {
      return report_error(
          Error{"plan: --export writes the layout's files; drop --json and -o "
                "(use --out DIR for the folder)"});
    }
  } else if (!o.out_dir.empty() || !o.export_layout.empty() || !o.framework_version.empty()) {
    return report_error(
        Error{"plan: --out, --layout and --framework-version go with --export FORMAT"});
  }
  auto model = models::load_model(o.model);
  if (!model) return report_error(model.error());
  if (auto st = models::apply_weights_choice(*model, o.weights); !st) {
    return report_error(st.error());
  }
  auto setup = planner::make_cost_setup(o.cluster, o.costs);
  if (!setup) return report_error(setup.error());
  const planner::Cluster* cluster = setup->cluster.get();
  if (o.top < 0) {
    return report_error(
        input_error("top", ": expected 0 (all) or a positive count, got " + std::to_string(o.top)));
  }
  planner::ExpertLoad given_load;
  if (!o.load.empty()) {
    auto data = profiler::load_any(o.load, &*model);
    if (!data) return report_error(data.error());
    given_load = std::move(data->load);
  }
  planner::PlanChoices choices;
  choices.phase = o.disagg ? "decode" : o.phase;
  if (o.tokens_opt->count() > 0) choices.tokens_per_gpu = o.tokens;
  if (o.gpus_opt->count() > 0) choices.num_gpus = o.gpus;
  choices.dispatchers = o.dispatchers;
  choices.tbo = o.tbo;
  if (o.ll_max_tokens_opt->count() > 0) choices.ll_max_tokens = o.ll_max_tokens;
  if (o.isl_opt->count() > 0) choices.isl = o.isl;
  if (o.osl_opt->count() > 0) choices.osl = o.osl;
  if (o.mem_fraction_opt->count() > 0) choices.mem_fraction = o.mem_fraction;
  if (!o.disagg) {  // --disagg checks each phase's target itself
    if (o.ttft_opt->count() > 0) choices.ttft_ms = o.ttft_ms;
    if (o.tpot_opt->count() > 0) choices.tpot_ms = o.tpot_ms;
  }
  choices.attention_dp = o.attention_dp;
  choices.placement = o.placement;
  auto redundancy = planner::parse_plan_redundancy(o.redundant);
  if (!redundancy) return report_error(redundancy.error());
  choices.redundancy = *redundancy;
  auto request =
      planner::make_plan_request(*model, *cluster, choices, std::move(given_load), !o.load.empty());
  if (!request) return report_error(request.error());
  const planner::PlanRequest& req = *request;
  if (o.pareto && req.workload.phase != planner::Phase::kDecode) {
    // Before any work: the same message decode_pareto gives.
    return report_error(input_error("pareto",
                                    ": the front of tokens/s/user against tokens/s/GPU is over "
                                    "decode batches; expected {phase} decode"));
  }
  const planner::CostSource& costs = setup->costs();
  if (o.disagg) {
    planner::ServingRequest sreq;
    sreq.base = req;
    sreq.gpu_budget = o.gpus_opt->count() > 0 ? o.gpus : 0;
    if (o.ttft_opt->count() > 0) sreq.ttft_target_s = o.ttft_ms * 1e-3;
    if (o.tpot_opt->count() > 0) sreq.tpot_target_s = o.tpot_ms * 1e-3;
    if (o.rate_opt->count() > 0) sreq.arrival_rate = o.rate;
    if (o.ttft_percentile_opt->count() > 0) sreq.ttft_percentile = o.ttft_percentile / 100.0;
    sreq.decode_batches = *batches;
    auto serving = planner::plan_serving(*model, *cluster, costs, sreq);
    if (!serving) return report_error(serving.error());
    std::string text;
    if (o.json) {
      nlohmann::json j = planner::serving_to_json(*serving);
      if (setup->measured) j["cost_source_misses"] = setup->measured->misses();
      text = j.dump(2) + "\n";
    } else {
      text = render_serving(*serving);
      if (setup->measured && !setup->measured->misses().empty()) {
        text += std::to_string(setup->measured->misses().size()) +
                " kinds of query missed the cost database and used the roofline\n";
      }
    }
    // As a plan with no fitting layout: exit 0, the reasons say what to change.
    return emit_text(text, o.output);
  }
  auto plan = planner::make_plan(*model, *cluster, costs, req);
  if (!plan) return report_error(plan.error());
  if (export_format) {
    const auto summary = planner::summarize_plan(*plan);
    auto chosen = planner::select_layout(summary, o.export_layout);
    if (!chosen) return report_error(chosen.error());
    // A layout planned with redundant slots exports the placement the plan costed it with.
    std::optional<planner::PlacementFile> placement;
    if (req.placement && chosen->num_slots > model->num_experts) {
      auto p = req.placement(chosen->layout.ep_size);
      if (!p) return report_error(p.error());
      placement = planner::placement_file_of(*p, cluster->info().gpus_per_node, plan->load_source);
    }
    auto spec = planner::make_export_spec(
        summary, *chosen, *model, *cluster, placement ? &*placement : nullptr,
        placement ? "plan placement " + plan->placement_policy : std::string());
    if (!spec) return report_error(spec.error());
    return emit_export(*spec, *export_format, o.framework_version, o.out_dir);
  }
  nlohmann::json j;
  std::string text;
  if (o.json) j = planner::plan_to_json(*plan, o.top_opt->count() > 0 ? o.top : 0, o.explain);
  if (!o.json) {
    text = render_plan(*plan, *cluster, o.top, o.explain) +
           (o.per_layer ? render_per_layer(*plan) : std::string());
  }
  if (o.pareto) {
    auto points = planner::decode_pareto(*model, *cluster, costs, req, *batches);
    if (!points) return report_error(points.error());
    if (o.json) {
      j["pareto"] = planner::pareto_to_json(*points);
    } else {
      text +=
          "\nPareto sweep over the decode batch per GPU (the fastest layout that fits at "
          "each; * = on the front of tokens/s/user against tokens/s/GPU):\n";
      Table t;
      t.add_column("batch/GPU", Table::Align::kRight);
      t.add_column("layout");
      t.add_column("dispatcher");
      for (const char* h : {"TPOT ms", "tok/s/user", "tok/s/GPU"}) {
        t.add_column(h, Table::Align::kRight);
      }
      t.add_column("front");
      for (const auto& p : *points) {
        t.add_row({std::to_string(p.batch_per_gpu), p.best.layout.shape_name(),
                   planner::dispatcher_name(p.best.layout.dispatcher) +
                       (p.best.layout.tbo ? " +tbo" : ""),
                   ms(p.best.step_seconds), format_fixed(p.tokens_per_s_per_user, 1),
                   format_fixed(p.tokens_per_s_per_gpu, 0), p.on_front ? "*" : ""});
      }
      text += points->empty() ? "  no batch fits\n" : t.render();
    }
  }
  if (o.traffic >= 0) {
    // Layer `traffic` of the recommended layout (the first when none fits): GPU × GPU bytes.
    const planner::ExpertLoad load =
        req.load.num_layers() > 0
            ? req.load
            : planner::ExpertLoad::uniform(model->num_moe_layers(), model->num_experts);
    const auto& best = plan->layouts[static_cast<std::size_t>(std::max(0, plan->recommended))];
    const planner::CostContext ctx{*model, *cluster, costs, req.workload, load, req.placement};
    auto m = planner::layer_traffic(ctx, best.layout, o.traffic);
    if (!m) return report_error(Error{"--traffic: " + m.error().message});
    const std::string name = best.layout.full_name();
    if (o.json) {
      j["traffic"] = {{"layout", name}, {"layer", o.traffic}, {"bytes", *m}};
    } else {
      text += "\ntraffic of " + name + ", MoE layer " + std::to_string(o.traffic) +
              ": MiB GPU i (row) sends GPU j (column), dispatch and combine\n";
      Table t;
      t.add_column("GPU", Table::Align::kRight);
      for (std::size_t c = 0; c < m->size(); ++c) {
        t.add_column(std::to_string(c), Table::Align::kRight);
      }
      for (std::size_t r = 0; r < m->size(); ++r) {
        std::vector<std::string> row = {std::to_string(r)};
        for (double b : (*m)[r]) row.push_back(format_fixed(b / (1024.0 * 1024.0), 1));
        t.add_row(row);
      }
      text += t.render();
      const auto totals = planner::traffic_totals(*m, cluster->info().gpus_per_node);
      text += "inside nodes (NVLink) " + format_fixed(totals.intra_node / (1024.0 * 1024.0), 1) +
              " MiB, across nodes (network) " +
              format_fixed(totals.inter_node / (1024.0 * 1024.0), 1) + " MiB\n";
    }
  }
  if (setup->measured) {
    const std::vector<std::string> misses = setup->measured->misses();
    if (o.json) {
      j["cost_source_misses"] = misses;
      j["cost_source_legend"] = source_legend();
    } else {
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
  if (!setup->profile_note.empty()) {
    // What the local cluster's profile measured (one node or several, collectives within or
    // across nodes).
    if (o.json) {
      j["cost_source_profile"] = setup->profile_note;
    } else {
      text += setup->profile_note + "\n";
    }
  }
  if (o.json) text = j.dump(2) + "\n";
  return emit_text(text, o.output);
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
  cmd->add_option("--weights", o->weights, weights_flag_help());
  o->phase_opt = cmd->add_option("--phase", o->phase, "prefill or decode")->capture_default_str();
  cmd->add_flag("--disagg", o->disagg,
                "Serving plan: disaggregated prefill and decode pools (each instance's layout, "
                "x prefill and y decode instances, the KV cache sent between them on the "
                "cluster's links) against aggregated serving, on the --gpus budget, for --isl "
                "and --osl within --ttft-ms and --tpot-ms");
  o->tokens_opt = cmd->add_option(
      "--tokens", o->tokens,
      "Tokens per GPU per step (prefill, default 4096) or decode batch per GPU (default 128)");
  o->gpus_opt = cmd->add_option("--gpus", o->gpus, "Plan for the first N GPUs of the cluster");
  cmd->add_option("--dispatcher,--dispatchers", o->dispatchers,
                  "Only these dispatchers: padded_a2a, allgather, a2av, deepep_normal, deepep_ll "
                  "(repeatable or comma-separated)")
      ->delimiter(',');
  cmd->add_option("--tbo", o->tbo,
                  "Two-batch overlap: off, on (every layout overlapped) or both (each layout "
                  "with and without)")
      ->capture_default_str();
  o->ll_max_tokens_opt = cmd->add_option(
      "--ll-max-tokens", o->ll_max_tokens,
      "deepep_ll's buffer: most tokens one rank dispatches per step (default 128, SGLang's); "
      "more tokens make the layout infeasible");
  o->isl_opt = cmd->add_option(
      "--isl", o->isl,
      "Input tokens per sequence: count the KV cache (decode: the batch's sequences of isl + osl "
      "tokens; prefill: the step's prompts) and fit memory in --mem-fraction of the HBM");
  o->osl_opt =
      cmd->add_option("--osl", o->osl, "Output tokens per sequence (with --isl; decode needs it)");
  o->mem_fraction_opt = cmd->add_option(
      "--mem-fraction", o->mem_fraction,
      "With --isl: share of each GPU's memory for weights, activations and KV cache (default "
      "0.9, vLLM's gpu_memory_utilization)");
  o->ttft_opt = cmd->add_option(
      "--ttft-ms", o->ttft_ms,
      "Prefill: time-to-first-token target; layouts whose step of prompts takes longer are "
      "listed as not meeting it. With --disagg: the serving plan's TTFT, queueing included (the "
      "mean, or --ttft-percentile)");
  o->tpot_opt = cmd->add_option(
      "--tpot-ms", o->tpot_ms,
      "Decode: time-per-output-token target; layouts whose step takes longer are listed as not "
      "meeting it. With --disagg: the decode pool's step, the aggregated mean pass");
  o->rate_opt = cmd->add_option(
      "--rate", o->rate,
      "With --disagg: requests per second offered (Poisson arrivals); the deployment with the "
      "fewest GPUs that serves them within the targets (default: the most requests/s the GPUs "
      "serve)");
  o->ttft_percentile_opt = cmd->add_option(
      "--ttft-percentile", o->ttft_percentile,
      "With --disagg: the TTFT target holds for this percentile of the requests (e.g. 90, 99) "
      "instead of the mean; the table shows it");
  o->batches_opt =
      cmd->add_option("--batches", o->batches,
                      "With --pareto or --disagg: the decode batches per GPU to "
                      "sweep (comma-separated; default: the powers of 2 from 1 to 1024)")
          ->delimiter(',');
  o->top_opt = cmd->add_option(
      "--top", o->top, "Show the best K layouts (0: all; default 10 in the table, all in JSON)");
  cmd->add_flag("--json", o->json, "Print the plan as JSON (docs/PLAN_SCHEMA.md)");
  cmd->add_flag("--explain", o->explain, "Also list the excluded combinations and their rule");
  cmd->add_flag("--pareto", o->pareto,
                "Decode: also sweep the batch per GPU (1, 2, 4, …, 1024) and list each batch's "
                "best layout, its tokens/s/user and tokens/s/GPU, and which are on the Pareto "
                "front");
  cmd->add_flag("--attention-dp", o->attention_dp,
                "Also enumerate attention data-parallel replicas (dp·ep·tp = GPUs)");
  cmd->add_option("--load", o->load,
                  "Expert load: a file (.json, .csv, .npy) or a synthetic spec such as "
                  "powerlaw:alpha=1.2,shuffle=1 or routed:tokens=1024 (default: uniform)");
  cmd->add_option("--placement", o->placement,
                  "Placement each EP size is costed with: contiguous, round_robin, eplb, best, "
                  "or a placement file from `moeplan place --out` (its EP size only)")
      ->capture_default_str();
  cmd->add_option("--redundant", o->redundant,
                  "Redundant expert slots for eplb and best: N per EP rank, total:R (R in all; "
                  "an EP size is legal when (experts + R) % ep == 0) or auto (per EP size the "
                  "fewest that make it legal)")
      ->capture_default_str();
  cmd->add_option("--traffic", o->traffic,
                  "Also give MoE layer N's GPU × GPU dispatch and combine bytes of the "
                  "recommended layout");
  cmd->add_option("-o,--output", o->output, "Write to this file (atomically) instead of stdout");
  cmd->add_flag("--per-layer", o->per_layer,
                "Also list each MoE layer's cost and imbalance for the recommended layout");
  cmd->add_option("--export", o->export_format,
                  "Export a layout instead: sglang | vllm | trtllm | megatron | paddle | json");
  cmd->add_option("--layout", o->export_layout,
                  "With --export: a rank (3) or shape EPxTP (8x2); default the recommended one");
  cmd->add_option("--framework-version", o->framework_version,
                  "With --export: the framework release to write for (default: its current one)");
  cmd->add_option("--out", o->out_dir, "With --export: write the files into this folder");
  cmd->add_option("--layout-file", o->layout_file,
                  "Read a layout file (--export json) back and print its layout and costs");
  cmd->callback([&action, o] { action = [o] { return run_plan(*o); }; });
}

}  // namespace moeplan::cli
