// Expert placement policies: which logical expert each physical slot of each layer holds, with
// redundant slots replicating hot experts. `contiguous` (the seeds'), `round_robin` (vLLM's),
// `eplb` (DeepSeek's published algorithm, reproduced exactly) and `best` (moeplan's own).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/result.hpp"
#include "planner/placement/expert_load.hpp"

namespace moeplan::planner {

enum class PlacementPolicy : std::uint8_t { kContiguous, kRoundRobin, kEplb, kBest };

std::string policy_name(PlacementPolicy policy);
/// "contiguous", "round_robin", "eplb" or "best".
Result<PlacementPolicy> parse_policy(const std::string& name);

/// The machine a placement is fit to. GPU g (= EP rank g) lies on node g / (num_gpus / num_nodes).
struct PlacementConfig {
  int num_gpus = 1;    ///< EP ranks
  int num_nodes = 1;   ///< nodes; num_gpus % num_nodes == 0
  int num_slots = 0;   ///< physical experts per layer; 0 means num_experts (no redundancy)
  int num_groups = 1;  ///< expert groups (DeepSeek's n_group); used when groups % nodes == 0

  /// EPLB's rule: hierarchical (groups packed onto nodes, replicas stay on their group's node)
  /// when num_groups % num_nodes == 0, global otherwise.
  bool hierarchical() const { return num_groups % num_nodes == 0; }
};

/// Checks the config against a policy and an expert count; errors name what was expected.
Status validate_config(const PlacementConfig& config, int num_experts, PlacementPolicy policy);

/// Step samples that `best` optimises for: [layer][sample][expert] token counts.
using StepSamples = std::vector<std::vector<std::vector<double>>>;

/// Co-activation counts from a per-token trace: pairs[layer][e1·E + e2] = tokens whose top-k
/// holds both e1 and e2 (symmetric, zero diagonal).
struct CoActivation {
  int num_experts = 0;
  std::vector<std::vector<double>> pairs;  ///< [layer][E·E]
};

/// Knobs of the `best` policy.
struct BestOptions {
  /// Per-step samples (empty: optimise the fitted load only). Layer l of the load uses
  /// samples[l]; each sample is a [num_experts] row of token counts. The first half drives the
  /// search; on the second half a refined map (fitted-refined or sample-refined) must beat
  /// EPLB's by more than three standard errors of the paired per-sample gain, else EPLB's map is
  /// kept. Without samples only the fitted refinement runs and is kept.
  StepSamples samples;
  /// Co-activation from a trace (empty pairs: no locality term).
  CoActivation coactivation;
  /// Weight of the locality term (used with a co-activation, in global mode, on several
  /// nodes): a cross-node swap is made when
  ///   Δ(balancedness on the samples) − locality_weight · Δ(fraction of co-activated pairs
  ///   with no common node) > 0
  /// and no GPU's fitted load rises above EPLB's fitted maximum. 0.25 means cutting 4 % of
  /// the co-activated pairs is worth 1 % of balancedness; 0 turns the term off.
  double locality_weight = 0.25;
  /// Swap evaluations per layer in the sampled phase, and again in the locality phase (each
  /// costs O(samples), plus O(experts · nodes) for locality).
  int max_evaluations_per_layer = 200000;
  /// Up to this many nodes (at most kMaxLocalityTableNodes) the locality phase reads each
  /// swap's change in split co-activated pairs off per-expert tables (2^nodes entries per
  /// expert, kept as experts move: 512 KiB at 8 nodes and 256 experts) instead of comparing
  /// node sets with every partner. Speed only: with co-activation counts (whole numbers, as a
  /// trace gives) every decision is the same; 0 compares node sets always.
  int locality_table_nodes = 8;
};

/// The largest BestOptions::locality_table_nodes taken (larger values count as this).
inline constexpr int kMaxLocalityTableNodes = 8;

/// A placement with EPLB's companion maps and the time its policy took.
struct PlacementResult {
  Placement placement;  ///< physical_to_logical [L][P]
  /// [L][E][max_replicas]: the slots holding each expert, ordered by replica rank, −1 padded;
  /// max_replicas is the largest replica count over all layers.
  std::vector<std::vector<std::vector<int>>> logical_to_physical;
  std::vector<std::vector<int>> logical_count;  ///< [L][E] replicas per expert
  double seconds = 0.0;                         ///< the policy's own compute time
};

/// Places every layer of `load`. `eplb` follows DeepSeek's rebalance_experts step by step
/// (float32 arithmetic, stable descending sorts, first-index tie breaks); `best` starts from
/// EPLB's result under the same constraints and improves it by local search.
Result<PlacementResult> place_experts(const ExpertLoad& load, PlacementPolicy policy,
                                      const PlacementConfig& config, const BestOptions& best = {});

/// logical_count and logical_to_physical of a physical_to_logical map, replicas ordered by slot.
void fill_logical_maps(PlacementResult& result);

/// The greedy replication (each extra slot to the expert with the highest load per replica):
/// replica counts that minimise the largest per-replica load for `num_slots` slots.
std::vector<int> replicate_counts(const std::vector<double>& weight, int num_slots);

}  // namespace moeplan::planner
