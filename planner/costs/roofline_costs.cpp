// RooflineCosts: GEMMs from peak FLOP/s and HBM bandwidth, collectives from topology routing;
// with a device calibration, the fitted forms of docs/GPU_COSTS.md.
#include "planner/costs/roofline_costs.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace moeplan::planner {

double group_occupancy(double m, bool expected) {
  if (!(m > 0.0)) return 0.0;
  return expected ? -std::expm1(-m) : std::min(1.0, m);
}

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

bool groups_inside_nvlink_domain(const Cluster& cluster, const CollectiveQuery& q) {
  const int domain = std::max(1, cluster.info().nvlink_domain_gpus);
  for (const auto& grp : q.groups) {
    if (grp.empty()) continue;
    const int first = grp.front() / domain;
    for (const int gpu : grp) {
      if (gpu / domain != first) return false;
    }
  }
  return true;
}

CollectiveOp even_collective(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllToAllV: return CollectiveOp::kAllToAll;
    case CollectiveOp::kAllGatherV: return CollectiveOp::kAllGather;
    default: return op;
  }
}

double even_collective_bytes(const CollectiveQuery& q) {
  const int g = q.group_size();
  if (q.op == CollectiveOp::kAllGatherV && g > 1) {
    return q.bytes * static_cast<double>(g) / static_cast<double>(g - 1);
  }
  return q.bytes;
}

std::string RooflineCosts::name() const {
  if (!calibration_) return kSourceRoofline;
  return std::string(kSourceCalibrated) +
         (calibration_->provenance.empty() ? "" : " (" + calibration_->provenance + ")");
}

bool RooflineCosts::has_fused_moe(const std::string& table_dtype) const {
  return calibration_ && calibration_->moe.count(table_dtype) > 0;
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
double gemm_body_seconds(double m, double n, double k, double bytes_per_elem, double weight_bytes,
                         double peak, double hbm) {
  if (!(m > 0.0) || !(n > 0.0) || !(k > 0.0)) return 0.0;
  const double flops = 2.0 * m * n * k;
  const double bytes = (m * k + m * n) * bytes_per_elem + k * n * weight_bytes;
  return std::max(flops / (peak * gemm_efficiency(m)), bytes / (hbm * kHbmEfficiency));
}

/// Smooth maximum of compute and memory time: (a^q + b^q)^(1/q).
double blend(double a, double b, double q) {
  if (!(a > 0.0)) return b;
  if (!(b > 0.0)) return a;
  const double top = std::max(a, b);  // scaled so that large q cannot overflow
  return top * std::pow(std::pow(a / top, q) + std::pow(b / top, q), 1.0 / q);
}

/// Bytes per element of a table dtype's weights and GEMM activations.
double table_dtype_bytes(const std::string& table_dtype) {
  return table_dtype == "fp8" || table_dtype == "fp8_block" ? 1.0 : 2.0;
}

/// One grouped GEMM of the fused MoE form over a rank's groups (docs/GPU_COSTS.md).
double calibrated_grouped(const MoeCalibration& c, const MoeCalibration::Groups& g, double n,
                          double k, double elem_bytes, double weight_bytes, double peak,
                          double hbm) {
  if (!(g.pairs > 0.0) || !(n > 0.0) || !(k > 0.0)) return 0.0;
  const double mbar = g.pairs / g.active;
  const double compute = 2.0 * g.pairs * n * k / (peak * c.efficiency(mbar, n, k));
  const double memory =
      (g.active * n * k * weight_bytes + g.pairs * (n + k) * elem_bytes) / (hbm * c.hbm_efficiency);
  return blend(compute, memory, c.blend_exponent) +
         c.per_tile_s * g.row_tiles * std::ceil(n / c.tile_cols);
}
}  // namespace

