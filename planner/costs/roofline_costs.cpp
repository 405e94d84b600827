// RooflineCosts: GEMMs from peak FLOP/s and HBM bandwidth, collectives from topology routing.
#include "planner/costs/roofline_costs.hpp"

#include <algorithm>

namespace moeplan::planner {

std::string collective_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllToAll: return "all_to_all";
    case CollectiveOp::kAllToAllV: return "all_to_all_v";
    case CollectiveOp::kAllGather: return "all_gather";
    case CollectiveOp::kAllGatherV: return "all_gather_v";
    case CollectiveOp::kAllReduce: return "all_reduce";
  }
  return "?";
}

double gemm_efficiency(double m) {
  if (!(m > 0.0)) return 0.0;
  return kMaxGemmEfficiency * m / (m + kGemmHalfEfficiencyRows);
}

std::vector<Flow> collective_flows(const CollectiveQuery& q, int* steps, AllReduceAlgo algo) {
  std::vector<Flow> flows;
  const int g = q.group_size();
  *steps = 0;
  if (g <= 1 || !(q.bytes > 0.0)) return flows;
  const double gd = static_cast<double>(g);
  const auto ug = static_cast<std::size_t>(g);
  if (q.op == CollectiveOp::kAllReduce && algo == AllReduceAlgo::kTree) {
    int depth = 0;
    while ((1 << depth) < g + 1) ++depth;  // levels of a complete binary tree of g nodes
    *steps = 2 * (depth - 1);
    for (const auto& grp : q.groups) {
      for (std::size_t i = 1; i < ug; ++i) {
        const std::size_t parent = (i - 1) / 2;
        flows.push_back({grp[i], grp[parent], q.bytes});
        flows.push_back({grp[parent], grp[i], q.bytes});
      }
    }
    return flows;
  }
  const bool ring = q.op == CollectiveOp::kAllGather || q.op == CollectiveOp::kAllReduce;
  if (ring) {
    const double per_link = q.op == CollectiveOp::kAllGather ? (gd - 1.0) / gd * q.bytes
                                                             : 2.0 * (gd - 1.0) / gd * q.bytes;
    *steps = q.op == CollectiveOp::kAllGather ? g - 1 : 2 * (g - 1);
    flows.reserve(q.groups.size() * ug);
    for (const auto& grp : q.groups) {
      for (std::size_t i = 0; i < ug; ++i) flows.push_back({grp[i], grp[(i + 1) % ug], per_link});
    }
    return flows;
  }
  *steps = 1;
  flows.reserve(q.groups.size() * ug * (ug - 1));
  const bool even = q.matrix.empty();
  for (const auto& grp : q.groups) {
    for (std::size_t i = 0; i < ug; ++i) {
      for (std::size_t j = 0; j < ug; ++j) {
        if (i == j) continue;
        const double b = even ? q.bytes / gd : q.matrix[i][j];
        flows.push_back({grp[i], grp[j], b});
      }
    }
  }
  return flows;
}

double collective_seconds(const Cluster& cluster, const CollectiveQuery& q, LinkLoad* load) {
  int steps = 0;
  LinkLoad l = cluster.route(collective_flows(q, &steps));
  double t = l.busiest_seconds + steps * l.max_path_latency;
  if (q.op == CollectiveOp::kAllReduce) {
    int tree_steps = 0;
    LinkLoad tl = cluster.route(collective_flows(q, &tree_steps, AllReduceAlgo::kTree));
    const double tt = tl.busiest_seconds + tree_steps * tl.max_path_latency;
    if (tt < t) {
      t = tt;
      l = std::move(tl);
    }
  }
  if (load != nullptr) *load = std::move(l);
  return t;
}

double RooflineCosts::peak_flops(DType dtype) const {
  const auto& d = cluster_.device();
  switch (dtype) {
    case DType::kFp8: return d.peak_fp8_flops > 0.0 ? d.peak_fp8_flops : d.peak_bf16_flops;
    case DType::kFp32: return d.peak_fp32_flops > 0.0 ? d.peak_fp32_flops : d.peak_bf16_flops;
    case DType::kBf16:
    case DType::kFp16: return d.peak_bf16_flops;
  }
  return d.peak_bf16_flops;
}

