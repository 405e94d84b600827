// `moeplan validate`: run the real sharded layer for each layout × dispatcher × token count,
// measure it, and compare with the planner's prediction from the cost database (and from the
// roofline): the proof that the planner's figures describe real runs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/cli/cli_common.hpp"
#include "app/cli/progress.hpp"
#include "app/cli/table.hpp"
#include "kernels/job_world.hpp"
#include "kernels/mpi_info.hpp"
#include "models/registry.hpp"
#include "models/scaled_model.hpp"
#include "models/units.hpp"
#include "planner/costs/cost_model.hpp"
#include "planner/costs/cost_setup.hpp"
#include "profiler/pace.hpp"
#include "profiler/validate.hpp"
#include "profiler/validate_attention.hpp"

namespace moeplan::cli {

namespace {

struct ValidateOptions : profiler::ValidateOptions {
  ValidateOptions() { model = models::kDefaultModel; }
  int ranks = -1;
  bool json = false;
  bool attention = false;  ///< validate the attention core instead of the MoE layer
  profiler::AttentionValidateOptions attn;
  /// Options of the MoE layer's cases given on the command line (refused with --attention).
  std::vector<std::string> layer_options_given;
};

using Request = profiler::ValidateRequest;
using Row = profiler::ValidateRow;
using profiler::relative_error;
using profiler::source_summary;

std::string pct(double e) { return format_fixed(100.0 * e, 1) + "%"; }

/// A case's stand-in (null when the backend ran its own kernels) for the JSON rows.
nlohmann::json stand_in_json(const profiler::MeasuredCase& r) {
  return r.stand_in.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.stand_in);
}

/// A case's second measurement (null when it was measured once): which one was kept, and the
/// other's statistic and spread.
nlohmann::json second_look_json(const profiler::MeasuredCase& r) {
  if (!r.second_look.done) return nullptr;
  return {{"replaced", r.second_look.replaced},
          {"other_ms", r.second_look.other_s * 1e3},
          {"other_spread", r.second_look.other_spread}};
}

/// The summary object of the JSON: the errors of the cases compared (null when none was).
nlohmann::json summary_json(const profiler::ValidateSummary& s) {
  const auto value = [&](double v) {
    return s.compared > 0 ? nlohmann::json(v) : nlohmann::json(nullptr);
  };
  return {{"median_abs_error", value(s.median_abs_error)},
          {"worst_abs_error", value(s.worst_abs_error)},
          {"roofline_median_abs_error", value(s.roofline_median_abs_error)},
          {"roofline_worst_abs_error", value(s.roofline_worst_abs_error)},
          {"compared_cases", s.compared},
          {"stand_in_cases", s.stand_in_cases},
          {"remeasured_cases", s.remeasured},
          {"replaced_cases", s.replaced}};
}

/// The pace object of the JSON: the probe, the profile's range (null when it recorded none),
/// validate's figures before and after its cases (null: not measured), the drift and whether
/// the profile is stale.
nlohmann::json pace_json(const profiler::PaceCheck& c) {
  const auto value = [](const planner::MachinePace& p) {
    return p.recorded() ? nlohmann::json(p.gemm_gflops) : nlohmann::json(nullptr);
  };
  nlohmann::json profile = nullptr;
  if (c.profile_recorded) {
    profile = {{"low_gflops", c.profile_low.gemm_gflops},
               {"high_gflops", c.profile_high.gemm_gflops}};
  }
  return {{"probe", profiler::pace_probe_text()},
          {"profile", profile},
          {"before_gflops", value(c.before)},
          {"after_gflops", value(c.after)},
          {"drift", c.profile_recorded ? nlohmann::json(c.drift) : nlohmann::json(nullptr)},
          {"tolerance", profiler::kPaceTolerance},
          {"stale", c.stale}};
}

/// The text summary line: the errors of the cases compared, and the cases left out.
void print_summary(const profiler::ValidateSummary& s, std::size_t cases) {
  if (s.compared > 0) {
    const std::string of = static_cast<std::size_t>(s.compared) == cases
                               ? std::to_string(cases)
                               : std::to_string(s.compared) + " of " + std::to_string(cases);
    std::printf(
        "cost DB: median |error| %s, worst %s; roofline: median |error| %s, worst %s (%s "
        "cases)\n",
        pct(s.median_abs_error).c_str(), pct(s.worst_abs_error).c_str(),
        pct(s.roofline_median_abs_error).c_str(), pct(s.roofline_worst_abs_error).c_str(),
        of.c_str());
  } else {
    std::printf("cost DB and roofline: no case compared (%zu cases)\n", cases);
  }
  if (s.stand_in_cases > 0) {
    std::printf(
        "%d case(s) left out: the backend ran a stand-in for one of their kernels while they were "
        "timed (see the source column), so their time is not the kernels'\n",
        s.stand_in_cases);
  }
  if (s.remeasured > 0) {
    std::printf(
        "%d case(s) had not settled (samples spread beyond %.0f%% in their time budget) and were "
        "measured again after the others: %d replaced by the steadier measurement\n",
        s.remeasured, 100.0 * profiler::HarnessOptions{}.target_spread, s.replaced);
  }
}

/// The source column: the prediction's sources, or why the case is not compared.
std::string source_cell(const profiler::MeasuredCase& r, const std::string& sources) {
  if (!r.verified) return "VERIFY FAILED: " + r.verify_detail;
  if (!r.stand_in.empty()) return "STAND-IN, not compared: " + r.stand_in;
  return sources;
}
std::string ms(double s) { return format_fixed(s * 1e3, 2); }

nlohmann::json items_json(const planner::LayerCost& c, bool sources) {
  nlohmann::json j;
  const std::pair<const char*, const planner::CostItem*> items[] = {
      {"router", &c.router},   {"dispatch", &c.dispatch},
      {"experts", &c.experts}, {"combine", &c.combine},
      {"tp", &c.tp},           {"shared", &c.shared}};
  for (const auto& [name, item] : items) {
    j[name] = sources ? nlohmann::json(item->source) : nlohmann::json(item->seconds * 1e3);
  }
  return j;
}

int print_rows(const ValidateOptions& o, const Request& req, const std::vector<Row>& rows,
               int world, const std::string& mode, const std::vector<std::string>& misses,
               const profiler::PaceCheck& pace) {
  const profiler::ValidateSummary sum = profiler::summarize(rows);
  const bool all_verified = sum.all_verified;
  if (o.json) {
    nlohmann::json out = {{"model", req.model.name},
                          {"scale", o.scale},
                          {"dtype", std::string(dtype_name(req.spec.dtype))},
                          {"ranks", world},
                          {"communicator", mode},
                          {"costs", o.costs},
                          {"statistic", o.statistic},
                          {"rows", nlohmann::json::array()}};
    for (const auto& r : rows) {
      out["rows"].push_back({{"layout", r.c.layout.short_name()},
                             {"ep_size", r.c.layout.ep_size},
                             {"tp_size", r.c.layout.tp_size},
                             {"dispatcher", kernels::dispatcher_name(r.c.layout.dispatcher)},
                             {"tokens", r.c.tokens},
                             {"measured_ms", r.measured_s * 1e3},
                             {"measured_p10_ms", r.p10_s * 1e3},
                             {"measured_p90_ms", r.p90_s * 1e3},
                             {"repetitions", r.reps},
                             {"copies", r.copies},
                             {"predicted_ms", r.predicted.total() * 1e3},
                             {"roofline_ms", r.roofline.total() * 1e3},
                             {"error", relative_error(r.predicted.total(), r.measured_s)},
                             {"roofline_error", relative_error(r.roofline.total(), r.measured_s)},
                             {"sources", items_json(r.predicted, true)},
                             {"predicted_parts_ms", items_json(r.predicted, false)},
                             {"roofline_parts_ms", items_json(r.roofline, false)},
                             {"measured_parts_ms",
                              {{"router", r.phases.router * 1e3},
                               {"dispatch", r.phases.dispatch * 1e3},
                               {"experts", r.phases.experts * 1e3},
                               {"tp", r.phases.tp * 1e3},
                               {"combine", r.phases.combine * 1e3},
                               {"shared", r.phases.shared * 1e3}}},
                             {"verified", r.verified},
                             {"stand_in", stand_in_json(r)},
                             {"second_look", second_look_json(r)}});
    }
    out["summary"] = summary_json(sum);
    out["pace"] = pace_json(pace);
    out["cost_source_misses"] = misses;
    out["skipped"] = req.skipped;
    std::fputs((out.dump(2) + "\n").c_str(), stdout);
  } else {
    std::printf(
        "validate %s (scale 1/%d, %s) on %d ranks (%s): measured layer vs planner (%s) and "
        "roofline, %s times\n",
        req.model.name.c_str(), o.scale, std::string(dtype_name(req.spec.dtype)).c_str(), world,
        mode.c_str(), o.costs.c_str(), o.statistic.c_str());
    Table t;
    t.add_column("layout");
    t.add_column("dispatcher");
    for (const char* h : {"tokens", "measured ms", "p10..p90", "predicted ms", "error",
                          "roofline ms", "roofline err"}) {
      t.add_column(h, Table::Align::kRight);
    }
    t.add_column("sources (items)");
    for (const auto& r : rows) {
      t.add_row({r.c.layout.short_name(), kernels::dispatcher_name(r.c.layout.dispatcher),
                 std::to_string(r.c.tokens), ms(r.measured_s), ms(r.p10_s) + ".." + ms(r.p90_s),
                 ms(r.predicted.total()), pct(relative_error(r.predicted.total(), r.measured_s)),
                 ms(r.roofline.total()), pct(relative_error(r.roofline.total(), r.measured_s)),
                 source_cell(r, source_summary(r.predicted))});
    }
    std::fputs(t.render().c_str(), stdout);
    print_summary(sum, rows.size());
    std::printf("%s\n", profiler::describe_pace(pace).c_str());
    if (!misses.empty()) {
      std::printf("%zu kinds of query missed the cost database and used the roofline:\n",
                  misses.size());
      for (const auto& m : misses) std::printf("  - %s\n", m.c_str());
    }
    for (const auto& why : req.skipped) std::printf("not run: %s\n", why.c_str());
  }
  return all_verified ? kExitOk : kExitFailed;
}

/// Prints the CLI's progress line on rank 0.
std::function<void(int, int, const std::string&)> progress_of(Progress* progress) {
  return [progress](int done, int, const std::string& what) {
    if (progress != nullptr) progress->update(done, what);
  };
}

int print_attention_rows(const ValidateOptions& o, const profiler::AttentionValidateRequest& req,
                         const std::vector<profiler::AttentionValidateRow>& rows,
                         const std::vector<std::string>& misses, const profiler::PaceCheck& pace) {
  const auto sum = profiler::summarize(rows);
  if (o.json) {
    nlohmann::json out = {
        {"model", req.model.name},
        {"part", req.scope == profiler::AttentionScope::kCore
                     ? "attention"
                     : (req.scope == profiler::AttentionScope::kBlock ? "attention block"
                                                                      : "decoder layer")},
        {"scope", profiler::scope_name(req.scope)},
        {"dtype", std::string(dtype_name(req.dtype))},
        {"backend", o.backend},
        {"costs", o.costs},
        {"statistic", o.statistic},
        {"rows", nlohmann::json::array()}};
    for (const auto& r : rows) {
      out["rows"].push_back({{"phase", r.c.decode ? "decode" : "prefill"},
                             {"tp_size", r.c.tp},
                             {"tokens", r.c.tokens},
                             {"context", r.c.context},
                             {"heads", r.c.shape.heads},
                             {"kv_heads", r.c.shape.kv_heads},
                             {"qk_dim", r.c.shape.qk_dim},
                             {"v_dim", r.c.shape.v_dim},
                             {"measured_ms", r.measured_s * 1e3},
                             {"measured_p10_ms", r.p10_s * 1e3},
                             {"measured_p90_ms", r.p90_s * 1e3},
                             {"repetitions", r.reps},
                             {"copies", r.copies},
                             {"predicted_ms", r.predicted.seconds * 1e3},
                             {"source", r.predicted.source},
                             {"roofline_ms", r.roofline.seconds * 1e3},
                             {"error", relative_error(r.predicted.seconds, r.measured_s)},
                             {"roofline_error", relative_error(r.roofline.seconds, r.measured_s)},
                             {"verified", r.verified},
                             {"stand_in", stand_in_json(r)},
                             {"second_look", second_look_json(r)}});
    }
    out["summary"] = summary_json(sum);
    out["pace"] = pace_json(pace);
    out["cost_source_misses"] = misses;
    std::fputs((out.dump(2) + "\n").c_str(), stdout);
  } else {
    const char* part = req.scope == profiler::AttentionScope::kCore
                           ? "attention core"
                           : (req.scope == profiler::AttentionScope::kBlock
                                  ? "attention block (norms, projections, RoPE, core)"
                                  : "decoder layer (attention block + MoE layer)");
    std::printf(
        "validate %s %s (%s, %s backend): measured vs planner (%s) and roofline, %s times\n",
        req.model.name.c_str(), part, std::string(dtype_name(req.dtype)).c_str(), o.backend.c_str(),
        o.costs.c_str(), o.statistic.c_str());
    Table t;
    t.add_column("phase");
    for (const char* h : {"tp", "tokens", "context", "heads/kv", "measured ms", "p10..p90",
                          "predicted ms", "error", "roofline ms", "roofline err"}) {
      t.add_column(h, Table::Align::kRight);
    }
    t.add_column("source");
    for (const auto& r : rows) {
      t.add_row({r.c.decode ? "decode" : "prefill", std::to_string(r.c.tp),
                 std::to_string(r.c.tokens) + (r.c.decode ? " seqs" : ""),
                 std::to_string(r.c.context),
                 std::to_string(r.c.shape.heads) + "/" + std::to_string(r.c.shape.kv_heads),
                 ms(r.measured_s), ms(r.p10_s) + ".." + ms(r.p90_s), ms(r.predicted.seconds),
                 pct(relative_error(r.predicted.seconds, r.measured_s)), ms(r.roofline.seconds),
                 pct(relative_error(r.roofline.seconds, r.measured_s)),
                 source_cell(r, r.predicted.source)});
    }
    std::fputs(t.render().c_str(), stdout);
    print_summary(sum, rows.size());
    std::printf("%s\n", profiler::describe_pace(pace).c_str());
    if (!misses.empty()) {
      std::printf("%zu kinds of query missed the cost database and used the roofline%s:\n",
                  misses.size(),
                  req.scope == profiler::AttentionScope::kCore
                      ? ""
                      : " (the embedding and LM head's are priced with the step, outside the "
                        "compared figures)");
      for (const auto& m : misses) std::printf("  - %s\n", m.c_str());
    }
  }
  return sum.all_verified ? kExitOk : kExitFailed;
}

/// validate --attention: one process, the attention core has no communication.
int run_validate_attention(const ValidateOptions& o) {
  for (const std::string& given : o.layer_options_given) {
    if (given == "--weights" && o.attn.scope == "layer") continue;  // the MoE layer's format
    return report_error(
        input_error(given.substr(2),
                    " applies to the MoE layer's cases, not to validate --attention (which takes "
                    "--scope, --contexts, --batches, --tp and --phases; --weights with --scope "
                    "layer)"));
  }
  if (o.ranks > 1 || kernels::launcher_world_size() > 1) {
    return report_error(
        input_error("ranks",
                    ": validate --attention runs the attention core on one rank (it has no "
                    "communication); expected --ranks 1 and no mpirun"));
  }
  profiler::AttentionValidateOptions a = o.attn;
  a.model = o.model;
  a.costs = o.costs;
  a.dtype = o.dtype;
  a.seed = o.seed;
  a.max_seconds = o.max_seconds;
  a.statistic = o.statistic;
  a.backend = o.backend;
  a.weights = o.attn.scope == "layer" ? o.weights : "";
  auto req = profiler::make_attention_validate_request(a);
  if (!req) return report_error(req.error());
  auto setup = planner::make_cost_setup(req->cluster, o.costs, req->statistic);
  if (!setup) return report_error(setup.error());
  const auto cold = profiler::profiled_cold_bytes(*setup);
  if (!cold) return report_error(cold.error());
  req->cold_bytes = *cold;
  Progress progress("validate", static_cast<int>(req->cases.size()));
  const planner::MachinePace before = profiler::measure_pace_alone(req->backend, req->cold_bytes);
  auto rows = profiler::run_attention_validate(
      *req, [&](int done, int, const std::string& what) { progress.update(done, what); });
  const planner::MachinePace after = profiler::measure_pace_alone(req->backend, req->cold_bytes);
  progress.finish();
  const Status s = profiler::add_attention_predictions(*req, *setup, rows);
  if (!s) return report_error(s.error());
  const auto pace = profiler::check_profile_pace(*setup, before, after);
  if (!pace) return report_error(pace.error());
  return print_attention_rows(o, *req, rows, setup->measured->misses(), *pace);
}

int run_validate_command(const ValidateOptions& o) {
  if (o.attention) return run_validate_attention(o);
  auto world = kernels::JobWorld::open({o.ranks, 1, 64}, command_line_args(), report_and_flush);
  if (!world) return report_error(world.error());
  auto req = profiler::make_validate_request(o, world->size());
  Result<planner::CostSetup> setup = Error{"not loaded"};
  Status ok = req ? Status::Ok() : Status(req.error());
  if (ok && world->is_root()) {
    setup = planner::make_cost_setup(req->cluster(), o.costs, req->statistic, true);
    if (!setup) ok = setup.error();
    if (ok) {
      // run_validate_cases hands rank 0's rotation to the others.
      const auto cold = profiler::profiled_cold_bytes(*setup);
      if (cold) {
        req->cold_bytes = *cold;
      } else {
        ok = cold.error();
      }
    }
  }
  if (!world->agree(ok, report_and_flush)) return kExitBadInput;
  std::unique_ptr<Progress> progress;
  if (world->is_root()) {
    progress = std::make_unique<Progress>("validate", static_cast<int>(req->cases.size()));
  }
  auto run = world->run<profiler::ValidateRun>([&](kernels::Communicator& comm) {
    return profiler::run_validate_paced(comm, *req, progress_of(progress.get()));
  });
  if (progress) progress->finish();
  int rc = kExitOk;
  if (world->is_root()) {
    Status s = profiler::add_predictions(*req, *setup, run.rows, world->size());
    auto pace = profiler::check_profile_pace(*setup, run.pace_before, run.pace_after);
    if (s && !pace) s = pace.error();
    rc = s ? print_rows(o, *req, run.rows, world->size(), world->mode(), setup->measured->misses(),
                        *pace)
           : report_error(s.error());
  }
  return world->agree_exit_code(rc);
}

}  // namespace

