// validate --attention: cases, measurements and predictions of the attention core.
#include "profiler/validate_attention.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <utility>

#include "kernels/case_lists.hpp"
#include "kernels/communicator.hpp"
#include "models/registry.hpp"
#include "planner/costs/cost_model.hpp"
#include "planner/topology/local_cluster.hpp"
#include "profiler/decoder_block.hpp"
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

/// Counts of each source in '+'-joined source lists, "db:3 roofline:1".
std::string count_sources(const std::vector<const std::string*>& lists) {
  std::map<std::string, int> n;
  for (const std::string* l : lists) {
    std::stringstream ss(*l);
    for (std::string s; std::getline(ss, s, '+');) {
      if (!s.empty()) ++n[s];
    }
  }
  std::string out;
  for (const auto& [k, v] : n) out += (out.empty() ? "" : " ") + k + ":" + std::to_string(v);
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

std::string scope_name(AttentionScope s) {
  switch (s) {
    case AttentionScope::kCore: return "core";
    case AttentionScope::kBlock: return "block";
    case AttentionScope::kLayer: return "layer";
  }
  return "?";
}

Result<AttentionValidateRequest> make_attention_validate_request(
    const AttentionValidateOptions& o) {
  const auto statistic =
      check_validate_basics(o.costs, o.statistic, o.max_seconds, o.backend, o.need_costs);
  if (!statistic) return statistic.error();
  AttentionValidateRequest r;
  if (o.scope == "core") {
    r.scope = AttentionScope::kCore;
  } else if (o.scope == "block") {
    r.scope = AttentionScope::kBlock;
  } else if (o.scope == "layer") {
    r.scope = AttentionScope::kLayer;
  } else {
    return input_error("scope", ": expected core, block or layer, got '" + o.scope + "'");
  }
  if (!o.weights.empty() && r.scope != AttentionScope::kLayer) {
    return input_error("weights", ": the MoE layer's weight format applies to --scope layer only");
  }
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
  if (r.scope != AttentionScope::kCore) {
    if (const std::string p = decoder_block_problem(*m); !p.empty()) {
      return input_error("scope", " " + scope_name(r.scope) + ": " + p);
    }
    if (o.tp != "1") {
      return input_error("tp", " " + o.tp + ": --scope " + scope_name(r.scope) +
                                   " runs one rank of attention TP 1 (the block's TP all-reduce "
                                   "needs the ranks); expected 1, or --scope core for other tp");
    }
  }
  if (r.scope == AttentionScope::kLayer) {
    MOEPLAN_TRY_STATUS(models::apply_weights_choice(r.model, o.weights));
    r.model.weights = kernels::kernel_run_format(r.model.weights);
    auto spec = kernels::LayerSpec::from_model(r.model, 1, r.dtype, o.seed);
    if (!spec) return spec.error();
    MOEPLAN_TRY_STATUS(kernels::apply_weight_format(*spec, r.model.weights));
    // Every expert's weights are held as fp32 on the one rank: refuse what the host cannot hold.
    const double bytes =
        4.0 * 3.0 * static_cast<double>(spec->num_experts) * spec->hidden * spec->intermediate +
        4.0 * 3.0 * static_cast<double>(spec->hidden) * spec->shared_intermediate;
    const double memory = planner::host_memory_bytes();
    if (memory > 0.0 && bytes > 0.5 * memory) {
      return input_error("scope", " layer: " + m->name + "'s MoE layer holds " +
                                      std::to_string(std::lround(bytes / 1e9)) +
                                      " GB of fp32 expert weights on one rank, over half of this "
                                      "host's memory; expected --scope block, or a smaller model");
    }
    r.moe = std::move(*spec);
  }
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
  const auto measure_case = [&](const AttentionValidateCase& c) {
    if (req.scope != AttentionScope::kCore) {
      AttentionValidateRow row;
      row.c = c;
      const DecoderCaseShape shape{c.decode, c.tokens, c.context};
      auto measure_on = [&](kernels::Communicator* world) {
        // Its weights and KV cache out of the caches at every run, as in a step of a model
        // of many layers (and as the profile's points measured them): a CPU whose last-level
        // cache holds the block (260 MiB on an Intel Xeon) ran one copy warm, 8–31% faster.
        auto dc = make_cold_decoder_case(req.model, req.dtype, shape, req.moe ? &*req.moe : nullptr,
                                         world, *backend, req.cold_bytes);
        if (!dc) {
          row.verified = false;
          row.verify_detail = dc.error().message;
          return;
        }
        const StandInWatch watch(*backend);
        const Measurement m = measure(**dc, nullptr, harness);
        row.stand_in = watch.reason();
        row.verified = m.disposition == planner::Disposition::kPassed;
        row.verify_detail = m.detail;
        row.measured_s =
            req.statistic == planner::CostStatistic::kP10 ? m.stats.p10_s : m.stats.median_s;
        row.p10_s = m.stats.p10_s;
        row.p90_s = m.stats.p90_s;
        row.reps = m.stats.repetitions;
        if (row.verified) row.routed = (*dc)->routed_counts();
        row.copies = static_cast<int>((*dc)->copies());
      };
      if (req.scope == AttentionScope::kLayer) {
        kernels::run_in_process(1, [&](kernels::Communicator& world) { measure_on(&world); });
      } else {
        measure_on(nullptr);
      }
      return row;
    }
    SweepSpec spec;
    spec.attention = {c.shape};
    spec.cold_bytes = req.cold_bytes;
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
      const StandInWatch watch(*backend);
      const Measurement m = measure(**op, nullptr, harness);
      row.stand_in = watch.reason();
      row.verified = m.disposition == planner::Disposition::kPassed;
      row.verify_detail = m.detail;
      row.measured_s =
          req.statistic == planner::CostStatistic::kP10 ? m.stats.p10_s : m.stats.median_s;
      row.p10_s = m.stats.p10_s;
      row.p90_s = m.stats.p90_s;
      row.reps = m.stats.repetitions;
    }
    return row;
  };
  const auto what = [&](const AttentionValidateCase& c) {
    return req.scope == AttentionScope::kCore ? case_text(c)
                                              : scope_name(req.scope) + " " + case_text(c);
  };
  for (const auto& c : req.cases) {
    if (stop && stop()) break;
    rows.push_back(measure_case(c));
    if (progress) progress(++done, static_cast<int>(req.cases.size()), what(c));
  }
  // The cases that had not settled, once more now that the others have run.
  if (rows.size() == req.cases.size()) {
    for (auto& row : rows) {
      if (!unsettled(row, harness.target_spread)) continue;
      if (stop && stop()) break;
      keep_steadier(row, measure_case(row.c));
      if (progress) {
        progress(done, static_cast<int>(req.cases.size()),
                 "measured again (had not settled): " + what(row.c) +
                     (row.second_look.replaced ? " (second kept)" : " (first kept)"));
      }
    }
  }
  return rows;
}

