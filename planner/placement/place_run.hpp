// One placement run as `moeplan place` (and any front end) asks for it: fit a policy on a load
// (the first steps of a [steps, L, E] load, or the whole load), score it on the steps it has not
// seen (held-out file steps, and steps drawn from the load's frequencies), and measure a trace's
// spread over nodes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "planner/placement/load_io.hpp"
#include "planner/placement/placement.hpp"
#include "planner/placement/placement_metrics.hpp"

namespace moeplan::planner {

/// `best`'s step samples when the load has no steps of its own.
inline constexpr int kPlaceBestSamples = 512;
/// File steps `best` searches on directly (else it draws samples from the fitted frequencies).
inline constexpr int kPlaceMinFileSamples = 64;

struct PlaceRequest {
  PlacementPolicy policy = PlacementPolicy::kBest;
  int num_gpus = 0;
  int num_nodes = 1;
  int num_slots = 0;   ///< 0: one per expert
  int num_groups = 0;  ///< 0: the model's n_group, else 1
  int eval_steps = 0;  ///< steps drawn from the load's frequencies to score on
  int fit_steps = -1;  ///< [S, L, E] loads: fit on the first K steps (-1: S / 2)
  std::int64_t step_tokens = 4096;
  std::uint64_t seed = 0;
  double locality_weight = 0.25;
  /// Keep at most this many of the unseen steps in PlaceOutcome::unseen_steps (0: none).
  std::size_t keep_unseen_steps = 0;
};

/// Checks the numbers of a request (errors name the input: gpus, nodes, slots, ...).
Status check_place_request(const PlaceRequest& request);

struct PlaceOutcome {
  PlacementConfig config;
  ExpertLoad fit;                   ///< what the policy was fitted on
  int num_file_steps = 0;           ///< steps in the load file (0 or 1: none)
  int fit_steps = 0;                ///< steps fitted on (= num_file_steps without a held-out part)
  std::int64_t pairs_per_step = 0;  ///< routed pairs of a drawn step: step tokens × top-k
  PlacementResult placed;
  BalanceFigures figures;              ///< on the fitted load
  std::optional<StepScores> held_out;  ///< on the file's steps after fit_steps
  std::optional<StepScores> sampled;   ///< on eval_steps drawn steps (another seed than best's)
  std::optional<TraceFigures> spread;  ///< a trace's nodes and GPUs per token
  /// The first PlaceRequest::keep_unseen_steps of the unseen steps the scores above used: the
  /// file's held-out steps, else the drawn ones.
  std::vector<std::vector<std::vector<double>>> unseen_steps;
};

/// Steps per side (search, check) a refinement of `best`'s map gets: the fit steps when the
/// load has at least 2 × this many, else steps drawn from the fitted frequencies.
inline constexpr int kPlaceRefineSteps = 32;

/// Steps drawn from `fit`'s frequencies (`pairs_per_step` routed pairs each) for a refinement
/// of `best`'s map when the load has too few steps of its own: one set to search on, one to
/// check on, with seeds other than `best`'s samples (`seed`) and the scored steps'.
struct RefineSteps {
  std::vector<std::vector<std::vector<double>>> search;  ///< [kPlaceRefineSteps][L][E]
  std::vector<std::vector<std::vector<double>>> check;
};
RefineSteps draw_refine_steps(const ExpertLoad& fit, std::int64_t pairs_per_step,
                              std::uint64_t seed);

/// `num_steps` unseen steps drawn from `fit`'s frequencies to score a placement on
/// (PlaceRequest::eval_steps): another seed than `best`'s samples and the refinement's steps.
std::vector<std::vector<std::vector<double>>> draw_eval_steps(const ExpertLoad& fit, int num_steps,
                                                              std::int64_t pairs_per_step,
                                                              std::uint64_t seed);

/// What a refinement of `best`'s map is given: the outcome so far (`placed` holds `best`'s
/// map), EPLB's map of the same fit and machine, and two disjoint sets of steps [S][L][E] — one
/// to search on, one to check on — none of them the steps the outcome is scored on.
struct PlaceRefineInput {
  const PlaceOutcome& outcome;
  const Placement& eplb;
  const std::vector<std::vector<std::vector<double>>>& search;
  const std::vector<std::vector<std::vector<double>>>& check;
};
/// Returns the placement to keep in place of `best`'s (the same layers, experts, EP size and
/// slots) and how long it took (added to PlacementResult::seconds).
using PlaceRefine =
    std::function<Result<std::pair<Placement, double>>(const PlaceRefineInput& input)>;

/// Fits and scores. `model` (optional) gives the expert groups and top-k. `refine` (policy
/// `best` only; `moeplan place --objective time`) replaces `best`'s map before it is scored.
Result<PlaceOutcome> run_placement(const LoadData& data, const PlaceRequest& request,
                                   const models::MoeModel* model, const PlaceRefine& refine = {});

}  // namespace moeplan::planner
