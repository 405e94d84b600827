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
#include "app/cli/cost_options.hpp"
#include "app/cli/progress.hpp"
#include "app/cli/table.hpp"
#include "kernels/fault_inject.hpp"
#include "kernels/mpi_communicator.hpp"
#include "kernels/mpi_info.hpp"
#include "models/registry.hpp"
#include "models/scaled_model.hpp"
#include "models/units.hpp"
#include "planner/cost_model.hpp"
#include "profiler/layer_bench.hpp"

namespace moeplan::cli {

namespace {

struct ValidateOptions {
  std::string model = models::kDefaultModel;
  std::string costs;
  std::string layouts = "all";
  std::string dispatchers = "all";
  std::string tokens = "256,512,1024";
  std::string dtype;
  int scale = 1;
  int ranks = -1;
  std::uint64_t seed = 20241120;
  double max_seconds = 3.0;
  std::string statistic = "median";
  bool json = false;
};

struct Case {
  kernels::Layout layout;
  kernels::Dispatcher dispatcher = kernels::Dispatcher::kA2av;
  int tokens = 0;
};

struct Request {
  models::MoeModel model;   ///< as given
  models::MoeModel scaled;  ///< widths / scale: what runs and what the planner costs
  kernels::LayerSpec spec;
  std::vector<Case> cases;
};

Result<Request> build_request(const ValidateOptions& o, int world) {
  if (o.costs.empty()) return Error{"--costs: expected the cost database written by profile"};
  if (!planner::parse_statistic(o.statistic)) {
    return Error{"--statistic: expected median or p10, got '" + o.statistic + "'"};
  }
  if (!(o.max_seconds > 0.0) || o.max_seconds > 600.0) {
    return Error{"--max-seconds: expected a time per case in (0, 600] s"};
  }
  Request r;
  auto m = models::load_model(o.model);
  if (!m) return m.error();
  r.model = *m;
  DType dtype = m->dtype;
  if (!o.dtype.empty()) {
    const auto dt = parse_dtype(o.dtype);
    if (!dt || *dt == DType::kFp8) {
      return Error{"--dtype: expected fp32, fp16 or bf16, got '" + o.dtype + "'"};
    }
    dtype = *dt;
  }
  auto scaled = models::scale_model(*m, o.scale);
  if (!scaled) return scaled.error();
  r.scaled = *scaled;
  r.scaled.dtype = dtype;
  auto spec = kernels::LayerSpec::from_model(*m, o.scale, dtype, o.seed);
  if (!spec) return spec.error();
  r.spec = *spec;
  std::vector<kernels::Layout> layouts;
  if (o.layouts == "all") {
    layouts = kernels::legal_layouts(r.spec, world);
    if (layouts.empty()) {
      return Error{"--layouts all: no legal layout of " + m->name + " on " + std::to_string(world) +
                   " ranks"};
    }
  } else {
    for (const auto& text : split_list(o.layouts)) {
      auto l = kernels::parse_layout(text);
      if (!l) return Error{"--layouts: " + l.error().message};
      MOEPLAN_TRY_STATUS(kernels::check_layout(r.spec, *l, world));
      layouts.push_back(*l);
    }
  }
  std::vector<kernels::Dispatcher> dispatchers;
  if (o.dispatchers == "all") {
    dispatchers.assign(std::begin(kernels::kAllDispatchers), std::end(kernels::kAllDispatchers));
  } else {
    for (const auto& text : split_list(o.dispatchers)) {
      auto d = kernels::parse_dispatcher(text);
      if (!d) return Error{"--dispatcher: " + d.error().message};
      dispatchers.push_back(*d);
    }
  }
  std::vector<int> tokens;
  for (const auto& t : split_list(o.tokens)) {
    std::size_t used = 0;
    long v = 0;
    try {
      v = std::stol(t, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != t.size() || v < 1 || v > (1L << 20) || v % world != 0) {
      return Error{"--tokens: expected positive token counts divisible by the " +
                   std::to_string(world) + " ranks (tokens per rank = count / ranks), got '" + t +
                   "'"};
    }
    tokens.push_back(static_cast<int>(v));
  }
  if (tokens.empty()) return Error{"--tokens: expected at least one token count"};
  for (const auto& l : layouts) {
    for (const auto d : dispatchers) {
      for (const int t : tokens) r.cases.push_back({l, d, t});
    }
  }
  return r;
}

struct Row {
  Case c;
  double measured_s = 0.0;
  double p10_s = 0.0;
  double p90_s = 0.0;
  int reps = 0;
  bool verified = true;
  std::string verify_detail;
  planner::LayerCost predicted;
  planner::LayerCost roofline;
  kernels::PhaseTimes phases;
};

double error_of(double predicted, double measured) {
  return measured > 0.0 ? (predicted - measured) / measured : 0.0;
}

/// The planner's figure for one case from `costs`, with the layer's real expert load.
Result<planner::LayerCost> predict(const Request& req, const planner::Cluster& cluster,
                                   const planner::CostSource& costs, const Case& c, int world) {
  planner::ExpertLoad load;
  load.source = "routed by the layer's router on its inputs";
  load.num_experts = req.spec.num_experts;
  load.counts = {profiler::routed_counts(req.spec, c.tokens)};
  planner::Layout l;
  l.num_gpus = world;
  l.ep_size = c.layout.ep_size;
  l.tp_size = c.layout.tp_size;
  l.dispatcher = *planner::parse_dispatcher(kernels::dispatcher_name(c.dispatcher));
  l.mapping = planner::RankMapping::kTpInnermost;
  const planner::CostContext ctx{
      req.scaled, cluster, costs, {planner::Phase::kPrefill, c.tokens / world}, load, {}};
  auto lc = planner::cost_layout(ctx, l);
  if (!lc) return lc.error();
  return lc->per_layer;
}

std::string pct(double e) { return format_fixed(100.0 * e, 1) + "%"; }
std::string ms(double s) { return format_fixed(s * 1e3, 2); }

/// "db-exact 5, db-interp 9, ..." over the six items of a layer cost.
std::string source_summary(const planner::LayerCost& c) {
  std::map<std::string, int> n;
  for (const auto* item : {&c.router, &c.dispatch, &c.experts, &c.combine, &c.tp, &c.shared}) {
    std::stringstream ss(item->source);
    for (std::string s; std::getline(ss, s, '+');) ++n[s];
  }
  std::string out;
  for (const auto& [k, v] : n) out += (out.empty() ? "" : " ") + k + ":" + std::to_string(v);
  return out;
}

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

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int print_rows(const ValidateOptions& o, const Request& req, const std::vector<Row>& rows,
               int world, const std::string& mode, const std::vector<std::string>& misses) {
  std::vector<double> err_db, err_roof;
  bool all_verified = true;
  for (const auto& r : rows) {
    err_db.push_back(std::abs(error_of(r.predicted.total(), r.measured_s)));
    err_roof.push_back(std::abs(error_of(r.roofline.total(), r.measured_s)));
    all_verified = all_verified && r.verified;
  }
  const double med_db = median(err_db), med_roof = median(err_roof);
  const double worst_db = err_db.empty() ? 0.0 : *std::max_element(err_db.begin(), err_db.end());
  const double worst_roof =
      err_roof.empty() ? 0.0 : *std::max_element(err_roof.begin(), err_roof.end());
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
      out["rows"].push_back({{"layout", r.c.layout.name()},
                             {"ep_size", r.c.layout.ep_size},
                             {"tp_size", r.c.layout.tp_size},
                             {"dispatcher", kernels::dispatcher_name(r.c.dispatcher)},
                             {"tokens", r.c.tokens},
                             {"measured_ms", r.measured_s * 1e3},
                             {"measured_p10_ms", r.p10_s * 1e3},
                             {"measured_p90_ms", r.p90_s * 1e3},
                             {"repetitions", r.reps},
                             {"predicted_ms", r.predicted.total() * 1e3},
                             {"roofline_ms", r.roofline.total() * 1e3},
                             {"error", error_of(r.predicted.total(), r.measured_s)},
                             {"roofline_error", error_of(r.roofline.total(), r.measured_s)},
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
                             {"verified", r.verified}});
    }
    out["summary"] = {{"median_abs_error", med_db},
                      {"worst_abs_error", worst_db},
                      {"roofline_median_abs_error", med_roof},
                      {"roofline_worst_abs_error", worst_roof}};
    out["cost_source_misses"] = misses;
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
      t.add_row({r.c.layout.name(), kernels::dispatcher_name(r.c.dispatcher),
                 std::to_string(r.c.tokens), ms(r.measured_s), ms(r.p10_s) + ".." + ms(r.p90_s),
                 ms(r.predicted.total()), pct(error_of(r.predicted.total(), r.measured_s)),
                 ms(r.roofline.total()), pct(error_of(r.roofline.total(), r.measured_s)),
                 r.verified ? source_summary(r.predicted) : "VERIFY FAILED: " + r.verify_detail});
    }
    std::fputs(t.render().c_str(), stdout);
    std::printf(
        "cost DB: median |error| %s, worst %s; roofline: median |error| %s, worst %s (%zu "
        "cases)\n",
        pct(med_db).c_str(), pct(worst_db).c_str(), pct(med_roof).c_str(), pct(worst_roof).c_str(),
        rows.size());
    if (!misses.empty()) {
      std::printf("%zu kinds of query missed the cost database and used the roofline:\n",
                  misses.size());
      for (const auto& m : misses) std::printf("  - %s\n", m.c_str());
    }
  }
  return all_verified ? kExitOk : kExitFailed;
}

