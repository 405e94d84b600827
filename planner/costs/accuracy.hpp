// The accuracy report of the GPU cost sources against measured tables (`moeplan costs report`):
// for each measured fused-MoE point at a bundled model's shape on one node, and each measured
// NCCL point, the plain roofline, the calibrated roofline (judged on what its fit left out) and
// the imported database (exact, and leave-one-out inside the grid) against the measurement; and
// whether the recommended layout changes between those sources.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "models/moe_model.hpp"
#include "planner/costs/calibration.hpp"
#include "planner/costs/cost_db.hpp"
#include "planner/costs/cost_model.hpp"

namespace moeplan::planner {

/// |predicted / measured − 1| over a set of points.
struct ErrorStats {
  int n = 0;
  double median = 0.0;
  double p90 = 0.0;
  double worst = 0.0;
  double median_ratio = 0.0;  ///< of predicted / measured
  double min_ratio = 0.0;
  double max_ratio = 0.0;
};
/// Stats of predicted / measured ratios (NaNs skipped).
ErrorStats error_stats(const std::vector<double>& ratios);

inline constexpr double kNotJudged = std::numeric_limits<double>::quiet_NaN();

/// One measured point and what each source predicts for it (kNotJudged where a source is not
/// judged on it: the calibrated fit saw it, or leave-one-out would extrapolate).
struct PointComparison {
  std::string kind;   ///< "moe" or "nccl"
  std::string dtype;  ///< table dtype ("bf16", "fp8", "fp8_block"; NCCL: "fp16")
  std::string shape;  ///< moe: bundled model name; nccl: "all_reduce/8"
  std::string split;  ///< moe: "ep8xtp1"; nccl: ""
  double x = 0.0;     ///< tokens entering the rank's MoE, or bytes
  double measured = 0.0;
  double old_roofline = 0.0;
  double calibrated = kNotJudged;
  double db = 0.0;  ///< the database's answer at the point (exact on the grid)
  double db_leave_one_out = kNotJudged;
};

struct AccuracyReport {
  std::string device;
  std::string db_path;
  std::string calibration;  ///< file and provenance, or "" without one
  std::vector<PointComparison> points;
  int db_exact = 0;  ///< points the database answered exactly (label db-exact, same value)
};

/// Compares every imported balanced fused-MoE point of `db` whose (hidden, inter, experts, top-k)
/// is one of `models` on tp·ep = 8 GPUs (8 .. 16384 tokens, whole tokens per GPU), and every
/// imported fp16 NCCL point of 2, 4 and 8 GPUs. `cluster` is one node of the database's device
/// (the roofline routes collectives over it). The calibrated MoE form is judged on every such
/// point (the fit left the bundled models' shapes out); the calibrated NCCL curve on every other
/// message size with the parameters fitted on the rest (held_out_fit_parameters).
Result<AccuracyReport> accuracy_report(const CostDb& db, const Cluster& cluster,
                                       const std::vector<models::MoeModel>& models,
                                       const Calibration* calibration);

/// The recommended layout of one model, cluster and phase under each source.
struct LayoutChoice {
  std::string model;
  std::string cluster;
  std::string phase;
  int tokens_per_gpu = 0;
  std::string old_roofline;  ///< "ep8×tp1 a2av tp_innermost", or "(none fits)"
  std::string calibrated;
  std::string db;
  double old_ms = 0.0;  ///< step time of each source's recommendation, ms
  double calibrated_ms = 0.0;
  double db_ms = 0.0;
};

/// Plans `model` on `cluster` for `workload` with the plain roofline, the calibrated one and the
/// database's costs (each a source for `cluster`) and names each recommendation.
Result<LayoutChoice> compare_recommendations(const models::MoeModel& model, const Cluster& cluster,
                                             const Workload& workload, const CostSource& plain,
                                             const CostSource& calibrated,
                                             const CostSource& measured);

}  // namespace moeplan::planner
