// validate --attention: cases, measurements and predictions of the attention core.
#include "profiler/validate_attention.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "kernels/case_lists.hpp"
#include "models/registry.hpp"
#include "planner/costs/cost_model.hpp"
#include "profiler/ops.hpp"
#include "profiler/sweep.hpp"
#include "profiler/validate.hpp"

namespace moeplan::profiler {

namespace {

/// A comma-separated list of integers in [1, max]; errors name `input` and say what `what` is.
Result<std::vector<int>> parse_ints(const std::string& text, const std::string& input, long max,
                                    const std::string& what) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    std::size_t used = 0;
    long v = 0;
    try {
      v = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < 1 || v > max) {
      return input_error(input, ": expected " + what + " from 1 to " + std::to_string(max) +
                                    ", got '" + item + "'");
    }
    if (std::find(out.begin(), out.end(), static_cast<int>(v)) == out.end()) {
      out.push_back(static_cast<int>(v));
    }
  }
  if (out.empty()) return input_error(input, ": expected at least one " + what);
  return out;
}

std::string case_text(const AttentionValidateCase& c) {
  return std::string(c.decode ? "decode" : "prefill") + " tp" + std::to_string(c.tp) + " " +
         std::to_string(c.tokens) + (c.decode ? " seqs" : " tokens") + " context " +
         std::to_string(c.context);
}

/// The largest prompt or batch·context a case may have: the CPU's score tile is bounded, but
/// K and V of a case are held whole.
constexpr long kMaxAttentionKeys = 1L << 22;

}  // namespace

Result<AttentionValidateRequest> make_attention_validate_request(
    const AttentionValidateOptions& o) {
  const auto statistic = check_validate_basics(o.costs, o.statistic, o.max_seconds, o.backend);
  if (!statistic) return statistic.error();
  AttentionValidateRequest r;
  r.statistic = *statistic;
  r.harness = validate_harness(o.max_seconds);
  auto m = models::load_model(o.model);
  if (!m) return m.error();
  r.model = *m;
  r.dtype = m->dtype;
  if (!o.dtype.empty()) {
    auto dt = kernels::parse_storage_dtype_list(o.dtype);
    if (!dt) return dt.error();
    if (dt->size() != 1) return input_error("dtype", ": expected one dtype, got '" + o.dtype + "'");
    r.dtype = dt->front();
  }
  r.model.dtype = r.dtype;
  if (m->attention.num_heads < 1) {
    return Error{m->source_path +
                     ": {num_attention_heads} not given; expected the model's "
                     "attention heads to validate its attention",
                 "model"};
  }
  std::vector<bool> phases;
  {
    std::stringstream ss(o.phases);
    std::string p;
    while (std::getline(ss, p, ',')) {
      if (p == "prefill" || p == "decode") {
        if (std::find(phases.begin(), phases.end(), p == "decode") == phases.end()) {
          phases.push_back(p == "decode");
        }
      } else {
        return input_error("phases", ": expected prefill and/or decode, got '" + p + "'");
      }
    }
    if (phases.empty()) return input_error("phases", ": expected prefill and/or decode");
  }
  const long max_context =
      m->max_context > 0 ? std::min<long>(m->max_context, kMaxAttentionKeys) : kMaxAttentionKeys;
  auto contexts = parse_ints(o.contexts, "contexts", max_context,
                             m->max_context > 0
                                 ? "contexts (" + m->name + "'s max_position_embeddings caps them)"
                                 : "contexts");
  if (!contexts) return contexts.error();
  auto batches = parse_ints(o.batches, "batches", 4096, "decode batch sizes");
  if (!batches) return batches.error();
  auto tps = parse_ints(o.tp, "tp", m->attention.num_heads, "attention TP sizes");
  if (!tps) return tps.error();
  for (const int tp : *tps) {
    for (const bool decode : phases) {
      const auto shape = attention_sweep_shape(r.model, tp, decode);
      if (!shape) {
        return input_error("tp", " " + std::to_string(tp) + ": " + m->name + "'s " +
                                     std::to_string(m->attention.num_heads) +
                                     " heads do not split into whole K/V groups on " +
                                     std::to_string(tp) + " ranks; expected a divisor");
      }
      for (const int ctx : *contexts) {
        if (decode) {
          for (const int b : *batches) {
            if (static_cast<long>(b) * ctx > kMaxAttentionKeys) {
              return input_error("batches", ": " + std::to_string(b) + " sequences of " +
                                                std::to_string(ctx) + " tokens exceed " +
                                                std::to_string(kMaxAttentionKeys) +
                                                " cached tokens per case");
            }
            r.cases.push_back({tp, true, b, ctx, *shape});
          }
        } else {
          r.cases.push_back({tp, false, ctx, ctx, *shape});
        }
      }
    }
  }
  if (o.backend != "cpu") {
    auto backend = kernels::make_backend(o.backend);
    if (!backend) return backend.error();
    r.backend = std::move(*backend);
  }
  return r;
}