/// Runs every case collectively; rank 0 gets the rows.
std::vector<Row> run_cases(kernels::Communicator& world, const Request& req,
                           const profiler::HarnessOptions& h, planner::CostStatistic statistic,
                           Progress* progress) {
  std::vector<Row> rows;
  int done = 0;
  for (const auto& c : req.cases) {
    kernels::fault_point(world.rank());
    const auto lm = profiler::measure_layer(world, req.spec, c.layout, c.dispatcher, c.tokens, h);
    Row r;
    r.c = c;
    r.measured_s = statistic == planner::CostStatistic::kP10 ? lm.measurement.stats.p10_s
                                                             : lm.measurement.stats.median_s;
    r.p10_s = lm.measurement.stats.p10_s;
    r.p90_s = lm.measurement.stats.p90_s;
    r.reps = lm.measurement.stats.repetitions;
    r.verified = lm.measurement.disposition == planner::Disposition::kPassed;
    if (!r.verified) r.verify_detail = lm.measurement.detail;
    r.phases = lm.phases;
    rows.push_back(r);
    ++done;
    if (progress != nullptr && world.rank() == 0) {
      // The measurement goes on the progress line, so a job stopped part-way keeps it.
      progress->update(done, c.layout.name() + " " + kernels::dispatcher_name(c.dispatcher) + " " +
                                 std::to_string(c.tokens) + ": measured " + ms(r.measured_s) +
                                 " ms" + (r.verified ? "" : " (failed verification)"));
    }
  }
  return rows;
}

