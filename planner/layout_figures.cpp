// Placement per EP size, expert × GPU loads and the traffic matrix of a layer.
#include "planner/layout_figures.hpp"

#include <algorithm>

#include <map>
#include <memory>
#include <mutex>

#include "planner/costs/roofline_costs.hpp"
#include "planner/placement/placement_metrics.hpp"

namespace moeplan::planner {

PlacementConfig policy_config(const PolicyFit& fit, int num_experts, int ep_size) {
  PlacementConfig c;
  c.num_gpus = ep_size;
  c.num_nodes =
      fit.gpus_per_node > 0 && ep_size % fit.gpus_per_node == 0 && ep_size >= fit.gpus_per_node
          ? ep_size / fit.gpus_per_node
          : 1;
  const bool replicates =
      fit.policy == PlacementPolicy::kEplb || fit.policy == PlacementPolicy::kBest;
  c.num_slots =
      num_experts +
      (replicates ? static_cast<int>(fit.redundancy.redundant_at(num_experts, ep_size)) : 0);
  c.num_groups = fit.num_groups > 0 ? fit.num_groups : 1;
  return c;
}

Result<PlacementResult> place_for_ep(const ExpertLoad& load, const PolicyFit& fit, int ep_size) {
  if (ep_size <= 0)
    return Error{"placement: expected an EP size ≥ 1, got " + std::to_string(ep_size)};
  const PlacementConfig config = policy_config(fit, load.num_experts, ep_size);
  BestOptions best;
  if (fit.policy == PlacementPolicy::kBest) {
    const std::int64_t pairs = fit.pairs_per_step > 0 ? fit.pairs_per_step : 65536;
    best.samples = samples_by_layer(sample_steps(load, kBestSampleSteps, pairs, fit.seed));
  }
  return place_experts(load, fit.policy, config, best);
}

PlacementFn policy_placement_fn(const ExpertLoad& load, const PolicyFit& fit) {
  struct Cache {
    std::mutex mutex;
    std::map<int, Result<Placement>> by_ep;
  };
  auto cache = std::make_shared<Cache>();
  return [load, fit, cache](int ep_size) -> Result<Placement> {
    {
      const std::lock_guard<std::mutex> lock(cache->mutex);
      if (auto it = cache->by_ep.find(ep_size); it != cache->by_ep.end()) return it->second;
    }
    auto placed = place_for_ep(load, fit, ep_size);
    Result<Placement> r =
        placed ? Result<Placement>(placed->placement) : Result<Placement>(placed.error());
    const std::lock_guard<std::mutex> lock(cache->mutex);
    cache->by_ep.emplace(ep_size, r);
    return r;
  };
}

std::vector<std::vector<double>> expert_gpu_loads(const std::vector<double>& counts,
                                                  const std::vector<int>& map, int num_gpus) {
  std::vector<std::vector<double>> out(counts.size(),
                                       std::vector<double>(static_cast<std::size_t>(num_gpus)));
  if (num_gpus <= 0 || map.empty()) return out;
  std::vector<int> replicas(counts.size(), 0);
  for (int e : map) ++replicas[static_cast<std::size_t>(e)];
  const std::size_t per_gpu = map.size() / static_cast<std::size_t>(num_gpus);
  for (std::size_t s = 0; s < map.size(); ++s) {
    const auto e = static_cast<std::size_t>(map[s]);
    out[e][s / per_gpu] += counts[e] / replicas[e];
  }
  return out;
}

namespace {

/// Forwards to another source and keeps the token-moving collectives it was asked about.
class RecordingCosts final : public CostSource {
 public:
  explicit RecordingCosts(const CostSource& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  Result<CostEstimate> gemm(const GemmQuery& q) const override { return inner_.gemm(q); }
  Result<CostEstimate> grouped_gemm(const GroupedGemmQuery& q) const override {
    return inner_.grouped_gemm(q);
  }
  Result<CostEstimate> elementwise(const ElementwiseQuery& q) const override {
    return inner_.elementwise(q);
  }
  Result<CostEstimate> collective(const CollectiveQuery& q) const override {
    if (q.op != CollectiveOp::kAllReduce) queries.push_back(q);
    return inner_.collective(q);
  }
  bool has_fused_moe(const std::string& table_dtype) const override {
    return inner_.has_fused_moe(table_dtype);
  }
  Result<CostEstimate> moe_fused(const MoeFusedQuery& q) const override {
    return inner_.moe_fused(q);
  }
  Result<CostEstimate> attention(const AttentionQuery& q) const override {
    return inner_.attention(q);
  }
  Result<CostEstimate> ep_kernel(const EpKernelQuery& q) const override {
    // DeepEP's count exchange and both hops carry bytes between GPUs.
    for (const auto& n : q.notify) queries.push_back(n);
    for (const auto& h : q.hops) queries.push_back(h);
    return inner_.ep_kernel(q);
  }
  mutable std::vector<CollectiveQuery> queries;

 private:
  const CostSource& inner_;
};

}  // namespace

Result<std::vector<std::vector<double>>> layer_traffic(const CostContext& ctx, const Layout& layout,
                                                       int layer) {
  const int num_layers = ctx.load.num_layers();
  if (num_layers == 0) return Error{"traffic: the load '" + ctx.load.source + "' has no layers"};
  const int last = num_layers > 1 ? num_layers : ctx.model.num_moe_layers();
  if (layer < 0 || layer >= last) {
    return Error{"traffic: expected a layer in [0, " + std::to_string(last) + "), got " +
                 std::to_string(layer)};
  }
  ExpertLoad one;
  one.source = ctx.load.source;
  one.num_experts = ctx.load.num_experts;
  one.counts = {ctx.load.counts[static_cast<std::size_t>(num_layers > 1 ? layer : 0)]};
  auto placement =
      ctx.placement
          ? ctx.placement(layout.ep_size)
          : Result<Placement>(contiguous_placement(1, ctx.model.num_experts, layout.ep_size));
  if (!placement) return placement.error();
  Placement p = *placement;
  if (p.num_layers() > 1) {
    if (layer >= p.num_layers()) {
      return Error{"traffic: placement '" + p.policy + "' has no layer " + std::to_string(layer)};
    }
    p.physical_to_logical = {p.physical_to_logical[static_cast<std::size_t>(layer)]};
  }
  const RecordingCosts recording(ctx.costs);
  CostContext one_ctx{ctx.model,    ctx.cluster, recording,
                      ctx.workload, one,         [p](int) -> Result<Placement> { return p; }};
  one_ctx.whole_model = false;  // the MoE layer's traffic (dispatch and combine)
  auto cost = cost_layout(one_ctx, layout);
  if (!cost) return cost.error();
  const auto n = static_cast<std::size_t>(layout.num_gpus);
  std::vector<std::vector<double>> m(n, std::vector<double>(n, 0.0));
  for (const auto& q : recording.queries) {
    int steps = 0;
    for (const Flow& f : collective_flows(q, &steps)) {
      if (f.src == f.dst) continue;
      m[static_cast<std::size_t>(f.src)][static_cast<std::size_t>(f.dst)] += f.bytes;
    }
  }
  return m;
}

TrafficTotals traffic_totals(const std::vector<std::vector<double>>& bytes, int gpus_per_node) {
  TrafficTotals t;
  const std::size_t per_node = static_cast<std::size_t>(std::max(1, gpus_per_node));
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    for (std::size_t j = 0; j < bytes[i].size(); ++j) {
      (i / per_node == j / per_node ? t.intra_node : t.inter_node) += bytes[i][j];
    }
  }
  return t;
}

}  // namespace moeplan::planner
