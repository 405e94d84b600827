// The placement search on predicted MoE layer time.
#include "planner/time_search.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <numeric>
#include <set>

#include "models/index.hpp"

namespace moeplan::planner {

namespace {

/// One slot edit of a layer's map: a swap of two slots' experts (kSwap), or slot a taking
/// expert `expert` from an expert that keeps another replica (kReplica).
struct Move {
  enum Kind : int { kSwap = 0, kReplica = 1 };
  int kind = kSwap;
  int a = 0;
  int b = 0;
  int expert = 0;
  double score = 0.0;  ///< the heuristic's largest rank rows after the move (lower first)

  std::array<int, 4> key() const { return {kind, a, b, expert}; }
};

void apply_move(std::vector<int>& map, const Move& m) {
  if (m.kind == Move::kSwap) {
    std::swap(map[uz(m.a)], map[uz(m.b)]);
  } else {
    map[uz(m.a)] = m.expert;
  }
}

/// Whether EP rank r (slots [r·spr, (r+1)·spr) of `map`) holds a replica of expert e.
bool rank_holds(const std::vector<int>& map, int spr, int r, int e) {
  const auto first = map.begin() + r * spr;
  return std::find(first, first + spr, e) != first + spr;
}

/// Swaps of a slot on one of the two heaviest ranks by `metric` (a per-slot value summed per
/// rank) with a lighter slot on any other rank, best first by the heaviest rank's value after
/// the swap. Only legal swaps: no rank ends with two replicas of one expert.
std::vector<Move> swap_moves(const std::vector<int>& map, const std::vector<double>& metric,
                             int ep_size, const std::set<std::array<int, 4>>& tried) {
  const int slots = static_cast<int>(map.size());
  const int spr = slots / ep_size;
  std::vector<double> rank(uz(ep_size), 0.0);
  for (int s = 0; s < slots; ++s) rank[uz(s / spr)] += metric[uz(s)];
  auto holds = [&](int r, int e) { return rank_holds(map, spr, r, e); };
  std::vector<int> order(uz(ep_size));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int x, int y) { return rank[uz(x)] > rank[uz(y)]; });
  std::vector<Move> out;
  for (int hi = 0; hi < std::min(2, ep_size); ++hi) {
    const int h = order[uz(hi)];
    for (int b = 0; b < ep_size; ++b) {
      if (b == h) continue;
      double rest = 0.0;  // the largest value outside h and b
      for (int r = 0; r < ep_size; ++r) {
        if (r != h && r != b) rest = std::max(rest, rank[uz(r)]);
      }
      for (int i = h * spr; i < (h + 1) * spr; ++i) {
        for (int j = b * spr; j < (b + 1) * spr; ++j) {
          const int ei = map[uz(i)];
          const int ej = map[uz(j)];
          const double d = metric[uz(i)] - metric[uz(j)];
          if (ei == ej || d <= 0.0 || holds(b, ei) || holds(h, ej)) continue;
          Move m{Move::kSwap, std::min(i, j), std::max(i, j), 0, 0.0};
          if (tried.count(m.key()) != 0) continue;
          m.score = std::max({rank[uz(h)] - d, rank[uz(b)] + d, rest});
          out.push_back(m);
        }
      }
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Move& p, const Move& q) { return p.score < q.score; });
  return out;
}

