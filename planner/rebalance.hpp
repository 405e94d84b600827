// Rebalancing over time: a placement fitted once against one re-fitted every N steps on the last
// W steps of a load trace with drift, each scored on the steps that follow it. A rebalance copies
// the experts each GPU newly holds from a GPU that held them (the same node when one did) over
// the cluster's links, and serving waits for it (SGLang's, vLLM's and TensorRT-LLM's balancers
// rebalance between forward passes); the net step time adds that wait to the predicted MoE layer
// times of the steps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/costs/cost_model.hpp"
#include "planner/placement/placement.hpp"

namespace moeplan::planner {

/// Steps [S][L][E] of routed pairs per expert, as read from a load file with steps.
using LoadSteps = std::vector<std::vector<std::vector<double>>>;

/// The copies that turn one placement into another on a layout's GPUs.
struct ExpertMoves {
  int copies = 0;            ///< (layer, EP rank, expert) a rank newly holds, each TP slice once
  double bytes = 0.0;        ///< bytes copied, summed over GPUs
  double cross_node = 0.0;   ///< of those, bytes whose source is on another node
  double seconds = 0.0;      ///< the busiest link's bytes / bandwidth + the slowest path latency
  std::string busiest_link;  ///< "gpu3 -> nvswitch0"; empty without copies
  std::vector<Flow> flows;   ///< per copy: source GPU, destination GPU, bytes
};

/// Copies from `from` to `to` (same layers, experts and EP size) on `layout`'s GPUs of
/// `cluster`: every expert an EP rank holds in `to` and not in `from` is copied to each of the
/// rank's TP GPUs from a GPU that held that slice in `from` — one on the destination's node when
/// there is one, else any — taking among those the one with the fewest bytes sent so far.
/// `expert_bytes` is one expert's bytes on one GPU (its TP slice); each placement layer stands
/// for `layer_multiplicity` MoE layers (a one-layer placement of an L-layer model: L).
Result<ExpertMoves> expert_moves(const Placement& from, const Placement& to, const Layout& layout,
                                 const Cluster& cluster, double expert_bytes,
                                 int layer_multiplicity = 1);

/// `next` with its EP ranks' slot blocks relabelled so that as many experts as possible stay
/// where `previous` had them, layer by layer: whole nodes first (when every node holds as many
/// EP ranks), then the ranks inside each node, each a greedy match on the experts in common.
/// A rank keeps a whole block and a node a whole node's blocks, so per-rank loads,
/// balancedness and each node's share of the traffic are unchanged (the nodes and their GPUs
/// are alike); only the copies shrink.
Placement align_placement(const Placement& previous, Placement next, const Layout& layout,
                          const Cluster& cluster);

struct RebalanceRequest {
  PlacementPolicy policy = PlacementPolicy::kEplb;
  PlacementConfig config;                   ///< EP ranks, nodes, slots, groups
  std::vector<int> every = {1, 2, 4, 8};    ///< N: steps between rebalances
  std::vector<int> windows = {1, 2, 4, 8};  ///< W: steps each re-fit uses (the last W)
  /// Forward passes each step of the trace stands for (a recorder that sums R passes per
  /// record): a step's time counts R times, a rebalance's wait once.
  int record_steps = 1;
  /// Each re-fit is aligned to the placement in use (align_placement: fewer bytes copied, the
  /// busiest link's wait not always shorter); false copies what the policy's map says, as a
  /// framework applying a fresh EPLB map rank by rank does.
  bool align = true;
};

/// One way of running the trace: fixed (every = 0) or re-fitted every N steps on W steps.
struct RebalanceScheme {
  int every = 0;             ///< 0: fixed (fitted once, on the steps before the scored ones)
  int window = 0;            ///< steps fitted on (fixed: all steps before the scored ones)
  int rebalances = 0;        ///< re-fits after the first placement (each one moves experts)
  double bytes_moved = 0.0;  ///< summed over rebalances
  double cross_node_bytes = 0.0;
  double move_seconds = 0.0;          ///< summed waits
  double step_seconds = 0.0;          ///< summed predicted MoE time of the scored forward passes
  double net_seconds_per_step = 0.0;  ///< (step_seconds + move_seconds) / forward passes
  double mean_balancedness = 0.0;     ///< over the scored steps
  /// Per scored step: predicted MoE time of one forward pass, the wait before it (0 when no
  /// rebalance happens there) and the balancedness of its load on the placement in use.
  std::vector<double> series_step_seconds;
  std::vector<double> series_move_seconds;
  std::vector<double> series_balancedness;
};

struct RebalanceResult {
  std::string policy;
  int num_steps = 0;     ///< steps in the trace
  int first_scored = 0;  ///< K: steps [K, S) are scored; K = the largest window
  int record_steps = 1;
  double expert_bytes = 0.0;             ///< one expert's bytes per GPU (its TP slice)
  std::vector<RebalanceScheme> schemes;  ///< fixed first, then every (N, W) in request order
  int recommended = 0;                   ///< index of the lowest net time per step (fixed on ties)
};

/// Predicted MoE time of one forward pass of `load` on `placement` (seconds, all MoE layers):
/// cost_layout on `layout` with ctx's model, cluster, costs and workload (its load and placement
/// are replaced).
Result<double> step_moe_seconds(const CostContext& ctx, const Layout& layout,
                                const Placement& placement, const ExpertLoad& load);

/// step_moe_seconds averaged over `steps` (`moeplan place --cluster`: a placement judged on the
/// steps it did not see). Errors: no steps, what cost_layout reports.
Result<double> mean_moe_seconds(const CostContext& ctx, const Layout& layout,
                                const Placement& placement, const LoadSteps& steps,
                                const std::string& source);

/// The balanced reference of `steps` (`moeplan place --cluster`): mean_moe_seconds with every
/// step's tokens of each layer spread evenly over the experts, one slot per expert, experts
/// contiguous on the EP ranks — every rank gets the mean rows and E/ep experts, and every
/// dispatch link its even share. In prefill, where a rank's time grows with its rows, no
/// placement of the same tokens does better under the cost model; in decode a skewed step can
/// activate fewer experts per rank than E/ep and so come in below it. Errors: no steps, the
/// experts not divisible by the EP size (no such placement), what cost_layout reports.
Result<double> balanced_reference_seconds(const CostContext& ctx, const Layout& layout,
                                          const LoadSteps& steps, const std::string& source);

/// Runs the trace: the fixed placement and every (N, W) of the request, each scored with the
/// cost model (`ctx`'s model, cluster, costs and workload; its load and placement are replaced
/// per step) on `layout`. Errors: fewer than two steps, a trace too short to fit the largest
/// window and score one step after it, N or W < 1, steps whose layers or experts do not match.
Result<RebalanceResult> simulate_rebalancing(const LoadSteps& steps, const std::string& source,
                                             const CostContext& ctx, const Layout& layout,
                                             const RebalanceRequest& request);

}  // namespace moeplan::planner