/// Predictions for every row (rank 0, after the measurements).
Status add_predictions(const Request& req, const CostSetup& setup, std::vector<Row>& rows,
                       int world) {
  for (auto& r : rows) {
    auto p = predict(req, *setup.cluster, setup.costs(), r.c, world);
    if (!p) return p.error();
    r.predicted = *p;
    auto q = predict(req, *setup.cluster, *setup.roofline, r.c, world);
    if (!q) return q.error();
    r.roofline = *q;
  }
  return Status::Ok();
}

int run_validate_command(const ValidateOptions& o) {
  profiler::HarnessOptions h;
  h.warmup = 1;
  h.min_reps = 5;
  h.max_reps = 50;
  h.max_seconds = o.max_seconds;
  h.min_sample_s = 0.0;
  const int launched = kernels::launcher_world_size();
  if (launched > 1) {
    auto launcher = launcher_world(launched, o.ranks);
    if (!launcher) return report_error(launcher.error());
    std::unique_ptr<kernels::Communicator> world = std::move(*launcher);
    const bool root = world->rank() == 0;
    auto req = build_request(o, world->size());
    Result<CostSetup> setup = Error{"not loaded"};
    Status ok = req ? Status::Ok() : Status(req.error());
    if (ok && root) {
      setup = make_cost_setup("local:" + std::to_string(world->size()), o.costs,
                              *planner::parse_statistic(o.statistic));
      if (!setup) ok = setup.error();
    }
    std::vector<std::int64_t> bad{ok ? 0 : 1};
    world->all_reduce_max(bad);
    if (bad[0] != 0) return root ? report_error(ok.error()) : kExitBadInput;
    std::unique_ptr<Progress> progress;
    if (root)
      progress = std::make_unique<Progress>("validate", static_cast<int>(req->cases.size()));
    auto rows = run_cases(*world, *req, h, *planner::parse_statistic(o.statistic), progress.get());
    if (progress) progress->finish();
    int rc = kExitOk;
    if (root) {
      const Status s = add_predictions(*req, *setup, rows, world->size());
      rc = s ? print_rows(o, *req, rows, world->size(), "mpi", setup->measured->misses())
             : report_error(s.error());
    }
    return agree_exit_code(*world, rc);
  }
  const int ranks = o.ranks == -1 ? 1 : o.ranks;
  if (ranks < 1 || ranks > 64) {
    return report_error(
        Error{"--ranks: expected 1 to 64 in-process ranks, got " + std::to_string(ranks)});
  }
  auto req = build_request(o, ranks);
  if (!req) return report_error(req.error());
  auto setup = make_cost_setup("local:" + std::to_string(ranks), o.costs,
                               *planner::parse_statistic(o.statistic));
  if (!setup) return report_error(setup.error());
  Progress progress("validate", static_cast<int>(req->cases.size()));
  std::vector<Row> rows;
  kernels::run_in_process(ranks, [&](kernels::Communicator& world) {
    auto r = run_cases(world, *req, h, *planner::parse_statistic(o.statistic), &progress);
    if (world.rank() == 0) rows = std::move(r);
  });
  progress.finish();
  if (const Status s = add_predictions(*req, *setup, rows, ranks); !s) {
    return report_error(s.error());
  }
  return print_rows(o, *req, rows, ranks, "in-process threads", setup->measured->misses());
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
  cmd->add_option("--layouts", o->layouts, "all, or EPxTP list such as 2x1,1x2")
      ->capture_default_str();
  cmd->add_option("--dispatcher", o->dispatchers, "all, or a list of padded_a2a, allgather, a2av")
      ->capture_default_str();
  cmd->add_option("--tokens", o->tokens,
                  "Comma-separated global token counts (each divisible by the rank count)")
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "Storage dtype: fp32, fp16, bf16 (default: the model's)");
  cmd->add_option("--scale", o->scale,
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
  cmd->add_flag("--json", o->json, "Print JSON: one object per (layout, dispatcher, tokens)");
  cmd->callback([&action, o] { action = [o] { return run_validate_command(*o); }; });
}

}  // namespace moeplan::cli
