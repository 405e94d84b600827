// How good a placement is: balance on the load it was fit to (SGLang's balancedness,
// TensorRT-LLM's imbalance, the bound no placement can beat), on steps it has not seen, and
// how far a token's top-k spreads over nodes and GPUs when a per-token trace exists.
#pragma once

#include <cstdint>
#include <vector>

#include "models/result.hpp"
#include "planner/placement/expert_load.hpp"
#include "planner/placement/placement.hpp"

namespace moeplan::planner {

/// GPU loads of one layer: Σ over a GPU's slots of count[e] / replicas[e] (a replicated
/// expert's tokens split evenly over its replicas, EPLB's assumption).
std::vector<double> gpu_loads(const std::vector<double>& counts, const std::vector<int>& map,
                              int num_gpus);

/// Balance of a placement on a load. Layers whose counts are all zero carry no information and
/// are left out of the averages (all zero: balancedness 1, imbalance 0, bound 1).
struct BalanceFigures {
  double balancedness = 1.0;  ///< mean over layers of mean GPU load / max GPU load (SGLang)
  double imbalance = 0.0;     ///< mean over layers of (max − mean) / mean (TensorRT-LLM)
  /// Mean over layers of mean / max(mean, largest per-replica load after the greedy
  /// replication over all slots): no placement with this many slots balances better.
  double upper_bound = 1.0;
  std::vector<double> layer_balancedness;  ///< per layer (1 for all-zero layers)
};

/// Figures of `placement` on `load` (same layers and experts; a one-layer placement applies to
/// every layer).
Result<BalanceFigures> balance_figures(const ExpertLoad& load, const Placement& placement);

/// Per-step scores: each step's balancedness (its own layers averaged), then mean and p99
/// over steps. p99 is the balancedness that 99 % of steps reach or exceed (the 1st percentile).
struct StepScores {
  int num_steps = 0;
  double mean_balancedness = 1.0;
  double p99_balancedness = 1.0;
};

/// Scores `placement` on steps [S][L][E].
Result<StepScores> score_steps(const std::vector<std::vector<std::vector<double>>>& steps,
                               const Placement& placement);

/// Draws `num_steps` steps [S][L][E]: per layer, a multinomial of `pairs_per_step` routed
/// (token, expert) pairs from the layer's frequencies. Deterministic for a seed.
std::vector<std::vector<std::vector<double>>> sample_steps(const ExpertLoad& load, int num_steps,
                                                           std::int64_t pairs_per_step,
                                                           std::uint64_t seed);

/// [S][L][E] steps to [L][S][E] samples (what `best` takes).
StepSamples samples_by_layer(const std::vector<std::vector<std::vector<double>>>& steps);

/// Per-token top-k choices: topk_ids[layer] holds num_tokens × top_k expert ids, row-major.
struct TokenTrace {
  int num_experts = 0;
  int top_k = 0;
  std::vector<std::vector<int>> topk_ids;  ///< [L][T·k]

  int num_layers() const { return static_cast<int>(topk_ids.size()); }
  int num_tokens(int layer) const {
    return top_k == 0 ? 0
                      : static_cast<int>(topk_ids[static_cast<std::size_t>(layer)].size()) / top_k;
  }
  /// Routed pairs per expert: [L][E].
  ExpertLoad counts(const std::string& source) const;
  /// Tokens whose top-k holds both experts, per layer.
  CoActivation coactivation() const;
};

/// Spread of tokens over the machine. A token is sent once to every node that hosts one of
/// its experts (node-deduplicated dispatch, DeepEP's); an expert with replicas on several nodes
/// is served from a node the token already reaches when there is one, else from its first
/// replica's node; its GPU is its first replica on that node.
struct TraceFigures {
  double nodes_per_token = 0.0;  ///< mean distinct nodes a token's top-k spans
  double gpus_per_token = 0.0;   ///< mean distinct GPUs
  /// Mean over tokens of nodes spanned × (M − 1) / M / k: the share of a token's k expert
  /// copies that cross nodes when tokens start on a uniformly random node of M.
  double cross_node_fraction = 0.0;
};

Result<TraceFigures> trace_figures(const TokenTrace& trace, const Placement& placement,
                                   int num_nodes);

}  // namespace moeplan::planner