std::vector<AttentionValidateRow> run_attention_validate(
    const AttentionValidateRequest& req,
    const std::function<void(int, int, const std::string&)>& progress,
    const std::function<bool()>& stop) {
  std::vector<AttentionValidateRow> rows;
  std::shared_ptr<kernels::Backend> backend = req.backend;
  if (!backend) backend = kernels::make_cpu_backend();
  HarnessOptions harness = req.harness;
  if (backend->device_seconds()) harness.device_clock = backend.get();
  const OpTable table = attention_op();
  int done = 0;
  for (const auto& c : req.cases) {
    if (stop && stop()) break;
    SweepSpec spec;
    spec.attention = {c.shape};
    OpPoint p;
    p.op = table.name;
    p.dtype = req.dtype;
    p.shape = attention_point_shape(c.shape, c.tokens, c.context);
    AttentionValidateRow row;
    row.c = c;
    auto op = table.init(p, spec, nullptr, *backend);
    if (!op) {
      row.verified = false;
      row.verify_detail = op.error().message;
    } else {
      const Measurement m = measure(**op, nullptr, harness);
      row.verified = m.disposition == planner::Disposition::kPassed;
      row.verify_detail = m.detail;
      row.measured_s =
          req.statistic == planner::CostStatistic::kP10 ? m.stats.p10_s : m.stats.median_s;
      row.p10_s = m.stats.p10_s;
      row.p90_s = m.stats.p90_s;
      row.reps = m.stats.repetitions;
    }
    rows.push_back(std::move(row));
    if (progress) progress(++done, static_cast<int>(req.cases.size()), case_text(c));
  }
  return rows;
}

Status add_attention_predictions(const AttentionValidateRequest& req,
                                 const planner::CostSetup& setup,
                                 std::vector<AttentionValidateRow>& rows) {
  for (auto& r : rows) {
    const planner::AttentionQuery q =
        planner::attention_core_query(req.model, r.c.tp, r.c.decode, r.c.tokens, r.c.context);
    auto p = setup.costs().attention(q);
    if (!p) return p.error();
    auto f = setup.roofline->attention(q);
    if (!f) return f.error();
    r.predicted = *p;
    r.roofline = *f;
  }
  return Status::Ok();
}

ValidateSummary summarize(const std::vector<AttentionValidateRow>& rows) {
  std::vector<double> db, roof;
  bool all_verified = true;
  for (const auto& r : rows) {
    if (!r.verified) {
      all_verified = false;
      continue;
    }
    db.push_back(std::abs(relative_error(r.predicted.seconds, r.measured_s)));
    roof.push_back(std::abs(relative_error(r.roofline.seconds, r.measured_s)));
  }
  return summarize_errors(db, roof, all_verified);
}

}  // namespace moeplan::profiler
