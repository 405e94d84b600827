// The accuracy report of the GPU cost sources (docs/BENCHMARKS.md, "GPU cost sources").
#include "planner/costs/accuracy.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "planner/costs/measured_costs.hpp"
#include "planner/plan.hpp"

namespace moeplan::planner {

ErrorStats error_stats(const std::vector<double>& ratios) {
  std::vector<double> r, e;
  for (const double x : ratios) {
    if (std::isfinite(x)) r.push_back(x);
  }
  ErrorStats s;
  s.n = static_cast<int>(r.size());
  if (r.empty()) return s;
  for (const double x : r) e.push_back(std::abs(x - 1.0));
  // NOTE: numpy's default quantile (linear between order statistics), as the fit's report uses.
  auto quantile = [](std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    const double pos = q * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
  };
  s.median = quantile(e, 0.5);
  s.p90 = quantile(e, 0.9);
  s.worst = *std::max_element(e.begin(), e.end());
  s.median_ratio = quantile(r, 0.5);
  s.min_ratio = *std::min_element(r.begin(), r.end());
  s.max_ratio = *std::max_element(r.begin(), r.end());
  return s;
}

namespace {

double no_roofline(const void*, double) { return 0.0; }

/// Leave-one-out inside the grid: the curve without point i, read at x_i (interior points only;
/// an end point would be extrapolated).
double leave_one_out(const CostCurve& c, std::size_t i) {
  if (i == 0 || i + 1 >= c.x.size()) return kNotJudged;
  CostCurve rest = c;
  rest.x.erase(rest.x.begin() + static_cast<std::ptrdiff_t>(i));
  rest.seconds.erase(rest.seconds.begin() + static_cast<std::ptrdiff_t>(i));
  std::string source;
  return curve_lookup(rest, c.x[i], no_roofline, nullptr, &source);
}

/// moeplan's dtype and format of a fused-MoE table dtype; false for the ones it cannot plan.
bool table_dtype_query(const std::string& table_dtype, MoeFusedQuery& q) {
  if (table_dtype == "bf16") {
    q.dtype = DType::kBf16;
  } else if (table_dtype == "fp8") {
    q.dtype = DType::kFp8;
  } else if (table_dtype == "fp8_block") {
    q.dtype = DType::kFp8;
    q.format = "fp8_block";
  } else {
    return false;
  }
  return true;
}

std::optional<CollectiveOp> parse_collective(const std::string& op) {
  if (op == "all_reduce") return CollectiveOp::kAllReduce;
  if (op == "all_gather") return CollectiveOp::kAllGather;
  if (op == "all_to_all") return CollectiveOp::kAllToAll;
  return std::nullopt;  // reduce_scatter: the cost model never asks for it
}

}  // namespace

Result<AccuracyReport> accuracy_report(const CostDb& db, const Cluster& cluster,
                                       const std::vector<models::MoeModel>& models,
                                       const Calibration* calibration) {
  AccuracyReport out;
  out.device = cluster.device().name;
  out.db_path = db.path();
  if (calibration != nullptr)
    out.calibration = calibration->file + " (" + calibration->provenance + ")";
  auto points = db.points_of(out.device, {"moe_fused", "all_reduce", "all_gather", "all_to_all"});
  if (!points) return points.error();
  std::vector<CostPoint> moe, nccl;
  for (auto& p : *points) {
    if (!is_imported(p.provenance)) continue;
    (p.op == "moe_fused" ? moe : nccl).push_back(std::move(p));
  }
  if (moe.empty() && nccl.empty()) {
    return Error{db.path() + ": no imported fused-MoE or NCCL points of device '" + out.device +
                 "'; expected a database written by moeplan costs import"};
  }
  std::shared_ptr<const Calibration> cal;
  std::shared_ptr<const Calibration> cal_held_out;
  if (calibration != nullptr) {
    cal = std::make_shared<const Calibration>(*calibration);
    Calibration h = *calibration;
    h.collectives = h.collectives_held_out;
    cal_held_out = std::make_shared<const Calibration>(std::move(h));
  }
  const RooflineCosts plain(cluster);
  const RooflineCosts calibrated(cluster, cal);
  const RooflineCosts calibrated_held_out(cluster, cal_held_out);

  // Fused MoE at the bundled models' shapes, 8 GPUs.
  const MeasuredCosts moe_db(moe, cluster, kSourceMeasuredPrefix + db.path());
  std::map<std::tuple<std::string, int, int, int, int, int, int>, bool> seen;
  for (const auto& p : moe) {
    MoeFusedQuery q;
    if (!table_dtype_query(p.dtype, q)) continue;
    // The key of the point: the shape text carries it (m = tokens, n = I/tp, k = H).
    auto field = [&](const std::string& key) {
      const std::string tag = key + "=";
      std::size_t at = p.shape.find(tag);
      while (at != std::string::npos && at != 0 && p.shape[at - 1] != ',') {
        at = p.shape.find(tag, at + 1);
      }
      return at == std::string::npos
                 ? std::string()
                 : p.shape.substr(at + tag.size(), p.shape.find(',', at) - at - tag.size());
    };
    if (field("dist") != "balanced") continue;
    q.hidden = p.k;
    q.inter = std::atof(field("inter").c_str());
    q.top_k = std::atoi(field("topk").c_str());
    q.num_experts = std::atoi(field("experts").c_str());
    q.tp_size = std::atoi(field("tp").c_str());
    q.ep_size = std::atoi(field("ep").c_str());
    if (q.tp_size * q.ep_size != 8 || q.num_experts <= 0 || q.ep_size <= 0) continue;
    const auto model = std::find_if(models.begin(), models.end(), [&](const models::MoeModel& m) {
      return m.hidden_size == std::lround(q.hidden) &&
             m.moe_intermediate_size == std::lround(q.inter) && m.num_experts == q.num_experts &&
             m.num_experts_per_tok == q.top_k;
    });
    if (model == models.end()) continue;
    const auto key = std::make_tuple(p.dtype, static_cast<int>(q.hidden), static_cast<int>(q.inter),
                                     q.num_experts, q.top_k, q.tp_size, q.ep_size);
    if (seen[key]) continue;
    seen[key] = true;
    const CostCurve* curve = moe_db.moe_curve(q);
    if (curve == nullptr) continue;
    for (std::size_t i = 0; i < curve->x.size(); ++i) {
      const double tokens = curve->x[i];
      if (tokens < 8.0 || std::fmod(tokens, 8.0) != 0.0) continue;  // whole tokens per GPU
      q.tokens = tokens;
      const MoeFusedQuery b = q.balanced();
      PointComparison c;
      c.kind = "moe";
      c.dtype = p.dtype;
      c.shape = model->name;
      c.split = "ep" + std::to_string(q.ep_size) + "xtp" + std::to_string(q.tp_size);
      c.x = tokens;
      c.measured = curve->seconds[i];
      // The plain roofline's booking of the same work (a2av): experts and the permute of the
      // rank's pairs, plus the weighted sum of its tokens (the tables' finalize).
      auto old = plain.moe_fused(b);
      if (!old) return old.error();
      const double group_tokens = tokens / q.ep_size;
      auto sum = plain.elementwise(
          {"combine_sum", (group_tokens * q.top_k + group_tokens) * q.hidden * dtype_bytes(q.dtype),
           q.dtype});
      if (!sum) return sum.error();
      c.old_roofline = old->seconds + sum->seconds;
      if (calibrated.has_fused_moe(b.table_dtype())) {
        auto t = calibrated.moe_fused(b);
        if (!t) return t.error();
        c.calibrated = t->seconds;
      }
      auto t = moe_db.moe_fused(b);
      if (!t) return t.error();
      c.db = t->seconds;
      if (t->source == kSourceExact && t->seconds == c.measured) ++out.db_exact;
      c.db_leave_one_out = leave_one_out(*curve, i);
      out.points.push_back(std::move(c));
    }
  }

  // NCCL inside the node: fp16 curves of 2, 4 and 8 GPUs.
  std::map<std::pair<std::string, int>, std::map<double, std::vector<double>>> curves;
  for (const auto& p : nccl) {
    if (p.dtype != "fp16" || p.group_size < 2 || p.group_size > cluster.num_gpus()) continue;
    if (!(p.m > 0.0) || !(p.median_s > 0.0)) continue;
    curves[{p.op, p.group_size}][p.m].push_back(p.median_s);
  }
  const MeasuredCosts nccl_db(nccl, cluster, kSourceMeasuredPrefix + db.path());
  for (const auto& [key, samples] : curves) {
    const auto op = parse_collective(key.first);
    if (!op) continue;
    CostCurve curve;
    for (const auto& [x, ts] : samples) {
      curve.x.push_back(x);
      double sum = 0.0;
      for (const double t : ts) sum += t;
      curve.seconds.push_back(sum / static_cast<double>(ts.size()));
    }
    std::vector<int> group;
    for (int g = 0; g < key.second; ++g) group.push_back(g);
    for (std::size_t i = 0; i < curve.x.size(); ++i) {
      const CollectiveQuery q{*op, {group}, curve.x[i], {}, DType::kFp16};
      PointComparison c;
      c.kind = "nccl";
      c.dtype = "fp16";
      c.shape = key.first + "/" + std::to_string(key.second);
      c.x = curve.x[i];
      c.measured = curve.seconds[i];
      auto old = plain.collective(q);
      if (!old) return old.error();
      c.old_roofline = old->seconds;
      // NOTE: the fit held out every other size (odd positions of the sorted sizes).
      if (cal_held_out && i % 2 == 1 &&
          cal_held_out->collectives.count({key.first, key.second}) > 0) {
        auto t = calibrated_held_out.collective(q);
        if (!t) return t.error();
        c.calibrated = t->seconds;
      }
      auto t = nccl_db.collective(q);
      if (!t) return t.error();
      c.db = t->seconds;
      if (t->source == kSourceExact && t->seconds == c.measured) ++out.db_exact;
      c.db_leave_one_out = leave_one_out(curve, i);
      out.points.push_back(std::move(c));
    }
  }
  return out;
}

Result<LayoutChoice> compare_recommendations(const models::MoeModel& model, const Cluster& cluster,
                                             const Workload& workload, const CostSource& plain,
                                             const CostSource& calibrated,
                                             const CostSource& measured) {
  LayoutChoice out;
  out.model = model.name;
  out.cluster = cluster.name();
  out.phase = phase_name(workload.phase);
  out.tokens_per_gpu = workload.tokens_per_gpu;
  PlanRequest req;
  req.workload = workload;
  for (auto [source, name, ms] : {std::tuple{&plain, &out.old_roofline, &out.old_ms},
                                  std::tuple{&calibrated, &out.calibrated, &out.calibrated_ms},
                                  std::tuple{&measured, &out.db, &out.db_ms}}) {
    auto plan = make_plan(model, cluster, *source, req);
    if (!plan) return plan.error();
    if (plan->recommended < 0) {
      *name = "(none fits)";
      continue;
    }
    const LayoutCost& best = plan->layouts[static_cast<std::size_t>(plan->recommended)];
    *name = best.layout.shape_name() + " " + dispatcher_name(best.layout.dispatcher) + " " +
            mapping_name(best.layout.mapping);
    *ms = best.moe_seconds * 1e3;
  }
  return out;
}

}  // namespace moeplan::planner
