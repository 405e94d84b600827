// validate's cases, measurements and predictions.
#include "profiler/validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <utility>

#include "kernels/case_lists.hpp"
#include "kernels/fault_inject.hpp"
#include "models/registry.hpp"
#include "models/scaled_model.hpp"
#include "models/units.hpp"
#include "profiler/layer_bench.hpp"
#include "profiler/pace.hpp"

namespace moeplan::profiler {

namespace {

/// The planner's figure for one case from `costs`, with the layer's real expert load.
Result<planner::LayerCost> predict(const ValidateRequest& req, const planner::Cluster& cluster,
                                   const planner::CostSource& costs, const ValidateCase& c,
                                   int world) {
  planner::ExpertLoad load;
  load.source = "routed by the layer's router on its inputs";
  load.num_experts = req.spec.num_experts;
  load.counts = {routed_counts(req.spec, c.tokens)};
  load.realized = true;  // the measured run's own routing of these tokens
  planner::Layout l = c.layout;
  l.num_gpus = world;
  planner::Workload workload{planner::Phase::kPrefill, c.tokens / world};
  // deepep_ll's buffer as the layer sizes it: the largest EP rank's tokens.
  workload.ll_max_tokens_per_rank = (c.tokens + l.ep_size - 1) / l.ep_size;
  planner::CostContext ctx{req.scaled, cluster, costs, workload, load, {}};
  ctx.whole_model = false;  // the measured layer is the MoE layer alone
  auto lc = planner::cost_layout(ctx, l);
  if (!lc) return lc.error();
  return lc->per_layer;
}

}  // namespace

Result<planner::CostStatistic> check_validate_basics(const std::string& costs,
                                                     const std::string& statistic,
                                                     double max_seconds, const std::string& backend,
                                                     bool need_costs) {
  if (need_costs && costs.empty()) {
    return input_error("costs", ": expected the cost database written by profile");
  }
  const auto parsed = planner::parse_statistic(statistic);
  if (!parsed) {
    return input_error("statistic", ": expected median or p10, got '" + statistic + "'");
  }
  if (!(max_seconds > 0.0) || max_seconds > 600.0) {
    return input_error("max_seconds", ": expected a time per case in (0, 600] s");
  }
  if (backend != "cpu" && backend != "cuda") {
    return input_error("backend", " " + backend + ": expected cpu or cuda");
  }
  return *parsed;
}

HarnessOptions validate_harness(double max_seconds) {
  HarnessOptions h;
  h.warmup = 1;
  h.min_reps = 5;
  h.max_reps = 50;
  h.max_seconds = max_seconds;
  h.min_sample_s = 0.0;
  return h;
}

Result<ValidateRequest> make_validate_request(const ValidateOptions& o, int world) {
  const auto statistic = check_validate_basics(o.costs, o.statistic, o.max_seconds, o.backend);
  if (!statistic) return statistic.error();
  if (o.backend == "cuda" && world > 1) {
    return input_error("backend",
                       " cuda on " + std::to_string(world) +
                           " ranks: the layer's collectives through NCCL are not built into "
                           "validate yet; expected one rank (one GPU) or {backend} cpu");
  }
  ValidateRequest r;
  r.statistic = *statistic;
  r.harness = validate_harness(o.max_seconds);
  auto m = models::load_model(o.model);
  if (!m) return m.error();
  MOEPLAN_TRY_STATUS(models::apply_weights_choice(*m, o.weights));
  m->weights = kernels::kernel_run_format(m->weights);
  r.model = *m;
  DType dtype = m->dtype;
  if (!o.dtype.empty()) {
    auto dt = kernels::parse_storage_dtype_list(o.dtype);
    if (!dt) return dt.error();
    if (dt->size() != 1) return input_error("dtype", ": expected one dtype, got '" + o.dtype + "'");
    dtype = dt->front();
  }
  auto scaled = models::scale_model(*m, o.scale);
  if (!scaled) return scaled.error();
  r.scaled = *scaled;
  r.scaled.dtype = dtype;
  auto spec = kernels::LayerSpec::from_model(*m, o.scale, dtype, o.seed);
  if (!spec) return spec.error();
  // The layer runs the format (fp8 blocks: the backend's gemm_fp8, which profile measures as
  // fp8 GEMM points; 4-bit: decoded on load) and the planner prices the same one.
  MOEPLAN_TRY_STATUS(kernels::apply_weight_format(*spec, m->weights));
  r.spec = *spec;
  // Validate runs the mapping the planner's plans use for each ep × tp (tp_innermost) unless a
  // list names layouts; the prediction uses each case's own mapping.
  auto layouts = kernels::parse_layout_list(o.layouts, r.spec, world, false, m->name);
  if (!layouts) return layouts.error();
  auto dispatchers = kernels::parse_dispatcher_list(o.dispatchers);
  if (!dispatchers) return dispatchers.error();
  auto tokens = kernels::parse_token_list(o.tokens, kMaxValidateTokens, world);
  if (!tokens) return tokens.error();
  if (o.ranks_per_node < 0 || (o.ranks_per_node > 0 && world % o.ranks_per_node != 0)) {
    return input_error("ranks-per-node", ": expected a divisor of the " + std::to_string(world) +
                                             " ranks, got " + std::to_string(o.ranks_per_node));
  }
  r.world = world;
  r.dispatch.ranks_per_node = o.ranks_per_node;
  // Cases the kernels can run, layout by layout; "all" leaves out the others and says why, a
  // dispatcher named explicitly must run on some layout.
  std::map<kernels::Dispatcher, std::string> why_not;
  std::map<kernels::Dispatcher, int> ran;
  for (const auto& l : *layouts) {
    // fp8 blocks and 4-bit groups must not straddle two TP slices (weight_slice_violation).
    if (auto v = kernels::weight_slice_violation(r.spec, l.tp_size)) {
      const std::string note = "every dispatcher on " + l.short_name() + ": " + *v;
      if (std::find(r.skipped.begin(), r.skipped.end(), note) == r.skipped.end()) {
        r.skipped.push_back(note);
      }
      for (const auto d : *dispatchers) why_not.emplace(d, *v);
      continue;
    }
    for (const auto d : *dispatchers) {
      kernels::Layout with_dispatcher = l;
      with_dispatcher.dispatcher = d;
      if (auto v =
              kernels::kernel_dispatch_violation(with_dispatcher, tokens->front(), r.dispatch)) {
        const std::string note = kernels::dispatcher_name(d) + " on " + l.short_name() + ": " + *v;
        if (std::find(r.skipped.begin(), r.skipped.end(), note) == r.skipped.end()) {
          r.skipped.push_back(note);
        }
        why_not.emplace(d, *v);
        continue;
      }
      ++ran[d];
      for (const int t : *tokens) r.cases.push_back({with_dispatcher, t});
    }
  }
  if (o.dispatchers != "all") {
    for (const auto d : *dispatchers) {
      if (ran[d] == 0) return input_error("dispatcher", ": " + why_not[d]);
    }
  }
  if (r.cases.empty()) {
    return input_error("dispatcher", ": no layout of the request runs any of its dispatchers");
  }
  if (o.backend != "cpu") {
    // A device backend (one rank), made here so that an unusable one is an input error; CPU
    // ranks make their own per case (measure_layer).
    auto backend = kernels::make_backend(o.backend);
    if (!backend) return backend.error();
    r.backend = std::move(*backend);
  }
  return r;
}

std::string ValidateRequest::cluster() const {
  if (dispatch.ranks_per_node > 0) {
    return "local:" + std::to_string(world / dispatch.ranks_per_node) + "x" +
           std::to_string(dispatch.ranks_per_node);
  }
  return "local:" + std::to_string(world);
}

namespace {

/// Rank 0 read the profile's rotation with the cost database; under a launcher the other ranks
/// hold the default until told.
std::size_t agreed_cold_bytes(kernels::Communicator& world, const ValidateRequest& req) {
  std::int64_t cold[1] = {world.rank() == 0 ? static_cast<std::int64_t>(req.cold_bytes) : 0};
  world.all_reduce_max(cold);
  return static_cast<std::size_t>(cold[0]);
}

}  // namespace

std::vector<ValidateRow> run_validate_cases(
    kernels::Communicator& world, const ValidateRequest& req,
    const std::function<void(int, int, const std::string&)>& progress,
    const std::function<bool()>& stop) {
  std::vector<ValidateRow> rows;
  int done = 0;
  const int total = static_cast<int>(req.cases.size());
  const std::size_t cold_bytes = agreed_cold_bytes(world, req);
  const auto measure_case = [&](const ValidateCase& c) {
    kernels::fault_point(world.rank());
    const auto lm = measure_layer(world, req.spec, c.layout, c.tokens, req.harness, false,
                                  req.dispatch, req.backend.get(), cold_bytes);
    ValidateRow r;
    r.c = c;
    r.measured_s = req.statistic == planner::CostStatistic::kP10 ? lm.measurement.stats.p10_s
                                                                 : lm.measurement.stats.median_s;
    r.p10_s = lm.measurement.stats.p10_s;
    r.p90_s = lm.measurement.stats.p90_s;
    r.reps = lm.measurement.stats.repetitions;
    r.verified = lm.measurement.disposition == planner::Disposition::kPassed;
    if (!r.verified) r.verify_detail = lm.measurement.detail;
    r.stand_in = lm.stand_in;
    r.copies = lm.copies;
    r.phases = lm.phases;
    return r;
  };
  for (const auto& c : req.cases) {
    if (stop && any_rank(world, stop())) break;
    const ValidateRow r = measure_case(c);
    rows.push_back(r);
    ++done;
    if (progress && world.rank() == 0) {
      // The measurement goes on the progress line, so a job stopped part-way keeps it.
      char measured[64];
      std::snprintf(measured, sizeof measured, ": measured %.2f ms", r.measured_s * 1e3);
      progress(done, total,
               c.layout.short_name() + " " + kernels::dispatcher_name(c.layout.dispatcher) + " " +
                   std::to_string(c.tokens) + measured +
                   (r.verified ? "" : " (failed verification)") +
                   (r.stand_in.empty() ? "" : " (a stand-in ran: not the kernels' time)"));
    }
  }
  // The cases that had not settled, once more now that the others have run (every rank has the
  // same samples, so the same cases; the decision is still agreed).
  if (rows.size() == req.cases.size()) {
    for (auto& row : rows) {
      if (!any_rank(world, unsettled(row, req.harness.target_spread))) continue;
      if (stop && any_rank(world, stop())) break;
      keep_steadier(row, measure_case(row.c));
      if (progress && world.rank() == 0) {
        progress(done, total,
                 "measured again (had not settled): " + row.c.layout.short_name() + " " +
                     kernels::dispatcher_name(row.c.layout.dispatcher) + " " +
                     std::to_string(row.c.tokens) +
                     (row.second_look.replaced ? " (second kept)" : " (first kept)"));
      }
    }
  }
  return rows;
}

ValidateRun run_validate_paced(kernels::Communicator& world, const ValidateRequest& req,
                               const std::function<void(int, int, const std::string&)>& progress,
                               const std::function<bool()>& stop) {
  const std::shared_ptr<kernels::Backend> backend =
      req.backend ? req.backend : std::shared_ptr<kernels::Backend>(kernels::make_cpu_backend());
  ValidateRun run;
  // The probe reads its weights through the profile's rotation, as the profile's probe did.
  const std::size_t cold_bytes = agreed_cold_bytes(world, req);
  run.pace_before = measure_pace(world, *backend, cold_bytes);
  run.rows = run_validate_cases(world, req, progress, stop);
  // Every rank ran as many cases (stopping is agreed), so every rank agrees on this.
  if (run.rows.size() == req.cases.size()) {
    run.pace_after = measure_pace(world, *backend, cold_bytes);
  }
  return run;
}

Status add_predictions(const ValidateRequest& req, const planner::CostSetup& setup,
                       std::vector<ValidateRow>& rows, int world) {
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

double case_spread(const MeasuredCase& r) {
  return r.measured_s > 0.0 ? (r.p90_s - r.p10_s) / r.measured_s : 0.0;
}

bool unsettled(const MeasuredCase& r, double target) {
  return r.verified && r.stand_in.empty() && case_spread(r) > target;
}

double relative_error(double predicted, double measured) {
  return measured > 0.0 ? (predicted - measured) / measured : 0.0;
}

ValidateSummary summarize_errors(const std::vector<double>& db, const std::vector<double>& roof,
                                 bool all_verified, int stand_in_cases) {
  const auto worst = [](const std::vector<double>& v) {
    return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
  };
  ValidateSummary s;
  s.median_abs_error = profiler::summarize(db).median_s;
  s.roofline_median_abs_error = profiler::summarize(roof).median_s;
  s.worst_abs_error = worst(db);
  s.roofline_worst_abs_error = worst(roof);
  s.all_verified = all_verified;
  s.compared = static_cast<int>(db.size());
  s.stand_in_cases = stand_in_cases;
  return s;
}

ValidateSummary summarize(const std::vector<ValidateRow>& rows) {
  return summarize_rows(rows, [](const ValidateRow& r) {
    return std::pair{r.predicted.total(), r.roofline.total()};
  });
}

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

}  // namespace moeplan::profiler
