// validate's cases, measurements and predictions.
#include "profiler/validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "kernels/fault_inject.hpp"
#include "models/registry.hpp"
#include "models/scaled_model.hpp"
#include "models/units.hpp"
#include "profiler/layer_bench.hpp"

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

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

Result<ValidateRequest> make_validate_request(const ValidateOptions& o, int world) {
  if (o.costs.empty()) return Error{"--costs: expected the cost database written by profile"};
  const auto statistic = planner::parse_statistic(o.statistic);
  if (!statistic) {
    return Error{"--statistic: expected median or p10, got '" + o.statistic + "'"};
  }
  if (!(o.max_seconds > 0.0) || o.max_seconds > 600.0) {
    return Error{"--max-seconds: expected a time per case in (0, 600] s"};
  }
  ValidateRequest r;
  r.statistic = *statistic;
  r.harness.warmup = 1;
  r.harness.min_reps = 5;
  r.harness.max_reps = 50;
  r.harness.max_seconds = o.max_seconds;
  r.harness.min_sample_s = 0.0;
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

std::vector<ValidateRow> run_validate_cases(
    kernels::Communicator& world, const ValidateRequest& req,
    const std::function<void(int, int, const std::string&)>& progress,
    const std::function<bool()>& stop) {
  std::vector<ValidateRow> rows;
  int done = 0;
  const int total = static_cast<int>(req.cases.size());
  for (const auto& c : req.cases) {
    if (stop && any_rank(world, stop())) break;
    kernels::fault_point(world.rank());
    const auto lm = measure_layer(world, req.spec, c.layout, c.dispatcher, c.tokens, req.harness);
    ValidateRow r;
    r.c = c;
    r.measured_s = req.statistic == planner::CostStatistic::kP10 ? lm.measurement.stats.p10_s
                                                                 : lm.measurement.stats.median_s;
    r.p10_s = lm.measurement.stats.p10_s;
    r.p90_s = lm.measurement.stats.p90_s;
    r.reps = lm.measurement.stats.repetitions;
    r.verified = lm.measurement.disposition == planner::Disposition::kPassed;
    if (!r.verified) r.verify_detail = lm.measurement.detail;
    r.phases = lm.phases;
    rows.push_back(r);
    ++done;
    if (progress && world.rank() == 0) {
      // The measurement goes on the progress line, so a job stopped part-way keeps it.
      char measured[64];
      std::snprintf(measured, sizeof measured, ": measured %.2f ms", r.measured_s * 1e3);
      progress(done, total,
               c.layout.name() + " " + kernels::dispatcher_name(c.dispatcher) + " " +
                   std::to_string(c.tokens) + measured +
                   (r.verified ? "" : " (failed verification)"));
    }
  }
  return rows;
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

double relative_error(double predicted, double measured) {
  return measured > 0.0 ? (predicted - measured) / measured : 0.0;
}

ValidateSummary summarize(const std::vector<ValidateRow>& rows) {
  std::vector<double> err_db, err_roof;
  ValidateSummary s;
  for (const auto& r : rows) {
    err_db.push_back(std::abs(relative_error(r.predicted.total(), r.measured_s)));
    err_roof.push_back(std::abs(relative_error(r.roofline.total(), r.measured_s)));
    s.all_verified = s.all_verified && r.verified;
  }
  s.median_abs_error = median(err_db);
  s.roofline_median_abs_error = median(err_roof);
  s.worst_abs_error = err_db.empty() ? 0.0 : *std::max_element(err_db.begin(), err_db.end());
  s.roofline_worst_abs_error =
      err_roof.empty() ? 0.0 : *std::max_element(err_roof.begin(), err_roof.end());
  return s;
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