namespace {
double gemm_body_seconds(double m, double n, double k, double bytes_per_elem, double peak,
                         double hbm) {
  if (!(m > 0.0) || !(n > 0.0) || !(k > 0.0)) return 0.0;
  const double flops = 2.0 * m * n * k;
  const double bytes = (m * k + k * n + m * n) * bytes_per_elem;
  return std::max(flops / (peak * gemm_efficiency(m)), bytes / (hbm * kHbmEfficiency));
}
}  // namespace

Result<CostEstimate> RooflineCosts::gemm(const GemmQuery& q) const {
  if (q.m < 0.0 || q.n < 0.0 || q.k < 0.0) return Error{"gemm: expected non-negative m, n, k"};
  if (q.m == 0.0) return CostEstimate{0.0, name()};
  const double t = gemm_body_seconds(q.m, q.n, q.k, dtype_bytes(q.dtype), peak_flops(q.dtype),
                                     cluster_.device().hbm_bandwidth);
  return CostEstimate{t + kKernelLaunchSeconds, name()};
}

Result<CostEstimate> RooflineCosts::grouped_gemm(const GroupedGemmQuery& q) const {
  double t = 0.0;
  bool any = false;
  const double peak = peak_flops(q.dtype);
  const double hbm = cluster_.device().hbm_bandwidth;
  const double b = dtype_bytes(q.dtype);
  for (const double m : q.m) {
    if (m < 0.0) return Error{"grouped_gemm: expected non-negative rows per group"};
    if (m == 0.0) continue;
    any = true;
    t += gemm_body_seconds(m, q.n, q.k, b, peak, hbm);
  }
  return CostEstimate{any ? t + kKernelLaunchSeconds : 0.0, name()};
}

Result<CostEstimate> RooflineCosts::elementwise(const ElementwiseQuery& q) const {
  if (q.bytes < 0.0) return Error{"elementwise '" + q.op + "': expected non-negative bytes"};
  if (q.bytes == 0.0) return CostEstimate{0.0, name()};
  return CostEstimate{
      q.bytes / (cluster_.device().hbm_bandwidth * kHbmEfficiency) + kKernelLaunchSeconds, name()};
}

Result<CostEstimate> RooflineCosts::collective(const CollectiveQuery& q) const {
  const int g = q.group_size();
  for (const auto& grp : q.groups) {
    if (static_cast<int>(grp.size()) != g) {
      return Error{collective_name(q.op) + ": expected groups of equal size"};
    }
    for (const int gpu : grp) {
      if (gpu < 0 || gpu >= cluster_.num_gpus()) {
        return Error{collective_name(q.op) + ": GPU " + std::to_string(gpu) +
                     " is not in cluster '" + cluster_.name() + "' (" +
                     std::to_string(cluster_.num_gpus()) + " GPUs)"};
      }
    }
  }
  if (!q.matrix.empty()) {
    if (static_cast<int>(q.matrix.size()) != g) {
      return Error{collective_name(q.op) + ": expected a " + std::to_string(g) + "x" +
                   std::to_string(g) + " traffic matrix"};
    }
    for (const auto& row : q.matrix) {
      if (static_cast<int>(row.size()) != g) {
        return Error{collective_name(q.op) + ": expected a square traffic matrix"};
      }
    }
  }
  if (g <= 1 || !(q.bytes > 0.0)) return CostEstimate{0.0, name()};
  Key key{static_cast<int>(q.op), q.groups, {}};
  if (!q.matrix.empty()) {
    auto& m = std::get<2>(key);
    m = q.matrix;
    for (auto& row : m) {
      for (double& v : row) v /= q.bytes;
    }
  }
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = cache_.find(key);
    if (it != cache_.end()) return CostEstimate{it->second.seconds(q.bytes), name()};
  }
  CollectiveQuery unit = q;
  unit.bytes = 1.0;
  unit.matrix = std::get<2>(key);
  const auto route = [&](AllReduceAlgo algo) {
    int steps = 0;
    const LinkLoad load = cluster_.route(collective_flows(unit, &steps, algo));
    return Algo{load.busiest_seconds, steps * load.max_path_latency};
  };
  Shape shape;
  shape.primary = route(AllReduceAlgo::kRing);
  if (q.op == CollectiveOp::kAllReduce) shape.tree = route(AllReduceAlgo::kTree);
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    cache_.emplace(std::move(key), shape);
  }
  return CostEstimate{shape.seconds(q.bytes), name()};
}

}  // namespace moeplan::planner
