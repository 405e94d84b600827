// Balance and spread figures of placements.
#include "planner/placement/placement_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "models/index.hpp"

namespace moeplan::planner {

namespace {

Status check_shapes(int num_layers, int num_experts, const Placement& p, const std::string& what) {
  if (num_experts != p.num_experts) {
    return Error{what + " has " + std::to_string(num_experts) + " experts but placement '" +
                 p.policy + "' has " + std::to_string(p.num_experts)};
  }
  if (p.num_layers() != 1 && p.num_layers() != num_layers) {
    return Error{what + " has " + std::to_string(num_layers) + " layers but placement '" +
                 p.policy + "' has " + std::to_string(p.num_layers())};
  }
  return p.validate();
}

const std::vector<int>& map_of(const Placement& p, int layer) {
  return p.physical_to_logical[uz(p.num_layers() == 1 ? 0 : layer)];
}

// Balancedness of one layer; nullopt-like −1 when the layer carries no tokens.
double layer_balance(const std::vector<double>& counts, const std::vector<int>& map, int num_gpus) {
  const auto loads = gpu_loads(counts, map, num_gpus);
  double total = 0.0;
  for (const double x : loads) total += x;
  const double peak = *std::max_element(loads.begin(), loads.end());
  if (!(peak > 0.0)) return -1.0;
  return total / num_gpus / peak;
}

}  // namespace

std::vector<double> gpu_loads(const std::vector<double>& counts, const std::vector<int>& map,
                              int num_gpus) {
  std::vector<int> replicas(counts.size(), 0);
  for (const int e : map) ++replicas[uz(e)];
  std::vector<double> loads(uz(num_gpus), 0.0);
  const std::size_t per_gpu = map.size() / uz(num_gpus);
  for (std::size_t s = 0; s < map.size(); ++s) {
    const auto e = uz(map[s]);
    loads[s / per_gpu] += counts[e] / replicas[e];
  }
  return loads;
}

Result<BalanceFigures> balance_figures(const ExpertLoad& load, const Placement& placement) {
  MOEPLAN_TRY_STATUS(
      check_shapes(load.num_layers(), load.num_experts, placement, "load '" + load.source + "'"));
  BalanceFigures f;
  double sum_balance = 0.0, sum_imbalance = 0.0, sum_bound = 0.0;
  int used = 0;
  for (int l = 0; l < load.num_layers(); ++l) {
    const auto& counts = load.counts[uz(l)];
    const auto loads = gpu_loads(counts, map_of(placement, l), placement.ep_size);
    double total = 0.0;
    for (const double x : loads) total += x;
    const double peak = *std::max_element(loads.begin(), loads.end());
    if (!(peak > 0.0)) {
      f.layer_balancedness.push_back(1.0);
      continue;
    }
    const double mean = total / placement.ep_size;
    const auto cnt = replicate_counts(counts, placement.num_slots);
    double replica_peak = 0.0;
    for (std::size_t e = 0; e < counts.size(); ++e) {
      replica_peak = std::max(replica_peak, counts[e] / cnt[e]);
    }
    f.layer_balancedness.push_back(mean / peak);
    sum_balance += mean / peak;
    sum_imbalance += (peak - mean) / mean;
    sum_bound += mean / std::max(mean, replica_peak);
    ++used;
  }
  if (used > 0) {
    f.balancedness = sum_balance / used;
    f.imbalance = sum_imbalance / used;
    f.upper_bound = sum_bound / used;
  }
  return f;
}

Result<StepScores> score_steps(const std::vector<std::vector<std::vector<double>>>& steps,
                               const Placement& placement) {
  StepScores s;
  if (steps.empty()) return Error{"step scores: expected at least one step"};
  std::vector<double> per_step;
  per_step.reserve(steps.size());
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const auto& step = steps[k];
    int num_experts = step.empty() ? 0 : static_cast<int>(step[0].size());
    for (const auto& row : step) {
      if (static_cast<int>(row.size()) != num_experts) num_experts = -1;
    }
    MOEPLAN_TRY_STATUS(check_shapes(static_cast<int>(step.size()), num_experts, placement,
                                    "step " + std::to_string(k)));
    double sum = 0.0;
    int used = 0;
    for (int l = 0; l < static_cast<int>(step.size()); ++l) {
      const double b = layer_balance(step[uz(l)], map_of(placement, l), placement.ep_size);
      if (b < 0.0) continue;
      sum += b;
      ++used;
    }
    per_step.push_back(used > 0 ? sum / used : 1.0);
  }
  s.num_steps = static_cast<int>(per_step.size());
  double sum = 0.0;
  for (const double b : per_step) sum += b;
  s.mean_balancedness = sum / static_cast<double>(per_step.size());
  std::sort(per_step.begin(), per_step.end());
  // Nearest-rank 1st percentile: the value 99 % of steps reach or exceed.
  const auto rank =
      static_cast<std::size_t>(std::ceil(0.01 * static_cast<double>(per_step.size())));
  s.p99_balancedness = per_step[rank == 0 ? 0 : rank - 1];
  return s;
}