void add_validate_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<ValidateOptions>();
  auto* cmd = app.add_subcommand(
      "validate",
      "Run the real sharded layer per layout, dispatcher and token count, and compare its "
      "measured time with the planner's prediction from a cost database and from the roofline");
  cmd->add_option("--model", o->model, "Bundled model name or config.json path")
      ->capture_default_str();
  cmd->add_option("--costs", o->costs, "Cost database written by moeplan profile (required)");
  cmd->add_option("--backend", o->backend,
                  "Backend the layer runs on: cpu, or cuda (one rank on one GPU, its kernels "
                  "timed by CUDA events, as profile --backend cuda times them)")
      ->capture_default_str();
  auto* layouts = cmd->add_option("--layouts", o->layouts, "all, or EPxTP list such as 2x1,1x2")
                      ->capture_default_str();
  auto* dispatcher =
      cmd->add_option("--dispatcher", o->dispatchers,
                      "all, or a list of padded_a2a, allgather, a2av, deepep_normal, deepep_ll")
          ->capture_default_str();
  auto* ranks_per_node =
      cmd->add_option("--ranks-per-node", o->ranks_per_node,
                      "Group the ranks into nodes of N (deepep_normal needs two or more; the "
                      "predictions are for local:MxN; 0: one node)")
          ->capture_default_str();
  auto* tokens =
      cmd->add_option("--tokens", o->tokens,
                      "Comma-separated global token counts (each divisible by the rank count)")
          ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "Storage dtype: fp32, fp16, bf16 (default: the model's)");
  auto* weights = cmd->add_option(
      "--weights", o->weights,
      "Expert weight format, run and predicted alike: the model's own by default; "
      "fp8-block, fp8-channel, fp8-tensor (from profile's fp8 GEMMs), bf16/fp16, w4a16, "
      "mxfp4 or nvfp4 (decoded on load)");
  auto* scale = cmd->add_option("--scale", o->scale,
                                "Divide hidden and expert widths by S (counts and routing kept)")
                    ->capture_default_str();
  cmd->add_option("--ranks", o->ranks,
                  "In-process ranks (threads); default 1, or the mpirun world");
  cmd->add_option("--seed", o->seed, "Seed of the weights and inputs")->capture_default_str();
  cmd->add_option("--max-seconds", o->max_seconds, "Timing budget per case, seconds")
      ->capture_default_str();
  cmd->add_option("--statistic", o->statistic,
                  "Timing statistic compared on both sides: median, or p10 (closer to the "
                  "unloaded time on a shared machine)")
      ->capture_default_str();
  cmd->add_flag("--json", o->json,
                "Print JSON: one object per (layout, dispatcher, tokens), or per attention case");
  cmd->add_flag("--attention", o->attention,
                "Validate the attention core instead of the MoE layer: run it at --contexts "
                "(prefill one prompt each; decode --batches sequences each) with the heads of "
                "each --tp and compare with the planner's prediction");
  cmd->add_option("--contexts", o->attn.contexts,
                  "With --attention: comma-separated context lengths, tokens")
      ->capture_default_str();
  cmd->add_option("--batches", o->attn.batches,
                  "With --attention: comma-separated decode batch sizes, sequences")
      ->capture_default_str();
  cmd->add_option("--tp", o->attn.tp,
                  "With --attention: comma-separated attention TP sizes (the heads per rank)")
      ->capture_default_str();
  cmd->add_option("--phases", o->attn.phases, "With --attention: prefill and/or decode")
      ->capture_default_str();
  cmd->add_option("--scope", o->attn.scope,
                  "With --attention: core (the attention core), block (the whole attention "
                  "block: norms, projections, RoPE, core) or layer (the block and the MoE layer: "
                  "the whole decoder layer); block and layer run tp 1")
      ->capture_default_str();
  const std::vector<CLI::Option*> layer_options = {layouts, dispatcher, ranks_per_node,
                                                   tokens,  weights,    scale};
  cmd->callback([&action, o, layer_options] {
    o->layer_options_given.clear();
    for (const CLI::Option* opt : layer_options) {
      if (opt->count() > 0) o->layer_options_given.push_back(opt->get_name());
    }
    action = [o] { return run_validate_command(*o); };
  });
}

}  // namespace moeplan::cli
