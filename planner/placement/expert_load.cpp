// Expert loads, placements and the per-slot token counts they imply.
#include "planner/placement/expert_load.hpp"

#include <numeric>

namespace moeplan::planner {

std::vector<double> ExpertLoad::fractions(int layer) const {
  const auto n = static_cast<std::size_t>(num_experts);
  std::vector<double> f(n, n > 0 ? 1.0 / static_cast<double>(n) : 0.0);
  if (layer < 0 || layer >= num_layers()) return f;
  const auto& row = counts[static_cast<std::size_t>(layer)];
  const double total = std::accumulate(row.begin(), row.end(), 0.0);
  if (row.size() != n || total <= 0.0) return f;
  for (std::size_t e = 0; e < n; ++e) f[e] = row[e] / total;
  return f;
}

ExpertLoad ExpertLoad::uniform(int num_layers, int num_experts) {
  ExpertLoad l;
  l.source = "uniform";
  l.num_experts = num_experts;
  l.counts.assign(static_cast<std::size_t>(num_layers),
                  std::vector<double>(static_cast<std::size_t>(num_experts), 1.0));
  return l;
}

Status Placement::validate() const {
  const std::string what = "placement '" + policy + "'";
  if (num_experts <= 0 || ep_size <= 0) {
    return Error{what + ": expected positive num_experts and ep_size"};
  }
  if (num_slots < num_experts || num_slots % ep_size != 0) {
    return Error{what + ": expected num_slots ≥ num_experts=" + std::to_string(num_experts) +
                 " and a multiple of ep_size=" + std::to_string(ep_size) + ", got " +
                 std::to_string(num_slots)};
  }
  if (physical_to_logical.empty()) return Error{what + ": expected at least one layer"};
  for (std::size_t l = 0; l < physical_to_logical.size(); ++l) {
    const auto& row = physical_to_logical[l];
    if (static_cast<int>(row.size()) != num_slots) {
      return Error{what + ": layer " + std::to_string(l) + " has " + std::to_string(row.size()) +
                   " slots, expected " + std::to_string(num_slots)};
    }
    std::vector<int> seen(static_cast<std::size_t>(num_experts), 0);
    for (const int e : row) {
      if (e < 0 || e >= num_experts) {
        return Error{what + ": layer " + std::to_string(l) + " names expert " + std::to_string(e) +
                     ", expected [0, " + std::to_string(num_experts - 1) + "]"};
      }
      ++seen[static_cast<std::size_t>(e)];
    }
    for (int e = 0; e < num_experts; ++e) {
      if (seen[static_cast<std::size_t>(e)] == 0) {
        return Error{what + ": layer " + std::to_string(l) + " has no slot for expert " +
                     std::to_string(e)};
      }
    }
  }
  return Status::Ok();
}

Placement contiguous_placement(int num_layers, int num_experts, int ep_size) {
  Placement p;
  p.policy = "contiguous";
  p.num_experts = num_experts;
  p.ep_size = ep_size;
  p.num_slots = num_experts;
  std::vector<int> row(static_cast<std::size_t>(num_experts));
  std::iota(row.begin(), row.end(), 0);
  p.physical_to_logical.assign(static_cast<std::size_t>(num_layers), row);
  return p;
}

Result<std::vector<std::vector<double>>> slot_tokens(const ExpertLoad& load,
                                                     const Placement& placement,
                                                     double routed_pairs) {
  if (load.num_experts != placement.num_experts) {
    return Error{"load '" + load.source + "' has " + std::to_string(load.num_experts) +
                 " experts but placement '" + placement.policy + "' has " +
                 std::to_string(placement.num_experts)};
  }
  if (placement.num_layers() != 1 && placement.num_layers() != load.num_layers()) {
    return Error{"load '" + load.source + "' has " + std::to_string(load.num_layers()) +
                 " layers but placement '" + placement.policy + "' has " +
                 std::to_string(placement.num_layers())};
  }
  MOEPLAN_TRY_STATUS(placement.validate());
  std::vector<std::vector<double>> out;
  out.reserve(static_cast<std::size_t>(load.num_layers()));
  for (int l = 0; l < load.num_layers(); ++l) {
    const auto& map =
        placement
            .physical_to_logical[static_cast<std::size_t>(placement.num_layers() == 1 ? 0 : l)];
    if (l > 0) {
      // A layer with the previous one's counts and map (a uniform load, one placement for all
      // layers) has its slot counts too.
      const auto prev = static_cast<std::size_t>(l - 1);
      const auto& prev_map = placement.physical_to_logical[placement.num_layers() == 1 ? 0 : prev];
      if (&prev_map == &map || prev_map == map) {
        if (load.counts[prev] == load.counts[static_cast<std::size_t>(l)]) {
          out.push_back(out.back());
          continue;
        }
      }
    }
    const std::vector<double> f = load.fractions(l);
    std::vector<int> replicas(f.size(), 0);
    for (const int e : map) ++replicas[static_cast<std::size_t>(e)];
    std::vector<double> row(map.size());
    for (std::size_t s = 0; s < map.size(); ++s) {
      const auto e = static_cast<std::size_t>(map[s]);
      row[s] = routed_pairs * f[e] / replicas[e];
    }
    out.push_back(std::move(row));
  }
  return out;
}

std::vector<std::vector<double>> rank_tokens(const std::vector<std::vector<double>>& slots,
                                             int ep_size) {
  std::vector<std::vector<double>> out;
  out.reserve(slots.size());
  for (const auto& row : slots) {
    const std::size_t per_rank = row.size() / static_cast<std::size_t>(ep_size);
    std::vector<double> ranks(static_cast<std::size_t>(ep_size), 0.0);
    for (std::size_t s = 0; s < row.size(); ++s) ranks[s / per_rank] += row[s];
    out.push_back(std::move(ranks));
  }
  return out;
}

}  // namespace moeplan::planner