/// Up to `limit` candidate moves for one layer (`share[e]`: expert e's share of the search
/// steps' pairs; `pairs`: the routed pairs of a step), taken in turn from three lists, each best
/// first: swaps that even the ranks' expected rows; swaps that even their expected active
/// experts (a slot with λ expected rows is active with probability 1 − e^−λ: in decode every
/// active expert's weights are read); and replica moves, a slot of the expert with the fewest
/// rows per replica (among those with two or more) given to one of the experts with the most,
/// by the heaviest rank's rows after it.
std::vector<Move> candidate_moves(const std::vector<int>& map, const std::vector<double>& share,
                                  double pairs, int ep_size,
                                  const std::set<std::array<int, 4>>& tried, int limit) {
  const int slots = static_cast<int>(map.size());
  const int spr = slots / ep_size;
  const int experts = static_cast<int>(share.size());
  std::vector<int> replicas(uz(experts), 0);
  for (const int e : map) ++replicas[uz(e)];
  std::vector<double> rows(uz(slots));
  std::vector<double> active(uz(slots));
  for (int s = 0; s < slots; ++s) {
    rows[uz(s)] = share[uz(map[uz(s)])] / replicas[uz(map[uz(s)])];
    active[uz(s)] = -std::expm1(-pairs * rows[uz(s)]);
  }
  const std::vector<Move> by_rows = swap_moves(map, rows, ep_size, tried);
  const std::vector<Move> by_active = swap_moves(map, active, ep_size, tried);

  std::vector<Move> replica_moves;
  std::vector<int> donors, takers;
  for (int e = 0; e < experts; ++e) {
    if (replicas[uz(e)] >= 2) donors.push_back(e);
    if (replicas[uz(e)] >= 1) takers.push_back(e);
  }
  auto per_replica = [&](int e) { return share[uz(e)] / replicas[uz(e)]; };
  std::stable_sort(donors.begin(), donors.end(),
                   [&](int x, int y) { return per_replica(x) < per_replica(y); });
  std::stable_sort(takers.begin(), takers.end(),
                   [&](int x, int y) { return per_replica(x) > per_replica(y); });
  auto holds = [&](int r, int e) { return rank_holds(map, spr, r, e); };
  constexpr std::size_t kFew = 4;
  for (std::size_t xi = 0; xi < std::min(kFew, donors.size()); ++xi) {
    const int x = donors[xi];
    for (std::size_t yi = 0; yi < std::min(kFew, takers.size()); ++yi) {
      const int y = takers[yi];
      if (x == y) continue;
      for (int s = 0; s < slots; ++s) {
        if (map[uz(s)] != x || holds(s / spr, y)) continue;
        Move m{Move::kReplica, s, 0, y, 0.0};
        if (tried.count(m.key()) != 0) continue;
        // Rank rows after: x's other replicas take its share over one replica fewer, y's
        // replicas (and slot s) split y's share over one more.
        std::vector<double> after(uz(ep_size), 0.0);
        for (int t = 0; t < slots; ++t) {
          const int e = t == s ? y : map[uz(t)];
          const int n = replicas[uz(e)] + (e == y ? 1 : 0) - (e == x ? 1 : 0);
          after[uz(t / spr)] += share[uz(e)] / n;
        }
        m.score = *std::max_element(after.begin(), after.end());
        replica_moves.push_back(m);
      }
    }
  }
  std::stable_sort(replica_moves.begin(), replica_moves.end(),
                   [](const Move& p, const Move& q) { return p.score < q.score; });

  std::vector<Move> out;
  std::set<std::array<int, 4>> taken;
  const std::vector<Move>* lists[] = {&by_rows, &by_active, &replica_moves};
  std::size_t next[] = {0, 0, 0};
  for (bool more = true; more && static_cast<int>(out.size()) < limit;) {
    more = false;
    for (int k = 0; k < 3 && static_cast<int>(out.size()) < limit; ++k) {
      const auto& list = *lists[k];
      while (next[k] < list.size() && taken.count(list[next[k]].key()) != 0) ++next[k];
      if (next[k] < list.size()) {
        taken.insert(list[next[k]].key());
        out.push_back(list[next[k]]);
        ++next[k];
        more = true;
      }
    }
  }
  return out;
}

Status check_maps(const Placement& eplb, const Placement& best, const LoadSteps& search,
                  const LoadSteps& check, const std::string& source) {
  MOEPLAN_TRY_STATUS(eplb.validate());
  MOEPLAN_TRY_STATUS(best.validate());
  if (eplb.num_experts != best.num_experts || eplb.ep_size != best.ep_size ||
      eplb.num_slots != best.num_slots || eplb.num_layers() != best.num_layers()) {
    return Error{"time search: placements '" + eplb.policy + "' and '" + best.policy +
                 "' differ in layers, experts, EP size or slots"};
  }
  for (const LoadSteps* steps : {&search, &check}) {
    if (steps->empty()) {
      return Error{"time search: expected search and check steps of '" + source + "', got none"};
    }
    for (const auto& step : *steps) {
      if (static_cast<int>(step.size()) != eplb.num_layers()) {
        return Error{"time search: a step of '" + source + "' has " + std::to_string(step.size()) +
                     " layers, expected the placement's " + std::to_string(eplb.num_layers())};
      }
      for (const auto& layer : step) {
        if (static_cast<int>(layer.size()) != eplb.num_experts) {
          return Error{"time search: a step of '" + source + "' has " +
                       std::to_string(layer.size()) + " experts, expected " +
                       std::to_string(eplb.num_experts)};
        }
      }
    }
  }
  return Status::Ok();
}

double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