Result<CostEstimate> RooflineCosts::gemm(const GemmQuery& q) const {
  if (q.m < 0.0 || q.n < 0.0 || q.k < 0.0) return Error{"gemm: expected non-negative m, n, k"};
  if (q.m == 0.0) return CostEstimate{0.0, label()};
  if (calibration_) {
    const std::string dt(dtype_name(q.dtype));
    const auto it = calibration_->gemm.find(dt);
    if (it != calibration_->gemm.end() && q.n > 0.0 && q.k > 0.0) {
      const GemmCalibration& c = it->second;
      const double b = table_dtype_bytes(dt);
      const double compute =
          2.0 * q.m * q.n * q.k / (calibration_->peak_flops(dt) * c.efficiency(q.m, q.n, q.k));
      const double wb = q.weight_bytes > 0.0 ? q.weight_bytes : b;
      const double memory = (q.m * q.k * b + q.k * q.n * wb + q.m * q.n * 2.0) /
                            (calibration_->hbm_bandwidth * c.hbm_efficiency);
      return CostEstimate{c.fixed_s + blend(compute, memory, c.blend_exponent), kSourceCalibrated};
    }
  }
  const double t = gemm_body_seconds(q.m, q.n, q.k, dtype_bytes(q.dtype),
                                     q.weight_bytes > 0.0 ? q.weight_bytes : dtype_bytes(q.dtype),
                                     peak_flops(q.dtype), cluster_.device().hbm_bandwidth);
  return CostEstimate{t + kKernelLaunchSeconds, kSourceRoofline};
}

Result<CostEstimate> RooflineCosts::attention(const AttentionQuery& q) const {
  if (q.tokens < 0.0 || q.context < 0.0 || q.heads < 0.0 || q.kv_heads < 0.0 || q.qk_dim < 0.0 ||
      q.v_dim < 0.0 || q.kv_bytes_per_token < 0.0) {
    return Error{"attention: expected non-negative sizes"};
  }
  if (q.tokens == 0.0 || q.heads == 0.0) return CostEstimate{0.0, label()};
  // NOTE: a flash kernel's tiles are query rows of one KV head: prefill's prompt tokens × the
  // heads sharing it, decode's grouped heads of one sequence (GQA, MLA's 16–128 heads over one
  // latent); efficiency(m) as for a GEMM of that many rows.
  const double group = q.kv_heads > 0.0 ? std::max(1.0, q.heads / q.kv_heads) : 1.0;
  const double rows = q.decode ? group : std::min(q.tokens, std::max(1.0, q.context));
  const double compute = q.flops() / (peak_flops(q.dtype) * gemm_efficiency(rows));
  double hbm = cluster_.device().hbm_bandwidth * kHbmEfficiency;
  if (calibration_ && !calibration_->moe.empty()) {
    auto it = calibration_->moe.find(std::string(dtype_name(q.dtype)));
    if (it == calibration_->moe.end()) it = calibration_->moe.begin();
    hbm = calibration_->hbm_bandwidth * it->second.hbm_efficiency;
  }
  return CostEstimate{std::max(compute, q.bytes() / hbm) + kKernelLaunchSeconds, label()};
}

