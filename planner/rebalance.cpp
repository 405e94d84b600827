// Rebalancing over time: fixed against periodic re-fits, with the copies each re-fit costs.
#include "planner/rebalance.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "models/index.hpp"
#include "planner/placement/placement_metrics.hpp"

namespace moeplan::planner {

namespace {

ExpertLoad sum_steps(const LoadSteps& steps, int first, int last, const std::string& source) {
  ExpertLoad load;
  load.source = source + " steps [" + std::to_string(first) + ", " + std::to_string(last) + ")";
  load.num_experts = static_cast<int>(steps[0][0].size());
  load.counts.assign(steps[0].size(), std::vector<double>(uz(load.num_experts), 0.0));
  for (int s = first; s < last; ++s) {
    for (std::size_t l = 0; l < steps[uz(s)].size(); ++l) {
      for (std::size_t e = 0; e < steps[uz(s)][l].size(); ++e) {
        load.counts[l][e] += steps[uz(s)][l][e];
      }
    }
  }
  return load;
}

}  // namespace

Result<double> step_moe_seconds(const CostContext& ctx, const Layout& layout,
                                const Placement& placement, const ExpertLoad& load) {
  CostContext c{ctx.model, ctx.cluster,
                ctx.costs, ctx.workload,
                load,      [&placement](int) -> Result<Placement> { return placement; }};
  c.whole_model = false;  // placement changes the MoE blocks alone
  auto cost = cost_layout(c, layout);
  if (!cost) return cost.error();
  return cost->moe_seconds;
}

Result<double> mean_moe_seconds(const CostContext& ctx, const Layout& layout,
                                const Placement& placement, const LoadSteps& steps,
                                const std::string& source) {
  if (steps.empty()) return Error{"predicted MoE time: no steps to score '" + source + "' on"};
  double total = 0.0;
  for (int t = 0; t < static_cast<int>(steps.size()); ++t) {
    auto seconds = step_moe_seconds(ctx, layout, placement, sum_steps(steps, t, t + 1, source));
    if (!seconds) return seconds.error();
    total += *seconds;
  }
  return total / static_cast<double>(steps.size());
}

Result<double> balanced_reference_seconds(const CostContext& ctx, const Layout& layout,
                                          const LoadSteps& steps, const std::string& source) {
  if (steps.empty() || steps[0].empty() || steps[0][0].empty()) {
    return Error{"balanced reference: no steps of '" + source + "' to score"};
  }
  const int num_experts = static_cast<int>(steps[0][0].size());
  if (layout.ep_size < 1 || num_experts % layout.ep_size != 0) {
    return Error{"balanced reference: " + std::to_string(num_experts) +
                 " experts do not divide evenly over ep_size " + std::to_string(layout.ep_size)};
  }
  LoadSteps even(steps.size());
  for (std::size_t t = 0; t < steps.size(); ++t) {
    even[t].reserve(steps[t].size());
    for (const auto& layer : steps[t]) {
      double total = 0.0;
      for (const double c : layer) total += c;
      even[t].emplace_back(layer.size(), total / static_cast<double>(layer.size()));
    }
  }
  const Placement contiguous =
      contiguous_placement(static_cast<int>(steps[0].size()), num_experts, layout.ep_size);
  return mean_moe_seconds(ctx, layout, contiguous, even, source + " (balanced reference)");
}

Result<ExpertMoves> expert_moves(const Placement& from, const Placement& to, const Layout& layout,
                                 const Cluster& cluster, double expert_bytes,
                                 int layer_multiplicity) {
  if (from.num_layers() != to.num_layers() || from.num_experts != to.num_experts ||
      from.ep_size != to.ep_size || from.num_slots != to.num_slots) {
    return Error{
        "rebalance: the placements before and after differ in layers, experts, EP size "
        "or slots"};
  }
  if (from.ep_size != layout.ep_size) {
    return Error{"rebalance: placement for ep_size " + std::to_string(from.ep_size) + ", layout " +
                 layout.shape_name()};
  }
  if (layout.dp_size * layout.group_size() > cluster.num_gpus()) {
    return Error{"rebalance: layout " + layout.shape_name() + " needs " +
                 std::to_string(layout.dp_size * layout.group_size()) + " GPUs, cluster '" +
                 cluster.name() + "' has " + std::to_string(cluster.num_gpus())};
  }
  if (!(expert_bytes >= 0.0) || layer_multiplicity < 1) {
    return Error{"rebalance: expected expert bytes ≥ 0 and a layer multiplicity ≥ 1"};
  }
  const int per_node = std::max(1, cluster.info().gpus_per_node);
  const int spr = from.slots_per_rank();
  ExpertMoves out;
  std::vector<double> sent(uz(cluster.num_gpus()), 0.0);
  // Flows between the same pair of GPUs are merged (one transfer of all the layers' bytes).
  std::map<std::pair<int, int>, double> merged;
  const double bytes = expert_bytes * layer_multiplicity;
  for (int l = 0; l < from.num_layers(); ++l) {
    const auto& before = from.physical_to_logical[uz(l)];
    const auto& after = to.physical_to_logical[uz(l)];
    // The EP ranks holding each expert before.
    std::vector<std::vector<int>> holders(uz(from.num_experts));
    for (int s = 0; s < from.num_slots; ++s) {
      auto& h = holders[uz(before[uz(s)])];
      if (h.empty() || h.back() != s / spr) h.push_back(s / spr);
    }
    for (int r = 0; r < from.ep_size; ++r) {
      const std::set<int> had(before.begin() + r * spr, before.begin() + (r + 1) * spr);
      const std::set<int> has(after.begin() + r * spr, after.begin() + (r + 1) * spr);
      for (const int e : has) {
        if (had.count(e) > 0) continue;
        ++out.copies;
        for (int t = 0; t < layout.tp_size; ++t) {
          for (int rep = 0; rep < layout.dp_size; ++rep) {
            const int dst = layout.gpu(rep, r, t);
            int src = -1;
            bool same_node = false;
            for (const int q : holders[uz(e)]) {
              const int g = layout.gpu(rep, q, t);
              const bool near = g / per_node == dst / per_node;
              if (src < 0 || (near && !same_node) ||
                  (near == same_node && sent[uz(g)] < sent[uz(src)])) {
                src = g;
                same_node = near;
              }
            }
            sent[uz(src)] += bytes;
            out.bytes += bytes;
            if (!same_node) out.cross_node += bytes;
            merged[{src, dst}] += bytes;
          }
        }
      }
    }
  }
  for (const auto& [pair, b] : merged) out.flows.push_back(Flow{pair.first, pair.second, b});
  if (!out.flows.empty()) {
    const LinkLoad load = cluster.route(out.flows);
    out.seconds = load.busiest_seconds + load.max_path_latency;
    if (load.busiest_edge >= 0) out.busiest_link = cluster.link_name(load.busiest_edge);
  }
  return out;
}

namespace {

// Greedy assignment on an n × n overlap: the largest overlap first (ties: the lowest row, then
// the lowest column). Returns the column of each row.
std::vector<std::size_t> greedy_match(const std::vector<std::vector<double>>& overlap) {
  const std::size_t n = overlap.size();
  std::vector<bool> row_done(n, false), col_done(n, false);
  std::vector<std::size_t> col_of(n, 0);
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t bi = n, bj = n;
    for (std::size_t i = 0; i < n; ++i) {
      if (row_done[i]) continue;
      for (std::size_t j = 0; j < n; ++j) {
        if (col_done[j]) continue;
        if (bi == n || overlap[i][j] > overlap[bi][bj]) {
          bi = i;
          bj = j;
        }
      }
    }
    row_done[bi] = col_done[bj] = true;
    col_of[bi] = bj;
  }
  return col_of;
}

// Experts held by the ranks `ranks` of one layer's map (slots_per_rank `spr`), with multiplicity
// dropped.
std::set<int> held(const std::vector<int>& map, const std::vector<int>& ranks, int spr) {
  std::set<int> out;
  for (const int r : ranks) out.insert(map.begin() + r * spr, map.begin() + (r + 1) * spr);
  return out;
}

double common(const std::set<int>& a, const std::set<int>& b) {
  double n = 0.0;
  for (const int e : b) n += static_cast<double>(a.count(e));
  return n;
}

}  // namespace