/// Whether `other`'s layer l is faster than `base`'s by more than three standard errors of the
/// paired per-step differences ([step][layer] seconds on the same steps).
bool significant_gain(const std::vector<std::vector<double>>& base,
                      const std::vector<std::vector<double>>& other, int l) {
  const double n = static_cast<double>(base.size());
  if (base.size() < 2) return false;
  double mean = 0.0;
  for (std::size_t t = 0; t < base.size(); ++t) mean += base[t][uz(l)] - other[t][uz(l)];
  mean /= n;
  double var = 0.0;
  for (std::size_t t = 0; t < base.size(); ++t) {
    const double d = base[t][uz(l)] - other[t][uz(l)] - mean;
    var += d * d;
  }
  var /= n - 1.0;
  return mean > 0.0 && mean > 3.0 * std::sqrt(var / n);
}

}  // namespace

Result<std::vector<double>> layer_moe_seconds(const CostContext& ctx, const Layout& layout,
                                              const Placement& placement, const LoadSteps& steps,
                                              const std::string& source) {
  auto per_step = step_layer_seconds(ctx, layout, placement, steps, source);
  if (!per_step) return per_step.error();
  std::vector<double> out(per_step->front().size(), 0.0);
  for (const auto& step : *per_step) {
    for (std::size_t l = 0; l < out.size(); ++l) out[l] += step[l];
  }
  return out;
}

Result<std::vector<double>> subset_layer_seconds(const CostContext& ctx, const Layout& layout,
                                                 const Placement& placement, const LoadSteps& steps,
                                                 const std::string& source,
                                                 const std::vector<int>& subset) {
  if (steps.empty()) return Error{"predicted MoE time: no steps to score '" + source + "' on"};
  const std::size_t layers = steps[0].size();
  if (subset.size() == layers || placement.num_layers() != static_cast<int>(layers)) {
    return layer_moe_seconds(ctx, layout, placement, steps, source);
  }
  std::vector<double> out(layers, 0.0);
  if (subset.empty()) return out;
  // The model cut to the subset's MoE layers: a layer's cost does not depend on the others
  // (cost_layout costs them one by one; the layer count enters the step's dense parts and
  // memory, not costed here).
  models::MoeModel cut = ctx.model;
  cut.num_hidden_layers = static_cast<int>(subset.size());
  cut.moe_layers.assign(subset.size(), true);
  Placement part = placement;
  part.physical_to_logical.clear();
  for (const int l : subset)
    part.physical_to_logical.push_back(placement.physical_to_logical[uz(l)]);
  LoadSteps sub(steps.size());
  for (std::size_t t = 0; t < steps.size(); ++t) {
    if (steps[t].size() != layers) {
      return Error{"predicted MoE time: the steps of '" + source + "' differ in layers"};
    }
    for (const int l : subset) sub[t].push_back(steps[t][uz(l)]);
  }
  const CostContext c{cut, ctx.cluster, ctx.costs, ctx.workload, ctx.load, ctx.placement};
  auto part_seconds = layer_moe_seconds(c, layout, part, sub, source);
  if (!part_seconds) return part_seconds.error();
  // layer_moe_seconds weighs a row by MoE layers / rows: 1 for the cut model, this for the whole.
  const double weight =
      static_cast<double>(ctx.model.num_moe_layers()) / static_cast<double>(layers);
  for (std::size_t i = 0; i < subset.size(); ++i) {
    out[uz(subset[i])] = (*part_seconds)[i] * weight;
  }
  return out;
}

Result<std::vector<std::vector<double>>> step_layer_seconds(const CostContext& ctx,
                                                            const Layout& layout,
                                                            const Placement& placement,
                                                            const LoadSteps& steps,
                                                            const std::string& source) {
  if (steps.empty()) return Error{"predicted MoE time: no steps to score '" + source + "' on"};
  const std::size_t layers = steps[0].size();
  for (const auto& step : steps) {
    if (step.size() != layers) {
      return Error{"predicted MoE time: the steps of '" + source + "' differ in layers"};
    }
  }
  std::vector<std::vector<double>> out(steps.size(), std::vector<double>(layers, 0.0));
  for (std::size_t t = 0; t < steps.size(); ++t) {
    ExpertLoad load;
    load.source = source + " step " + std::to_string(t);
    load.num_experts = steps[t].empty() ? 0 : static_cast<int>(steps[t][0].size());
    load.counts = steps[t];
    CostContext c{ctx.model, ctx.cluster,
                  ctx.costs, ctx.workload,
                  load,      [&placement](int) -> Result<Placement> { return placement; }};
    c.whole_model = false;
    auto cost = cost_layout(c, layout);
    if (!cost) return cost.error();
    if (cost->layers.size() == layers) {
      // Each load row stands for num_moe / rows MoE layers.
      const double weight =
          static_cast<double>(ctx.model.num_moe_layers()) / static_cast<double>(layers);
      for (std::size_t l = 0; l < layers; ++l) out[t][l] = cost->layers[l].total() * weight;
    } else {  // every row alike: cost_layout keeps no per-layer costs
      for (std::size_t l = 0; l < layers; ++l) {
        out[t][l] = cost->moe_seconds / static_cast<double>(layers);
      }
    }
  }
  return out;
}