namespace {

/// The planner's attention block (block) or decoder layer (layer: the block and the MoE layer
/// with the load the measured layer routed) of one case from `costs`: cost_layout of 1×1 on the
/// request's one-rank cluster, a workload of the case's tokens and context.
Result<planner::CostEstimate> predict_block(const AttentionValidateRequest& req,
                                            const planner::Cluster& cluster,
                                            const planner::CostSource& costs,
                                            const AttentionValidateRow& r) {
  planner::Workload w;
  w.phase = r.c.decode ? planner::Phase::kDecode : planner::Phase::kPrefill;
  w.tokens_per_gpu = r.c.tokens;
  w.isl = r.c.context;  // decode: the context every sequence's new token sees (osl 0)
  w.osl = 0;
  planner::ExpertLoad load = planner::ExpertLoad::uniform(1, req.model.num_experts);
  if (req.scope == AttentionScope::kLayer) {
    load.source = "routed by the layer's router on the attention block's output";
    load.counts = {r.routed};
    load.realized = true;  // the measured run's own routing of these tokens
  }
  planner::CostContext ctx{req.model, cluster, costs, w, load, {}};
  auto lc = planner::cost_layout(ctx, planner::Layout::of(1, 1));
  if (!lc) return lc.error();
  planner::CostEstimate e;
  e.seconds = lc->dense.attention.seconds;
  std::vector<const std::string*> sources = {&lc->dense.attention.source};
  if (req.scope == AttentionScope::kLayer) {
    e.seconds += lc->per_layer.total();
    for (const auto* item : {&lc->per_layer.router, &lc->per_layer.dispatch, &lc->per_layer.experts,
                             &lc->per_layer.combine, &lc->per_layer.tp, &lc->per_layer.shared}) {
      sources.push_back(&item->source);
    }
  }
  e.source = count_sources(sources);
  return e;
}

}  // namespace

Status add_attention_predictions(const AttentionValidateRequest& req,
                                 const planner::CostSetup& setup,
                                 std::vector<AttentionValidateRow>& rows) {
  if (req.scope != AttentionScope::kCore) {
    for (auto& r : rows) {
      if (req.scope == AttentionScope::kLayer && r.routed.empty()) continue;  // not verified
      auto p = predict_block(req, *setup.cluster, setup.costs(), r);
      if (!p) return p.error();
      auto f = predict_block(req, *setup.cluster, *setup.roofline, r);
      if (!f) return f.error();
      r.predicted = *p;
      r.roofline = *f;
    }
    return Status::Ok();
  }
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
  return summarize_rows(rows, [](const AttentionValidateRow& r) {
    return std::pair{r.predicted.seconds, r.roofline.seconds};
  });
}

}  // namespace moeplan::profiler
