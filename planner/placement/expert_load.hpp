// Expert loads (token counts per layer and expert) and placements (which logical expert each
// physical slot holds), and the per-slot token counts they imply. The cost model reads these;
// loaders and placement policies produce them.
#pragma once

#include <string>
#include <vector>

#include "models/result.hpp"

namespace moeplan::planner {

/// Routed (token, expert) counts per MoE layer: counts[layer][expert] ≥ 0. Only relative values
/// matter to the cost model; absolute values are kept for reporting.
struct ExpertLoad {
  std::string source;  ///< "uniform", a file path, or a synthetic spec
  int num_experts = 0;
  std::vector<std::vector<double>> counts;  ///< [num_layers][num_experts]
  /// The counts are one step's routing of exactly the tokens the cost model prices (validate's
  /// prediction of a measured layer): its slots' rows are those counts. false: the counts give
  /// frequencies, and a step's rows per slot are their expectation under independent routing.
  bool realized = false;

  int num_layers() const { return static_cast<int>(counts.size()); }
  /// Each expert's share of the layer's routed pairs (sums to 1; uniform when the row is empty
  /// or all zero).
  std::vector<double> fractions(int layer) const;

  /// Every expert equally loaded.
  static ExpertLoad uniform(int num_layers, int num_experts);
};

/// Physical expert slots per layer. Slot s of layer l holds logical expert
/// physical_to_logical[l][s]; EP rank r owns slots [r·P/ep, (r+1)·P/ep).
struct Placement {
  std::string policy;  ///< "contiguous", "round_robin", "eplb", "best", or a file path
  int num_experts = 0;
  int ep_size = 0;
  int num_slots = 0;  ///< P = E + redundant slots; a multiple of ep_size
  std::vector<std::vector<int>> physical_to_logical;  ///< [num_layers][num_slots]

  int num_layers() const { return static_cast<int>(physical_to_logical.size()); }
  int slots_per_rank() const { return num_slots / ep_size; }
  /// Checks shapes, ranges, that every expert has a slot, and P % ep == 0.
  Status validate() const;
};

/// The seeds' placement: rank r owns experts [r·E/ep, (r+1)·E/ep), no replicas.
Placement contiguous_placement(int num_layers, int num_experts, int ep_size);

/// Tokens (routed pairs) each physical slot receives in each layer when `routed_pairs` pairs are
/// routed per layer with the load's frequencies; a replicated expert's pairs split evenly over
/// its replicas (EPLB's assumption). Load layer l maps to placement layer l; a placement with
/// one layer applies to every layer. Result: [num_layers][num_slots].
Result<std::vector<std::vector<double>>> slot_tokens(const ExpertLoad& load,
                                                     const Placement& placement,
                                                     double routed_pairs);

/// Sums slot tokens into per-EP-rank tokens: [num_layers][ep_size].
std::vector<std::vector<double>> rank_tokens(const std::vector<std::vector<double>>& slot_tokens,
                                             int ep_size);

}  // namespace moeplan::planner