Result<CostEstimate> RooflineCosts::moe_fused(const MoeFusedQuery& q) const {
  if (q.tokens < 0.0 || q.hidden < 0.0 || q.inter < 0.0 || q.tp_size < 1 || q.ep_size < 1) {
    return Error{"moe_fused: expected non-negative sizes and positive tp, ep"};
  }
  double pairs = 0.0;
  for (const double m : q.rows) {
    if (m < 0.0) return Error{"moe_fused: expected non-negative rows per slot"};
    pairs += m;
  }
  const double width = std::floor(q.inter / q.tp_size);
  const std::string dt = q.table_dtype();
  const MoeCalibration* c = nullptr;
  if (calibration_) {
    const auto it = calibration_->moe.find(dt);
    if (it != calibration_->moe.end()) c = &it->second;
  }
  if (c != nullptr) {
    const double hbm = calibration_->hbm_bandwidth * c->hbm_efficiency;
    const double peak = calibration_->peak_flops(dt);
    const double b = table_dtype_bytes(dt);
    const double wb = q.weight_bytes > 0.0 ? q.weight_bytes : b;
    const MoeCalibration::Groups groups = c->groups(q.rows, q.expected);
    const double t =
        c->fixed_s + c->fixed_per_hidden_s * q.hidden +
        calibrated_grouped(*c, groups, 2.0 * width, q.hidden, b, wb, peak,
                           calibration_->hbm_bandwidth) +
        calibrated_grouped(*c, groups, q.hidden, width, b, wb, peak, calibration_->hbm_bandwidth) +
        3.0 * pairs * width * 2.0 / hbm +
        c->permute_factor * 2.0 * (pairs + (q.rows_in > 0.0 ? q.rows_in : q.tokens)) * q.hidden *
            2.0 / hbm;
    return CostEstimate{t, kSourceCalibrated};
  }
  // The plain parts: what the cost model books for a rank without a fused price (its experts
  // and the permute of its pairs).
  const double b = dtype_bytes(q.dtype);
  CostEstimate out{0.0, kSourceRoofline};
  for (const auto& part :
       {grouped_gemm({q.rows, 2.0 * width, q.hidden, q.dtype, q.weight_bytes, q.expected}),
        elementwise({"silu_mul", 3.0 * pairs * width * b, q.dtype}),
        grouped_gemm({q.rows, q.hidden, width, q.dtype, q.weight_bytes, q.expected}),
        elementwise({"permute", 2.0 * pairs * q.hidden * b, q.dtype})}) {
    if (!part) return part.error();
    out.seconds += part->seconds;
  }
  return out;
}

Result<CostEstimate> RooflineCosts::grouped_gemm(const GroupedGemmQuery& q) const {
  double t = 0.0;
  bool any = false;
  const double peak = peak_flops(q.dtype);
  const double hbm = cluster_.device().hbm_bandwidth;
  const double b = dtype_bytes(q.dtype);
  const double wb = q.weight_bytes > 0.0 ? q.weight_bytes : b;
  double last_m = -1.0, last_t = 0.0;
  for (const double m : q.m) {
    if (m < 0.0) return Error{"grouped_gemm: expected non-negative rows per group"};
    if (m == 0.0) continue;
    any = true;
    if (q.expected) {
      // Non-empty with probability p, with m / p rows when it is (a uniform load repeats one m).
      if (m != last_m) {
        last_m = m;
        const double p = group_occupancy(m, true);
        last_t = p * gemm_body_seconds(m / p, q.n, q.k, b, wb, peak, hbm);
      }
      t += last_t;
    } else {
      t += gemm_body_seconds(m, q.n, q.k, b, wb, peak, hbm);
    }
  }
  return CostEstimate{any ? t + kKernelLaunchSeconds : 0.0, kSourceRoofline};
}

Result<CostEstimate> RooflineCosts::elementwise(const ElementwiseQuery& q) const {
  if (q.bytes < 0.0) return Error{"elementwise '" + q.op + "': expected non-negative bytes"};
  if (q.bytes == 0.0) return CostEstimate{0.0, label()};
  if (calibration_ && !calibration_->moe.empty()) {
    // NOTE: the HBM efficiency fitted with the fused MoE kernel of this dtype (else bf16's, else
    // any): the tables have no standalone elementwise kernel to fit it on.
    auto it = calibration_->moe.find(std::string(dtype_name(q.dtype)));
    if (it == calibration_->moe.end()) it = calibration_->moe.find("bf16");
    if (it == calibration_->moe.end()) it = calibration_->moe.begin();
    return CostEstimate{
        q.bytes / (calibration_->hbm_bandwidth * it->second.hbm_efficiency) + kKernelLaunchSeconds,
        kSourceCalibrated};
  }
  return CostEstimate{
      q.bytes / (cluster_.device().hbm_bandwidth * kHbmEfficiency) + kKernelLaunchSeconds,
      kSourceRoofline};
}