double step_pairs(const CostContext& ctx, const Layout& layout) {
  return static_cast<double>(layout.ep_size) * layout.tp_size * ctx.workload.tokens_per_gpu *
         ctx.model.num_experts_per_tok;
}

Result<TimeSearchResult> search_placement_by_time(const CostContext& ctx, const Layout& layout,
                                                  const Placement& eplb, const Placement& best,
                                                  const LoadSteps& search, const LoadSteps& check,
                                                  const std::string& source,
                                                  const TimeSearchOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  MOEPLAN_TRY_STATUS(check_maps(eplb, best, search, check, source));
  if (options.max_rounds < 0 || options.candidates < 1 || options.patience < 1) {
    return Error{"time search: expected max_rounds ≥ 0, candidates ≥ 1 and patience ≥ 1"};
  }
  const int layers = eplb.num_layers();
  const double num_search = static_cast<double>(search.size());
  const double num_check = static_cast<double>(check.size());

  TimeSearchResult result;
  TimeSearchReport& rep = result.report;
  rep.search_steps = static_cast<int>(search.size());
  rep.check_steps = static_cast<int>(check.size());
  rep.layers = layers;

  auto eplb_times = layer_moe_seconds(ctx, layout, eplb, search, source);
  if (!eplb_times) return eplb_times.error();
  auto best_times = layer_moe_seconds(ctx, layout, best, search, source);
  if (!best_times) return best_times.error();

  // Start per layer from the faster of the two maps on the search steps (EPLB's on ties).
  Placement current = eplb;
  current.policy = kTimeSearchPolicy;
  std::vector<double> times = *eplb_times;
  for (int l = 0; l < layers; ++l) {
    if ((*best_times)[uz(l)] < (*eplb_times)[uz(l)]) {
      current.physical_to_logical[uz(l)] = best.physical_to_logical[uz(l)];
      times[uz(l)] = (*best_times)[uz(l)];
      ++rep.layers_from_best;
    }
  }
  rep.eplb_search_seconds = sum(*eplb_times) / num_search;
  rep.start_search_seconds = sum(times) / num_search;

  // Each expert's share of the search steps' pairs per layer: the heuristic's rows.
  std::vector<std::vector<double>> share(uz(layers), std::vector<double>(uz(eplb.num_experts)));
  for (int l = 0; l < layers; ++l) {
    double total = 0.0;
    for (const auto& step : search) {
      for (int e = 0; e < eplb.num_experts; ++e) share[uz(l)][uz(e)] += step[uz(l)][uz(e)];
    }
    for (const double v : share[uz(l)]) total += v;
    for (double& v : share[uz(l)]) v = total > 0.0 ? v / total : 1.0 / eplb.num_experts;
  }

  const double pairs = step_pairs(ctx, layout);
  std::vector<std::set<std::array<int, 4>>> tried(uz(layers));
  std::vector<int> idle(uz(layers), 0);
  std::vector<bool> open(uz(layers), true);
  const auto stop = [&options] { return options.cancelled && options.cancelled(); };
  for (int round = 0; round < options.max_rounds; ++round) {
    if (stop()) return Error{kTimeSearchCancelled};
    std::vector<std::vector<Move>> moves(uz(layers));
    bool any = false;
    for (int l = 0; l < layers; ++l) {
      if (!open[uz(l)]) continue;
      moves[uz(l)] = candidate_moves(current.physical_to_logical[uz(l)], share[uz(l)], pairs,
                                     current.ep_size, tried[uz(l)], options.candidates);
      if (moves[uz(l)].empty()) {
        open[uz(l)] = false;
        continue;
      }
      any = true;
    }
    if (!any) break;
    ++rep.rounds;
    // Candidate k of every layer costed together (layers are costed independently).
    std::vector<int> chosen(uz(layers), -1);
    std::vector<double> chosen_time = times;
    for (int k = 0; k < options.candidates; ++k) {
      if (stop()) return Error{kTimeSearchCancelled};
      Placement trial = current;
      bool used = false;
      for (int l = 0; l < layers; ++l) {
        if (k < static_cast<int>(moves[uz(l)].size())) {
          apply_move(trial.physical_to_logical[uz(l)], moves[uz(l)][uz(k)]);
          used = true;
          ++rep.moves_tried;
        }
      }
      if (!used) break;
      // Only the layers with a k-th candidate are costed.
      std::vector<int> costed;
      for (int l = 0; l < layers; ++l) {
        if (k < static_cast<int>(moves[uz(l)].size())) costed.push_back(l);
      }
      auto t = subset_layer_seconds(ctx, layout, trial, search, source, costed);
      if (!t) return t.error();
      for (int l = 0; l < layers; ++l) {
        if (k >= static_cast<int>(moves[uz(l)].size())) continue;
        // A kept move must lower the layer's time by more than rounding.
        if ((*t)[uz(l)] < chosen_time[uz(l)] * (1.0 - 1e-9)) {
          chosen_time[uz(l)] = (*t)[uz(l)];
          chosen[uz(l)] = k;
        }
      }
    }
    for (int l = 0; l < layers; ++l) {
      if (moves[uz(l)].empty()) continue;
      if (chosen[uz(l)] >= 0) {
        apply_move(current.physical_to_logical[uz(l)], moves[uz(l)][uz(chosen[uz(l)])]);
        times[uz(l)] = chosen_time[uz(l)];
        tried[uz(l)].clear();
        idle[uz(l)] = 0;
        ++rep.moves_kept;
      } else {
        for (const Move& m : moves[uz(l)]) tried[uz(l)].insert(m.key());
        if (++idle[uz(l)] >= options.patience) open[uz(l)] = false;
      }
    }
    if (options.progress) {
      const auto settled = static_cast<int>(std::count(open.begin(), open.end(), false));
      options.progress(settled, layers, rep.rounds, sum(times) / num_search);
    }
  }
  rep.refined_search_seconds = sum(times) / num_search;
  if (options.progress && std::find(open.begin(), open.end(), true) != open.end()) {
    options.progress(layers, layers, rep.rounds, rep.refined_search_seconds);  // out of rounds
  }

  // On the check steps a layer leaves EPLB's map only for a significantly faster one: of
  // `best`'s and the refined map, the faster whose mean gain per step over EPLB's is more than
  // three standard errors of the paired per-step gains (best's own rule, on time). Never slower
  // there than EPLB's map, and noise is not taken for a gain.
  if (stop()) return Error{kTimeSearchCancelled};
  auto eplb_steps = step_layer_seconds(ctx, layout, eplb, check, source);
  if (!eplb_steps) return eplb_steps.error();
  auto best_steps = step_layer_seconds(ctx, layout, best, check, source);
  if (!best_steps) return best_steps.error();
  auto refined_steps = step_layer_seconds(ctx, layout, current, check, source);
  if (!refined_steps) return refined_steps.error();
  const auto column = [](const std::vector<std::vector<double>>& m, int l) {
    double total = 0.0;
    for (const auto& step : m) total += step[uz(l)];
    return total;
  };
  std::vector<double> eplb_check(uz(layers)), best_check(uz(layers));
  double total = 0.0;
  for (int l = 0; l < layers; ++l) {
    eplb_check[uz(l)] = column(*eplb_steps, l);
    best_check[uz(l)] = column(*best_steps, l);
    const double refined = column(*refined_steps, l);
    // A layer whose search kept no move holds its starting map: that is EPLB's or best's.
    const auto& map = current.physical_to_logical[uz(l)];
    const bool moved =
        map != eplb.physical_to_logical[uz(l)] && map != best.physical_to_logical[uz(l)];
    const bool best_gains = significant_gain(*eplb_steps, *best_steps, l);
    const bool refined_wins = moved && significant_gain(*eplb_steps, *refined_steps, l) &&
                              !(best_check[uz(l)] < refined && best_gains);
    if (refined_wins) {
      ++rep.layers_refined;
      total += refined;
    } else if (best_gains) {
      current.physical_to_logical[uz(l)] = best.physical_to_logical[uz(l)];
      ++rep.layers_best;
      total += best_check[uz(l)];
    } else {
      current.physical_to_logical[uz(l)] = eplb.physical_to_logical[uz(l)];
      total += eplb_check[uz(l)];
    }
  }
  rep.best_check_seconds = sum(best_check) / num_check;
  rep.eplb_check_seconds = sum(eplb_check) / num_check;
  rep.result_check_seconds = total / num_check;
  MOEPLAN_TRY_STATUS(current.validate());
  result.placement = std::move(current);
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

}  // namespace moeplan::planner