std::vector<std::vector<std::vector<double>>> sample_steps(const ExpertLoad& load, int num_steps,
                                                           std::int64_t pairs_per_step,
                                                           std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<std::vector<double>>> steps(
      uz(num_steps), std::vector<std::vector<double>>(uz(load.num_layers())));
  for (int l = 0; l < load.num_layers(); ++l) {
    const auto f = load.fractions(l);
    for (int s = 0; s < num_steps; ++s) {
      // Sequential binomials: expert e takes Binomial(remaining, f_e / remaining mass).
      std::vector<double> row(f.size(), 0.0);
      std::int64_t remaining = pairs_per_step;
      double mass = 1.0;
      for (std::size_t e = 0; e < f.size() && remaining > 0; ++e) {
        if (e + 1 == f.size() || mass <= f[e]) {
          row[e] = static_cast<double>(remaining);
          remaining = 0;
          break;
        }
        const double p = std::clamp(f[e] / mass, 0.0, 1.0);
        std::binomial_distribution<std::int64_t> draw(remaining, p);
        const std::int64_t k = draw(rng);
        row[e] = static_cast<double>(k);
        remaining -= k;
        mass -= f[e];
      }
      steps[uz(s)][uz(l)] = std::move(row);
    }
  }
  return steps;
}

StepSamples samples_by_layer(const std::vector<std::vector<std::vector<double>>>& steps) {
  StepSamples out(steps.empty() ? 0 : steps[0].size());
  for (const auto& step : steps) {
    for (std::size_t l = 0; l < step.size() && l < out.size(); ++l) out[l].push_back(step[l]);
  }
  return out;
}

ExpertLoad TokenTrace::counts(const std::string& source) const {
  ExpertLoad load;
  load.source = source;
  load.num_experts = num_experts;
  for (const auto& ids : topk_ids) {
    std::vector<double> row(uz(num_experts), 0.0);
    for (const int e : ids) row[uz(e)] += 1.0;
    load.counts.push_back(std::move(row));
  }
  return load;
}

CoActivation TokenTrace::coactivation() const {
  CoActivation c;
  c.num_experts = num_experts;
  const auto e2 = uz(num_experts) * uz(num_experts);
  for (int l = 0; l < num_layers(); ++l) {
    std::vector<double> pairs(e2, 0.0);
    const auto& ids = topk_ids[uz(l)];
    for (int t = 0; t < num_tokens(l); ++t) {
      for (int a = 0; a < top_k; ++a) {
        for (int b = a + 1; b < top_k; ++b) {
          const int x = ids[uz(t * top_k + a)];
          const int y = ids[uz(t * top_k + b)];
          if (x == y) continue;
          pairs[uz(x) * uz(num_experts) + uz(y)] += 1.0;
          pairs[uz(y) * uz(num_experts) + uz(x)] += 1.0;
        }
      }
    }
    c.pairs.push_back(std::move(pairs));
  }
  return c;
}

Result<TraceFigures> trace_figures(const TokenTrace& trace, const Placement& placement,
                                   int num_nodes) {
  MOEPLAN_TRY_STATUS(check_shapes(trace.num_layers(), trace.num_experts, placement, "trace"));
  if (num_nodes <= 0 || placement.ep_size % num_nodes != 0) {
    return Error{"trace figures: expected the GPU count to be a multiple of the node count"};
  }
  const int gpus_per_node = placement.ep_size / num_nodes;
  const int spg = placement.slots_per_rank();
  TraceFigures f;
  double tokens = 0.0, nodes_sum = 0.0, gpus_sum = 0.0;
  std::vector<int> node_stamp(uz(num_nodes), -1), gpu_stamp(uz(placement.ep_size), -1);
  int stamp = -1;
  for (int l = 0; l < trace.num_layers(); ++l) {
    const auto& map = map_of(placement, l);
    std::vector<std::vector<int>> where(uz(trace.num_experts));
    for (std::size_t s = 0; s < map.size(); ++s) where[uz(map[s])].push_back(static_cast<int>(s));
    const auto& ids = trace.topk_ids[uz(l)];
    for (int t = 0; t < trace.num_tokens(l); ++t) {
      ++stamp;
      int nodes = 0, gpus = 0;
      std::vector<int> chosen_node(uz(trace.top_k), -1);
      // Experts with a single node first, then replicated ones prefer nodes already reached.
      for (int pass = 0; pass < 2; ++pass) {
        for (int k = 0; k < trace.top_k; ++k) {
          const auto& slots = where[uz(ids[uz(t * trace.top_k + k)])];
          int first_node = slots[0] / spg / gpus_per_node;
          bool single = true;
          for (const int s : slots) single = single && s / spg / gpus_per_node == first_node;
          if ((pass == 0) != single) continue;
          int node = first_node;
          for (const int s : slots) {
            if (node_stamp[uz(s / spg / gpus_per_node)] == stamp) {
              node = s / spg / gpus_per_node;
              break;
            }
          }
          if (node_stamp[uz(node)] != stamp) {
            node_stamp[uz(node)] = stamp;
            ++nodes;
          }
          chosen_node[uz(k)] = node;
        }
      }
      for (int k = 0; k < trace.top_k; ++k) {
        for (const int s : where[uz(ids[uz(t * trace.top_k + k)])]) {
          if (s / spg / gpus_per_node != chosen_node[uz(k)]) continue;
          if (gpu_stamp[uz(s / spg)] != stamp) {
            gpu_stamp[uz(s / spg)] = stamp;
            ++gpus;
          }
          break;
        }
      }
      nodes_sum += nodes;
      gpus_sum += gpus;
      tokens += 1.0;
    }
  }
  if (tokens > 0.0) {
    f.nodes_per_token = nodes_sum / tokens;
    f.gpus_per_token = gpus_sum / tokens;
    f.cross_node_fraction = f.nodes_per_token * (num_nodes - 1) / num_nodes / trace.top_k;
  }
  return f;
}

}  // namespace moeplan::planner