Result<CostEstimate> RooflineCosts::collective(const CollectiveQuery& q) const {
  auto routed = routed_collective(q);
  if (!routed || !calibration_) return routed;
  const int g = q.group_size();
  if (g <= 1 || !(q.bytes > 0.0)) return CostEstimate{0.0, label()};
  const CollectiveOp even = even_collective(q.op);
  const auto it = calibration_->collectives.find({collective_name(even), g});
  if (!groups_inside_nvlink_domain(cluster_, q)) return internode_collective(q, *routed);
  if (it == calibration_->collectives.end()) return routed;  // no curve for this op and size
  const double bytes = even_collective_bytes(q);
  double t = it->second.seconds(bytes, nccl_bus_factor(collective_name(even), g));
  if (even != q.op || !q.matrix.empty()) {
    // The measured curve is the even collective; the routed roofline scales it to this shape.
    auto routed_even = routed_collective({even, q.groups, bytes, {}, q.dtype});
    if (!routed_even) return routed_even.error();
    if (routed_even->seconds > 0.0) t *= routed->seconds / routed_even->seconds;
  }
  return CostEstimate{t, kSourceCalibrated};
}

bool RooflineCosts::calibrated_ep_kernel(const EpKernelQuery& q) const {
  return calibration_ && calibration_->ep_kernels.count(ep_kernel_name(q.mode, q.phase)) > 0;
}

namespace {

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  // splitmix64's finaliser over the running hash and the next value.
  std::uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t bits_of(double v) {
  std::uint64_t u = 0;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

/// Hash of (op, bytes / scale, groups, matrix / scale) from a sample of them — the sizes, the
/// first group, every group's first GPU, the matrix's first row and diagonal — computed as a
/// UnitQuery stores them. Hashing every GPU and matrix entry cost more than the routing it saves
/// (groups of up to 1,024 GPUs); UnitQuery::matches compares everything.
std::uint64_t hash_unit(std::uint64_t h, int op, const CollectiveQuery& q, double scale) {
  h = mix(h, static_cast<std::uint64_t>(op));
  h = mix(h, bits_of(q.bytes / scale));
  h = mix(h, q.groups.size());
  if (!q.groups.empty()) {
    h = mix(h, q.groups.front().size());
    for (const int gpu : q.groups.front()) h = mix(h, static_cast<std::uint64_t>(gpu));
    for (const auto& grp : q.groups) {
      h = mix(h, grp.empty() ? ~std::uint64_t{0} : static_cast<std::uint64_t>(grp.front()));
    }
  }
  h = mix(h, q.matrix.size());
  if (!q.matrix.empty()) {
    for (const double v : q.matrix.front()) h = mix(h, bits_of(v / scale));
    for (std::size_t i = 1; i < q.matrix.size(); ++i) {
      if (i < q.matrix[i].size()) h = mix(h, bits_of(q.matrix[i][i] / scale));
    }
  }
  return h;
}

}  // namespace

Result<CostEstimate> RooflineCosts::ep_kernel(const EpKernelQuery& q) const {
  const auto it = calibration_ ? calibration_->ep_kernels.find(ep_kernel_name(q.mode, q.phase))
                               : std::map<std::string, EpKernelCalibration>::const_iterator{};
  if (!calibration_ || it == calibration_->ep_kernels.end()) return CostSource::ep_kernel(q);
  const int per_node = std::max(1, cluster_.info().gpus_per_node);
  for (const auto& hop : q.hops) {
    for (const auto& grp : hop.groups) {
      for (const int gpu : grp) {
        if (gpu < 0 || gpu >= cluster_.num_gpus()) {
          return Error{"ep_kernel: GPU " + std::to_string(gpu) + " is not in cluster '" +
                       cluster_.name() + "'"};
        }
      }
    }
  }
  // Routed once per shape: the hops scaled by the first positive hop's bytes (routing is linear
  // in the bytes), looked up by hash and compared in place.
  double scale = 1.0;
  for (const auto& hop : q.hops) {
    if (hop.bytes > 0.0) {
      scale = hop.bytes;
      break;
    }
  }
  std::uint64_t h = mix(0, q.hops.size());
  for (const auto& hop : q.hops) h = hash_unit(h, static_cast<int>(hop.op), hop, scale);
  const auto same_hops = [&](const EpEntry& e) {
    if (e.hops.size() != q.hops.size()) return false;
    for (std::size_t i = 0; i < e.hops.size(); ++i) {
      if (!e.hops[i].matches(static_cast<int>(q.hops[i].op), q.hops[i], scale)) return false;
    }
    return true;
  };
  std::optional<std::pair<double, double>> unit;  // NIC, NVLink busiest seconds per scale
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto found = ep_cache_.find(h);
    if (found != ep_cache_.end()) {
      for (const EpEntry& e : found->second) {
        if (same_hops(e)) {
          unit = std::pair{e.nic, e.nvlink};
          break;
        }
      }
    }
  }
  if (!unit) {
    EpEntry entry;
    std::vector<Flow> inter, intra;
    for (const auto& hop : q.hops) {
      CollectiveQuery scaled = hop;
      scaled.bytes = hop.bytes / scale;
      for (auto& row : scaled.matrix) {
        for (double& v : row) v /= scale;
      }
      int steps = 0;
      for (const Flow& f : collective_flows(scaled, &steps)) {
        (f.src / per_node == f.dst / per_node ? intra : inter).push_back(f);
      }
      entry.hops.push_back(UnitQuery{static_cast<int>(hop.op), scaled.bytes,
                                     std::move(scaled.groups), std::move(scaled.matrix)});
    }
    entry.nic = inter.empty() ? 0.0 : cluster_.route(inter).busiest_seconds;
    entry.nvlink = intra.empty() ? 0.0 : cluster_.route(intra).busiest_seconds;
    unit = std::pair{entry.nic, entry.nvlink};
    std::size_t entry_cells = 1;
    for (const UnitQuery& hop : entry.hops) entry_cells += cells(hop);
    const std::lock_guard<std::mutex> lock(mutex_);
    if (ep_cache_cells_ + entry_cells > kMaxCachedCells) {
      ep_cache_.clear();
      ep_cache_cells_ = 0;
    }
    ep_cache_cells_ += entry_cells;
    ep_cache_[h].push_back(std::move(entry));
  }
  const double nic = unit->first * scale;
  const double nvlink = unit->second * scale;
  const EpKernelCalibration& c = it->second;
  return CostEstimate{
      c.fixed_s + c.per_node_s * q.num_nodes + std::max(nic / c.nic_efficiency, nvlink),
      kSourceCalibrated};
}

