// Placement searched on the cost model's predicted MoE layer time (`moeplan place --objective
// time`): EPLB's and `best`'s maps refined by slot moves, each move kept only when the predicted
// time of its layer — the slowest EP rank's experts, the dispatch and combine on the cluster's
// links, the weights of every active expert read once — falls on the search steps; at the end
// a layer leaves EPLB's map only for `best`'s or the refined map when that is significantly
// faster on held-back check steps.
// One search serves prefill and decode: the phase and tokens are the context's workload.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "planner/costs/cost_model.hpp"
#include "planner/placement/placement.hpp"
#include "planner/rebalance.hpp"

namespace moeplan::planner {

/// The policy name of a placement the search returns.
inline constexpr const char* kTimeSearchPolicy = "best-time";

/// Knobs of the search on predicted time.
struct TimeSearchOptions {
  int max_rounds = 100;  ///< rounds; each tries up to `candidates` moves in every open layer
  int candidates = 4;    ///< moves per layer and round, each costed on all search steps
  /// A layer stops after this many rounds in a row without a kept move.
  int patience = 3;
  /// Called after each round: layers settled (no move left to try) of all, the round, and the
  /// mean predicted MoE time per step of the maps so far on the search steps (seconds).
  std::function<void(int settled, int layers, int round, double seconds_per_step)> progress;
  /// Asked before each round, each costing of candidates and the final check: true stops the
  /// search with the error kTimeSearchCancelled (a front end's Cancel; nothing is returned).
  std::function<bool()> cancelled;
};

/// The message of the error a cancelled search returns.
inline constexpr const char* kTimeSearchCancelled = "time search: cancelled";

/// What the search did, and the mean predicted MoE time per step (seconds, all MoE layers) of
/// the maps it compared.
struct TimeSearchReport {
  int search_steps = 0;
  int check_steps = 0;
  int rounds = 0;
  int moves_tried = 0;  ///< summed over layers
  int moves_kept = 0;
  int layers = 0;
  int layers_from_best = 0;  ///< layers whose search started from `best`'s map (else EPLB's)
  /// The final map per layer: the refined one, `best`'s, or (the rest) EPLB's.
  int layers_refined = 0;
  int layers_best = 0;
  double eplb_search_seconds = 0.0;
  double start_search_seconds = 0.0;  ///< the better of EPLB's and `best`'s, layer by layer
  double refined_search_seconds = 0.0;
  double eplb_check_seconds = 0.0;
  double best_check_seconds = 0.0;
  double result_check_seconds = 0.0;
  double seconds = 0.0;  ///< the search's own wall time
};

struct TimeSearchResult {
  Placement placement;  ///< policy kTimeSearchPolicy
  TimeSearchReport report;
};

/// The routed pairs of one step as the cost model prices it on `layout`: its ep × tp GPUs' tokens
/// per GPU (the context's workload) × the model's top-k. The search's steps are drawn at this
/// many pairs; its move heuristics read rows per slot from it.
double step_pairs(const CostContext& ctx, const Layout& layout);

/// Per-layer predicted MoE time of `placement` summed over `steps` (seconds; cost_layout on
/// `layout` with the context's model, cluster, costs and workload, each step its own load).
/// The steps' layers are the placement's (a one-layer placement applies to every layer).
Result<std::vector<double>> layer_moe_seconds(const CostContext& ctx, const Layout& layout,
                                              const Placement& placement, const LoadSteps& steps,
                                              const std::string& source);

/// layer_moe_seconds of the layers in `subset` (ascending indices) only, the others 0: the model,
/// placement and steps cut to those layers (each layer is costed on its own, so its time is the
/// same), at the cost of those layers. Needs a placement with a map per layer.
Result<std::vector<double>> subset_layer_seconds(const CostContext& ctx, const Layout& layout,
                                                 const Placement& placement, const LoadSteps& steps,
                                                 const std::string& source,
                                                 const std::vector<int>& subset);

/// The same per step: [step][layer] seconds.
Result<std::vector<std::vector<double>>> step_layer_seconds(const CostContext& ctx,
                                                            const Layout& layout,
                                                            const Placement& placement,
                                                            const LoadSteps& steps,
                                                            const std::string& source);

/// Searches the placement on predicted time. `eplb` and `best` are maps of the same layers,
/// experts, EP size and slots (the search starts from the faster of the two per layer on
/// `search`); `search` and `check` are disjoint steps [S][L][E]. Per layer the result is EPLB's
/// map unless `best`'s or the refined map is faster on `check` by more than three standard
/// errors of the paired per-step gains (then the faster of those). Every move keeps each rank's
/// slot count and every expert's presence (a slot changes expert only when its old expert keeps
/// another replica) and never puts a replica on a rank that holds its expert (the start maps
/// may: EPLB's, for an expert with more replicas than ranks). Deterministic.
/// Errors: no steps, maps or steps that do not match, what cost_layout reports.
Result<TimeSearchResult> search_placement_by_time(const CostContext& ctx, const Layout& layout,
                                                  const Placement& eplb, const Placement& best,
                                                  const LoadSteps& search, const LoadSteps& check,
                                                  const std::string& source,
                                                  const TimeSearchOptions& options = {});

}  // namespace moeplan::planner
