// `validate`'s core, shared by the CLI and moeplan-gui: the cases (layout × dispatcher × token
// count) built from the options, each run as the real sharded layer and measured, and the
// planner's prediction for each from the cost database and from the roofline.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/communicator.hpp"
#include "kernels/moe_layer.hpp"
#include "models/moe_model.hpp"
#include "planner/costs/cost_model.hpp"
#include "planner/costs/cost_setup.hpp"
#include "profiler/harness.hpp"

namespace moeplan::profiler {

/// validate's settings as the CLI takes them (lists comma-separated).
struct ValidateOptions {
  std::string model;  ///< bundled name or config.json path
  std::string costs;  ///< the cost database written by profile
  std::string layouts = "all";
  std::string dispatchers = "all";
  std::string tokens = "256,512,1024";
  std::string dtype;  ///< "" = the model's
  /// Weight format (models::weight_format_names); "" = the model's own. The layer that runs and
  /// the prediction both take it (fp8 blocks: predicted from profile's fp8 GEMM points).
  std::string weights;
  int scale = 1;
  std::uint64_t seed = 20241120;
  double max_seconds = 3.0;
  std::string statistic = "median";
  int ranks_per_node = 0;  ///< group the ranks into nodes (deepep_normal; 0: one node)
  /// The backend the layer runs on: "cpu", or "cuda" (one rank on one GPU, timed by its
  /// kernels' CUDA events as a CUDA profile is).
  std::string backend = "cpu";
};

struct ValidateCase {
  kernels::Layout layout;  ///< on the world's ranks, with the case's dispatcher and mapping
  int tokens = 0;
};

struct ValidateRequest {
  models::MoeModel model;   ///< as given
  models::MoeModel scaled;  ///< widths / scale: what runs and what the planner costs
  kernels::LayerSpec spec;
  std::vector<ValidateCase> cases;
  HarnessOptions harness;
  /// A device backend every case runs on (one rank; made with the request so that an unusable
  /// one is an input error); null: the CPU backend, one per rank and case.
  std::shared_ptr<kernels::Backend> backend;
  planner::CostStatistic statistic = planner::CostStatistic::kMedian;
  kernels::DispatchOptions dispatch;  ///< node grouping; deepep_ll's buffer fits every case
  /// What the layouts × dispatchers left out and why (a DeepEP dispatcher with tp > 1, ...).
  std::vector<std::string> skipped;
  int world = 1;  ///< ranks the cases run on
  /// The rotation the CPU ranks read their weights cold through (measure_layer): the
  /// profile's (profiled_cold_bytes), which rank 0 reads with the cost database and
  /// run_validate_cases hands to every rank.
  std::size_t cold_bytes = kColdBytes;
  /// The cluster the predictions are made for: "local:N" (one node) or "local:MxN" (M nodes of
  /// ranks_per_node, emulated on one host when the profile ran on one: make_cost_setup's
  /// emulated_nodes).
  std::string cluster() const;
};

/// The most tokens (over all ranks) one validate case may have.
inline constexpr long kMaxValidateTokens = 1L << 20;

/// The checks every validate request starts with — a cost database given (unless
/// `need_costs` is false: verify's cases), the statistic, the time per case, the backend — and
/// the statistic; errors name the input.
Result<planner::CostStatistic> check_validate_basics(const std::string& costs,
                                                     const std::string& statistic,
                                                     double max_seconds, const std::string& backend,
                                                     bool need_costs = true);
/// validate's timing: one warm-up, 5 to 50 repetitions within `max_seconds` per case.
HarnessOptions validate_harness(double max_seconds);

/// The cases for `world` ranks; errors name the input (costs, layouts, tokens, ...).
Result<ValidateRequest> make_validate_request(const ValidateOptions& options, int world);

/// A case measured a second time, after the others, because its samples had not settled.
struct SecondLook {
  bool done = false;      ///< measured again
  bool replaced = false;  ///< the second measurement is the one kept
  double other_s = 0.0;   ///< the measurement not kept: its statistic, seconds
  double other_spread = 0.0;
};

/// What the harness measured of one case (validate's and validate --attention's rows).
struct MeasuredCase {
  double measured_s = 0.0;  ///< the request's statistic
  double p10_s = 0.0;
  double p90_s = 0.0;
  int reps = 0;
  SecondLook second_look;
  bool verified = true;
  std::string verify_detail;
  /// Why the backend ran a stand-in for a kernel while the case was timed (Backend::fallbacks,
  /// e.g. the CUDA fp8 GEMM emulated in fp32): the time is not the kernels', so the case is
  /// shown but left out of the error summary. Empty when every call ran the backend's kernel.
  std::string stand_in;
  /// Copies of the case (its weights, or the whole block) run in turn so each run starts cold
  /// (LayerMeasurement::copies, RotatingDecoderCase); 1 when one outgrows the caches.
  int copies = 1;
};

/// (p90 − p10) / the case's statistic (the median unless p10 was asked for; 0 when nothing was
/// measured): the harness's test of settled samples.
double case_spread(const MeasuredCase& r);

/// Whether a case is measured again after the others: verified, timed on the backend's own
/// kernels, and its samples spread beyond `target` when its time budget ran out (the machine
/// was interfered with while it ran).
bool unsettled(const MeasuredCase& r, double target);

/// Keeps in `row` the steadier of its measurement and `again` (the same case measured after the
/// others): `again` replaces it when it is verified, on the backend's own kernels and spread
/// less; the one not kept is noted in second_look.
template <class Row>
void keep_steadier(Row& row, Row again) {
  const bool replace =
      again.verified && again.stand_in.empty() && case_spread(again) < case_spread(row);
  SecondLook look;
  look.done = true;
  look.replaced = replace;
  look.other_s = replace ? row.measured_s : again.measured_s;
  look.other_spread = replace ? case_spread(row) : case_spread(again);
  if (replace) row = std::move(again);
  row.second_look = look;
}

struct ValidateRow : MeasuredCase {
  ValidateCase c;
  planner::LayerCost predicted;  ///< from the cost database
  planner::LayerCost roofline;
  kernels::PhaseTimes phases;
};

/// Runs every case collectively on `world`, then once more each case that had not settled
/// (keep_steadier); rank 0 gets the rows (the others' are their own measurements). `progress` runs
/// on rank 0 after each case; `stop` (optional) is polled on every rank between cases and any
/// rank's request ends the run with the cases done so far.
std::vector<ValidateRow> run_validate_cases(
    kernels::Communicator& world, const ValidateRequest& request,
    const std::function<void(int done, int total, const std::string& what)>& progress,
    const std::function<bool()>& stop = {});

/// What run_validate_paced measured: the rows, and the machine's pace (pace.hpp) before the
/// first case and after the last (not measured, 0, when the run was stopped part-way).
struct ValidateRun {
  std::vector<ValidateRow> rows;
  planner::MachinePace pace_before;
  planner::MachinePace pace_after;
};

/// run_validate_cases between two probes of the machine's pace, on every rank (through the
/// request's device backend, or a CPU backend of each rank's own).
ValidateRun run_validate_paced(
    kernels::Communicator& world, const ValidateRequest& request,
    const std::function<void(int done, int total, const std::string& what)>& progress,
    const std::function<bool()>& stop = {});

/// The planner's figures for every row (on rank 0, after the measurements): `predicted` from
/// setup.costs(), `roofline` from setup.roofline.
Status add_predictions(const ValidateRequest& request, const planner::CostSetup& setup,
                       std::vector<ValidateRow>& rows, int world);

struct ValidateSummary {
  double median_abs_error = 0.0;  ///< cost DB
  double worst_abs_error = 0.0;
  double roofline_median_abs_error = 0.0;
  double roofline_worst_abs_error = 0.0;
  bool all_verified = true;
  int compared = 0;        ///< verified cases in the errors (0: the figures above mean nothing)
  int stand_in_cases = 0;  ///< cases left out because a stand-in ran (MeasuredCase::stand_in)
  int remeasured = 0;      ///< cases measured again after the others (SecondLook)
  int replaced = 0;        ///< of those, the second measurement kept
};
ValidateSummary summarize(const std::vector<ValidateRow>& rows);
/// The summary of |relative errors| against the database and the roofline (medians and worst)
/// of the cases compared, with the count of those left out for a stand-in.
ValidateSummary summarize_errors(const std::vector<double>& db, const std::vector<double>& roof,
                                 bool all_verified, int stand_in_cases = 0);

/// (predicted − measured) / measured; 0 when nothing was measured.
double relative_error(double predicted, double measured);

/// The summary of `rows` (MeasuredCase rows; `times(row)` gives {database, roofline} seconds):
/// the verified cases timed on the backend's own kernels are compared, a stand-in's are counted.
template <class Row, class Times>
ValidateSummary summarize_rows(const std::vector<Row>& rows, Times times) {
  std::vector<double> db, roof;
  bool all_verified = true;
  int stand_ins = 0;
  int remeasured = 0, replaced = 0;
  for (const Row& r : rows) {
    remeasured += r.second_look.done ? 1 : 0;
    replaced += r.second_look.replaced ? 1 : 0;
    if (!r.verified) {
      all_verified = false;  // a layer that computed a wrong result: its time is not compared
      continue;
    }
    if (!r.stand_in.empty()) {
      ++stand_ins;  // not the kernels' time: nothing to compare the prediction with
      continue;
    }
    const auto [predicted, roofline] = times(r);
    db.push_back(std::abs(relative_error(predicted, r.measured_s)));
    roof.push_back(std::abs(relative_error(roofline, r.measured_s)));
  }
  ValidateSummary s = summarize_errors(db, roof, all_verified, stand_ins);
  s.remeasured = remeasured;
  s.replaced = replaced;
  return s;
}

/// "db-exact:5 db-interp:9 ..." over the six items of a layer cost.
std::string source_summary(const planner::LayerCost& cost);

}  // namespace moeplan::profiler
