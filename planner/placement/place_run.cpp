// Fitting a placement on a load and scoring it on unseen steps.
#include "planner/placement/place_run.hpp"

#include <algorithm>

namespace moeplan::planner {

namespace {

using Steps = std::vector<std::vector<std::vector<double>>>;

ExpertLoad sum_steps(const Steps& steps, int first, int last, const ExpertLoad& like) {
  ExpertLoad load = like;
  for (auto& row : load.counts) std::fill(row.begin(), row.end(), 0.0);
  for (int s = first; s < last; ++s) {
    const auto& step = steps[static_cast<std::size_t>(s)];
    for (std::size_t l = 0; l < step.size(); ++l) {
      for (std::size_t e = 0; e < step[l].size(); ++e) load.counts[l][e] += step[l][e];
    }
  }
  return load;
}

}  // namespace

Status check_place_request(const PlaceRequest& r) {
  if (r.num_gpus <= 0) return Error{"place: expected {gpus} N with N ≥ 1", "gpus"};
  if (r.num_nodes <= 0) return Error{"place: expected {nodes} ≥ 1", "nodes"};
  if (r.num_slots < 0) return Error{"place: expected {slots} ≥ 0 (0: one per expert)", "slots"};
  if (r.num_groups < 0) return Error{"place: expected {groups} ≥ 1", "groups"};
  if (r.eval_steps < 0 || r.eval_steps > 1000000) {
    return Error{"place: expected {eval_steps} in [0, 1000000]", "eval_steps"};
  }
  if (r.step_tokens <= 0 || r.step_tokens > (std::int64_t{1} << 40)) {
    return Error{"place: expected {step_tokens} in [1, 2^40]", "step_tokens"};
  }
  if (!(r.locality_weight >= 0.0 && r.locality_weight <= 100.0)) {
    return Error{"place: expected {locality_weight} in [0, 100]", "locality_weight"};
  }
  return Status::Ok();
}

RefineSteps draw_refine_steps(const ExpertLoad& fit, std::int64_t pairs_per_step,
                              std::uint64_t seed) {
  // Other seeds than best's samples and the scored steps'.
  return RefineSteps{
      sample_steps(fit, kPlaceRefineSteps, pairs_per_step, seed ^ 0xA5A5A5A55A5A5A5AULL),
      sample_steps(fit, kPlaceRefineSteps, pairs_per_step, seed ^ 0x3C3C3C3CC3C3C3C3ULL)};
}

Steps draw_eval_steps(const ExpertLoad& fit, int num_steps, std::int64_t pairs_per_step,
                      std::uint64_t seed) {
  // Another seed than best's own samples: the placement never saw these steps.
  return sample_steps(fit, num_steps, pairs_per_step, seed ^ 0x9E3779B97F4A7C15ULL);
}

Result<PlaceOutcome> run_placement(const LoadData& data, const PlaceRequest& r,
                                   const models::MoeModel* model, const PlaceRefine& refine) {
  MOEPLAN_TRY_STATUS(check_place_request(r));
  PlaceOutcome out;
  // Fit on the first steps of a [steps, L, E] load, score on the rest.
  out.num_file_steps = static_cast<int>(data.steps.size());
  out.fit_steps = out.num_file_steps;
  if (out.num_file_steps >= 2) {
    out.fit_steps = r.fit_steps < 0 ? out.num_file_steps / 2 : r.fit_steps;
    if (out.fit_steps < 1 || out.fit_steps > out.num_file_steps) {
      return Error{"place: expected {fit_steps} in [1, " + std::to_string(out.num_file_steps) +
                       "] for " + data.load.source,
                   "fit_steps"};
    }
  } else if (r.fit_steps >= 0) {
    return Error{"place: {fit_steps} needs a load with steps ([steps][layers][experts])",
                 "fit_steps"};
  }
  out.fit =
      out.num_file_steps >= 2 ? sum_steps(data.steps, 0, out.fit_steps, data.load) : data.load;

  out.config.num_gpus = r.num_gpus;
  out.config.num_nodes = r.num_nodes;
  out.config.num_slots = r.num_slots;
  out.config.num_groups =
      r.num_groups > 0 ? r.num_groups : (model != nullptr ? model->router.num_groups : 1);

  // Routed pairs per step: tokens × top-k (the model's, else the trace's, else 1).
  const int top_k = model != nullptr ? model->num_experts_per_tok
                    : data.trace     ? data.trace->top_k
                                     : 1;
  out.pairs_per_step = r.step_tokens * top_k;

  BestOptions best;
  best.locality_weight = r.locality_weight;
  if (r.policy == PlacementPolicy::kBest) {
    // Real fit steps when there are enough of them to split into a search and a check half,
    // else multinomial steps drawn from the fitted frequencies.
    if (out.fit_steps >= kPlaceMinFileSamples && out.num_file_steps >= 2) {
      best.samples =
          samples_by_layer(Steps(data.steps.begin(), data.steps.begin() + out.fit_steps));
    } else {
      best.samples =
          samples_by_layer(sample_steps(out.fit, kPlaceBestSamples, out.pairs_per_step, r.seed));
    }
    if (data.trace) best.coactivation = data.trace->coactivation();
  }
  auto placed = place_experts(out.fit, r.policy, out.config, best);
  if (!placed) return placed.error();
  out.placed = std::move(*placed);
  if (refine) {
    if (r.policy != PlacementPolicy::kBest) {
      return Error{
          "place: a refinement of the map needs {policy} best, got '" + policy_name(r.policy) + "'",
          "policy"};
    }
    auto eplb = place_experts(out.fit, PlacementPolicy::kEplb, out.config);
    if (!eplb) return eplb.error();
    Steps search, check;
    if (out.num_file_steps >= 2 && out.fit_steps >= 2 * kPlaceRefineSteps) {
      // The fit steps' two halves, the first kPlaceRefineSteps of each.
      const auto first = data.steps.begin();
      const int half = out.fit_steps / 2;
      search.assign(first, first + kPlaceRefineSteps);
      check.assign(first + half, first + half + kPlaceRefineSteps);
    } else {
      RefineSteps drawn = draw_refine_steps(out.fit, out.pairs_per_step, r.seed);
      search = std::move(drawn.search);
      check = std::move(drawn.check);
    }
    auto refined = refine(PlaceRefineInput{out, eplb->placement, search, check});
    if (!refined) return refined.error();
    out.placed.placement = std::move(refined->first);
    out.placed.seconds += refined->second;
    fill_logical_maps(out.placed);
  }
  auto figures = balance_figures(out.fit, out.placed.placement);
  if (!figures) return figures.error();
  out.figures = *figures;

  if (out.num_file_steps >= 2 && out.fit_steps < out.num_file_steps) {
    const auto first = data.steps.begin() + out.fit_steps;
    auto s = score_steps(Steps(first, data.steps.end()), out.placed.placement);
    if (!s) return s.error();
    out.held_out = *s;
    const auto keep = std::min<std::size_t>(r.keep_unseen_steps,
                                            static_cast<std::size_t>(data.steps.end() - first));
    out.unseen_steps.assign(first, first + static_cast<std::ptrdiff_t>(keep));
  }
  if (r.eval_steps > 0) {
    auto steps = draw_eval_steps(out.fit, r.eval_steps, out.pairs_per_step, r.seed);
    auto s = score_steps(steps, out.placed.placement);
    if (!s) return s.error();
    out.sampled = *s;
    if (out.unseen_steps.empty() && r.keep_unseen_steps > 0) {
      steps.resize(std::min(steps.size(), r.keep_unseen_steps));
      out.unseen_steps = std::move(steps);
    }
  }
  if (data.trace) {
    auto t = trace_figures(*data.trace, out.placed.placement, out.config.num_nodes);
    if (!t) return t.error();
    out.spread = *t;
  }
  return out;
}

}  // namespace moeplan::planner