Placement align_placement(const Placement& previous, Placement next, const Layout& layout,
                          const Cluster& cluster) {
  if (previous.num_layers() != next.num_layers() || previous.ep_size != next.ep_size ||
      previous.num_slots != next.num_slots || next.ep_size != layout.ep_size) {
    return next;
  }
  const int per_node = std::max(1, cluster.info().gpus_per_node);
  const int spr = next.slots_per_rank();
  // EP ranks by node (of their first TP GPU), in rank order.
  std::map<int, std::vector<int>> by_node;
  for (int r = 0; r < next.ep_size; ++r) by_node[layout.gpu(0, r, 0) / per_node].push_back(r);
  std::vector<std::vector<int>> nodes;
  for (auto& [node, ranks] : by_node) nodes.push_back(std::move(ranks));
  // Whole nodes may trade places only when every node holds as many ranks.
  const bool same_size = std::all_of(
      nodes.begin(), nodes.end(), [&](const auto& r) { return r.size() == nodes.front().size(); });
  for (int l = 0; l < next.num_layers(); ++l) {
    const auto& before = previous.physical_to_logical[uz(l)];
    auto& after = next.physical_to_logical[uz(l)];
    const std::vector<int> fresh = after;
    // Each rank's experts before and in the new map, once.
    std::vector<std::set<int>> had_rank, has_rank;
    for (int r = 0; r < next.ep_size; ++r) {
      had_rank.push_back(held(before, {r}, spr));
      has_rank.push_back(held(fresh, {r}, spr));
    }
    // 1. Nodes: node i takes the new map's node block node_of[i].
    std::vector<std::size_t> node_of(nodes.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) node_of[i] = i;
    if (same_size && nodes.size() > 1) {
      std::vector<std::set<int>> had_node, has_node;
      for (const auto& ranks : nodes) {
        had_node.push_back(held(before, ranks, spr));
        has_node.push_back(held(fresh, ranks, spr));
      }
      std::vector<std::vector<double>> overlap(nodes.size(), std::vector<double>(nodes.size()));
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        for (std::size_t j = 0; j < nodes.size(); ++j) {
          overlap[i][j] = common(had_node[i], has_node[j]);
        }
      }
      node_of = greedy_match(overlap);
    }
    // 2. Ranks inside each node: rank i of node n takes block rank_of[i] of its node block.
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      const auto& dst = nodes[n];
      const auto& src = nodes[node_of[n]];
      std::vector<std::vector<double>> overlap(dst.size(), std::vector<double>(src.size()));
      for (std::size_t i = 0; i < dst.size(); ++i) {
        for (std::size_t j = 0; j < src.size(); ++j) {
          overlap[i][j] = common(had_rank[uz(dst[i])], has_rank[uz(src[j])]);
        }
      }
      const auto rank_of = greedy_match(overlap);
      for (std::size_t i = 0; i < dst.size(); ++i) {
        const int rj = src[rank_of[i]];
        std::copy(fresh.begin() + rj * spr, fresh.begin() + (rj + 1) * spr,
                  after.begin() + dst[i] * spr);
      }
    }
  }
  return next;
}