Result<CostEstimate> RooflineCosts::routed_collective(const CollectiveQuery& q) const {
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
  if (g <= 1 || !(q.bytes > 0.0)) return CostEstimate{0.0, kSourceRoofline};
  return CostEstimate{routed_shape(q).seconds(q.bytes), kSourceRoofline};
}

bool RooflineCosts::UnitQuery::matches(int query_op, const CollectiveQuery& q, double scale) const {
  if (op != query_op || !(bytes == q.bytes / scale) || groups != q.groups ||
      matrix.size() != q.matrix.size()) {
    return false;
  }
  for (std::size_t i = 0; i < matrix.size(); ++i) {
    if (matrix[i].size() != q.matrix[i].size()) return false;
    for (std::size_t j = 0; j < matrix[i].size(); ++j) {
      if (!(matrix[i][j] == q.matrix[i][j] / scale)) return false;
    }
  }
  return true;
}

RooflineCosts::Shape RooflineCosts::routed_shape(const CollectiveQuery& q) const {
  const int op = static_cast<int>(q.op);
  const std::uint64_t h = hash_unit(0, op, q, q.bytes);
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = cache_.find(h);
    if (it != cache_.end()) {
      for (const ShapeEntry& e : it->second) {
        if (e.query.matches(op, q, q.bytes)) return e.shape;
      }
    }
  }
  CollectiveQuery unit = q;
  unit.bytes = 1.0;
  for (auto& row : unit.matrix) {
    for (double& v : row) v /= q.bytes;
  }
  const auto route = [&](AllReduceAlgo algo) {
    int steps = 0;
    const LinkLoad load = cluster_.route(collective_flows(unit, &steps, algo));
    Algo a{load.busiest_seconds, steps * load.max_path_latency};
    for (std::size_t e = 0; e < load.bytes.size(); ++e) {
      if (!(load.bytes[e] > 0.0)) continue;
      const double spb = load.bytes[e] / cluster_.link(static_cast<int>(e)).bandwidth;
      if (e < network_.size() && network_[e] != 0) {
        if (spb > a.nic_seconds_per_byte) {
          a.nic_seconds_per_byte = spb;
          a.nic_bytes_per_byte = load.bytes[e];
        }
      } else {
        a.other_seconds_per_byte = std::max(a.other_seconds_per_byte, spb);
      }
    }
    return a;
  };
  Shape shape;
  shape.primary = route(AllReduceAlgo::kRing);
  if (q.op == CollectiveOp::kAllReduce) shape.tree = route(AllReduceAlgo::kTree);
  {
    // bytes 1: q.bytes / q.bytes, exactly, as matches() computes it.
    ShapeEntry entry{UnitQuery{op, 1.0, std::move(unit.groups), std::move(unit.matrix)}, shape};
    const std::size_t entry_cells = cells(entry.query);
    const std::lock_guard<std::mutex> lock(mutex_);
    if (cache_cells_ + entry_cells > kMaxCachedCells) {
      cache_.clear();
      cache_cells_ = 0;
    }
    cache_cells_ += entry_cells;
    cache_[h].push_back(std::move(entry));
  }
  return shape;
}