Result<RebalanceResult> simulate_rebalancing(const LoadSteps& steps, const std::string& source,
                                             const CostContext& ctx, const Layout& layout,
                                             const RebalanceRequest& request) {
  const models::MoeModel& m = ctx.model;
  const int num_steps = static_cast<int>(steps.size());
  if (num_steps < 2) {
    return Error{"rebalance: load '" + source + "' has " + std::to_string(num_steps) +
                 " step(s); expected a load with steps ([steps][layers][experts], at least 2)"};
  }
  const auto num_layers = steps[0].size();
  const int num_moe = m.num_moe_layers();
  if (num_layers != 1 && static_cast<int>(num_layers) != num_moe) {
    return Error{"rebalance: load '" + source + "' has " + std::to_string(num_layers) +
                 " layers per step; expected 1 or the " + std::to_string(num_moe) +
                 " MoE layers of '" + m.name + "'"};
  }
  for (int s = 0; s < num_steps; ++s) {
    const auto& step = steps[uz(s)];
    bool ok = step.size() == num_layers;
    for (const auto& row : step) ok = ok && static_cast<int>(row.size()) == m.num_experts;
    if (!ok) {
      return Error{"rebalance: load '" + source + "' step " + std::to_string(s) + ": expected " +
                   std::to_string(num_layers) + " layers of " + std::to_string(m.num_experts) +
                   " experts (the model's)"};
    }
  }
  if (request.every.empty() || request.windows.empty()) {
    return Error{"rebalance: expected at least one {every} and one {window}", "every"};
  }
  for (const int n : request.every) {
    if (n < 1) return Error{"rebalance: expected {every} ≥ 1, got " + std::to_string(n), "every"};
  }
  for (const int w : request.windows) {
    if (w < 1) {
      return Error{"rebalance: expected {window} ≥ 1, got " + std::to_string(w), "window"};
    }
  }
  if (request.record_steps < 1) {
    return Error{"rebalance: expected {record_steps} ≥ 1", "record_steps"};
  }
  const int first = *std::max_element(request.windows.begin(), request.windows.end());
  if (first >= num_steps) {
    return Error{"rebalance: load '" + source + "' has " + std::to_string(num_steps) +
                     " steps; a {window} of " + std::to_string(first) +
                     " leaves none to score (expected windows < " + std::to_string(num_steps) + ")",
                 "window"};
  }
  if (layout.ep_size != request.config.num_gpus) {
    return Error{"rebalance: placement for " + std::to_string(request.config.num_gpus) +
                 " EP ranks, layout " + layout.shape_name()};
  }

  RebalanceResult out;
  out.policy = policy_name(request.policy);
  out.num_steps = num_steps;
  out.first_scored = first;
  out.record_steps = request.record_steps;
  out.expert_bytes = m.expert_weight_bytes(layout.tp_size);
  const int multiplicity = num_layers == 1 ? num_moe : 1;

  // Each step's load once, and the scores of (step, placement) pairs once: schemes that hold
  // the same map at a step (the fixed one, re-fits on the same window) share its cost.
  std::vector<ExpertLoad> step_load;
  for (int t = 0; t < num_steps; ++t) step_load.push_back(sum_steps(steps, t, t + 1, source));
  std::map<std::pair<int, std::vector<std::vector<int>>>, std::pair<double, double>> scored;

  // Placements fitted on steps [a, b), shared by the schemes that fit the same steps.
  std::map<std::pair<int, int>, Placement> fitted;
  auto fit = [&](int a, int b) -> Result<Placement> {
    auto it = fitted.find({a, b});
    if (it != fitted.end()) return it->second;
    auto placed = place_experts(sum_steps(steps, a, b, source), request.policy, request.config);
    if (!placed) return placed.error();
    return fitted.emplace(std::make_pair(a, b), std::move(placed->placement)).first->second;
  };
  // One forward pass of step t on a placement.
  auto score = [&](int t, const Placement& p, double& seconds, double& balance) -> Status {
    auto key = std::make_pair(t, p.physical_to_logical);
    if (auto it = scored.find(key); it != scored.end()) {
      std::tie(seconds, balance) = it->second;
      return Status::Ok();
    }
    const ExpertLoad& load = step_load[uz(t)];
    auto cost = step_moe_seconds(ctx, layout, p, load);
    if (!cost) return cost.error();
    seconds = *cost;
    auto f = balance_figures(load, p);
    if (!f) return f.error();
    balance = f->balancedness;
    scored.emplace(std::move(key), std::make_pair(seconds, balance));
    return Status::Ok();
  };
  auto run = [&](int every, int window) -> Result<RebalanceScheme> {
    RebalanceScheme r;
    r.every = every;
    r.window = every == 0 ? first : window;
    auto p = fit(first - r.window, first);
    if (!p) return p.error();
    Placement current = std::move(*p);
    double balance_sum = 0.0;
    for (int t = first; t < num_steps; ++t) {
      double wait = 0.0;
      if (every > 0 && t > first && (t - first) % every == 0) {
        auto next = fit(t - window, t);
        if (!next) return next.error();
        if (request.align) *next = align_placement(current, std::move(*next), layout, ctx.cluster);
        auto moves =
            expert_moves(current, *next, layout, ctx.cluster, out.expert_bytes, multiplicity);
        if (!moves) return moves.error();
        ++r.rebalances;
        r.bytes_moved += moves->bytes;
        r.cross_node_bytes += moves->cross_node;
        wait = moves->seconds;
        current = std::move(*next);
      }
      double seconds = 0.0, balance = 0.0;
      MOEPLAN_TRY_STATUS(score(t, current, seconds, balance));
      r.move_seconds += wait;
      r.step_seconds += seconds * request.record_steps;
      balance_sum += balance;
      r.series_step_seconds.push_back(seconds);
      r.series_move_seconds.push_back(wait);
      r.series_balancedness.push_back(balance);
    }
    const double passes = static_cast<double>(num_steps - first) * request.record_steps;
    r.net_seconds_per_step = (r.step_seconds + r.move_seconds) / passes;
    r.mean_balancedness = balance_sum / (num_steps - first);
    return r;
  };

  auto fixed = run(0, 0);
  if (!fixed) return fixed.error();
  out.schemes.push_back(std::move(*fixed));
  for (const int n : request.every) {
    for (const int w : request.windows) {
      auto r = run(n, w);
      if (!r) return r.error();
      out.schemes.push_back(std::move(*r));
    }
  }
  for (std::size_t i = 1; i < out.schemes.size(); ++i) {
    if (out.schemes[i].net_seconds_per_step <
        out.schemes[uz(out.recommended)].net_seconds_per_step) {
      out.recommended = static_cast<int>(i);
    }
  }
  return out;
}

}  // namespace moeplan::planner