std::size_t RooflineCosts::cached_cells() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return cache_cells_ + ep_cache_cells_;
}

std::size_t RooflineCosts::cells(const UnitQuery& q) {
  std::size_t n = 1;
  for (const auto& g : q.groups) n += g.size();
  for (const auto& row : q.matrix) n += row.size();
  return n;
}

std::vector<char> RooflineCosts::network_links(const Cluster& cluster) {
  std::vector<char> out(static_cast<std::size_t>(cluster.num_links()), 0);
  const TopologyGraph& g = cluster.graph();
  const auto network = [&](TopologyGraph::vertex_descriptor v) {
    return g[v].kind == VertexKind::kNic || g[v].kind == VertexKind::kSwitch;
  };
  for (auto [it, end] = boost::edges(g); it != end; ++it) {
    const int index = g[*it].index;
    if (index >= 0 && index < cluster.num_links() &&
        (network(boost::source(*it, g)) || network(boost::target(*it, g)))) {
      out[static_cast<std::size_t>(index)] = 1;
    }
  }
  return out;
}

int RooflineCosts::nodes_spanned(const CollectiveQuery& q) const {
  const int per_node = std::max(1, cluster_.info().gpus_per_node);
  int most = 0;
  for (const auto& grp : q.groups) {
    std::vector<int> nodes;
    nodes.reserve(grp.size());
    for (const int gpu : grp) nodes.push_back(gpu / per_node);
    std::sort(nodes.begin(), nodes.end());
    most =
        std::max(most, static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin()));
  }
  return most;
}

Result<CostEstimate> RooflineCosts::internode_collective(const CollectiveQuery& q,
                                                         const CostEstimate& routed) const {
  const int nodes = nodes_spanned(q);
  if (calibration_->nic.empty() || nodes < 2) return routed;
  // NOTE: an all-reduce reduces at the receiver, as DeepEP's combine does; every other
  // collective only moves bytes, as its dispatch does.
  const std::string phase = q.op == CollectiveOp::kAllReduce ? "combine" : "dispatch";
  const Shape shape = routed_shape(q);
  bool fitted = true;
  const auto seconds = [&](const Algo& a) {
    const double nic_bytes = a.nic_bytes_per_byte * q.bytes;
    double nic = 0.0;
    if (nic_bytes > 0.0) {
      const auto eff = calibration_->nic_efficiency(nic_bytes, nodes, "normal", phase);
      if (!eff || !(*eff > 0.0)) {
        fitted = false;
        return a.seconds(q.bytes);
      }
      nic = a.nic_seconds_per_byte * q.bytes / *eff;
    }
    return std::max(a.other_seconds_per_byte * q.bytes, nic) + a.latency;
  };
  double t = seconds(shape.primary);
  if (shape.tree) t = std::min(t, seconds(*shape.tree));
  if (!fitted) return routed;
  return CostEstimate{t, kSourceCalibrated};
}

}  // namespace moeplan::planner
