// The DeepEP dispatchers of the per-layer cost model: deepep_normal (two hops with per-node
// dedup) and deepep_ll (direct fp8 sends into a fixed buffer), the dedup expectations they rest
// on, and the default pricing of a DeepEP kernel from its hops.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "planner/costs/cost_model_parts.hpp"

namespace moeplan::planner {

std::string ep_kernel_name(EpKernelMode mode, EpKernelPhase phase) {
  return std::string(mode == EpKernelMode::kNormal ? "normal" : "ll") +
         (phase == EpKernelPhase::kDispatch ? "_dispatch" : "_combine");
}

Result<CostEstimate> CostSource::ep_kernel(const EpKernelQuery& q) const {
  CostEstimate out{0.0, ""};
  for (const auto& n : q.notify) {
    auto r = collective(n);
    if (!r) return r.error();
    out.seconds += r->seconds;
    detail::add_source(out.source, r->source);
  }
  double slowest = 0.0;
  for (const auto& hop : q.hops) {
    auto r = collective(hop);
    if (!r) return r.error();
    slowest = std::max(slowest, r->seconds);
    detail::add_source(out.source, r->source);
  }
  out.seconds += slowest;
  if (out.source.empty()) out.source = name();
  return out;
}

double hit_probability(double num_experts, double top_k, double m) {
  if (!(m > 0.0)) return 0.0;
  double miss = 1.0;
  for (int i = 0; i < static_cast<int>(top_k); ++i) {
    const double left = num_experts - i;
    if (!(left > 0.0)) break;
    miss *= std::max(0.0, (num_experts - m - i) / left);
  }
  return 1.0 - miss;
}

double expected_distinct_nodes_uniform(int num_experts, int top_k, int num_nodes) {
  if (num_nodes <= 0) return 0.0;
  const double per_node = static_cast<double>(num_experts) / num_nodes;
  return num_nodes * hit_probability(num_experts, top_k, per_node);
}

std::vector<double> group_hit_probabilities(const std::vector<double>& group_pairs,
                                            double total_pairs, int num_experts, int top_k) {
  std::vector<double> p(group_pairs.size(), 0.0);
  if (!(total_pairs > 0.0) || top_k <= 0) return p;
  for (std::size_t g = 0; g < p.size(); ++g) {
    // NOTE: under uniform routing a group of m experts draws the share s = m/E of the pairs, so
    // a group drawing s counts as m = E·s experts; sampling k distinct experts misses it with
    // C(E−m, k)/C(E, k): exact for uniform routing, the same expectation applied to a skew.
    const double m = num_experts * group_pairs[g] / total_pairs;
    p[g] = hit_probability(num_experts, top_k, m);
  }
  return p;
}

double deepep_ll_dispatch_message_bytes(int hidden) { return 16.0 + hidden + 4.0 * (hidden / 128); }

double deepep_ll_buffer_bytes(int max_tokens_per_rank, int hidden, int num_experts) {
  // NOTE: DeepEP csrc/legacy/config.hpp LowLatencyLayout: the dispatch slot is sized for bf16
  // (max(2H, H + H/128·4) + 16), the combine message 2H + H/128·4; two send buffers (the larger of
  // the dispatch and combine send sides), two receive buffers (E · max tokens messages), two
  // signalling buffers (E ints each).
  const double t = max_tokens_per_rank;
  const double h = hidden;
  const double scales = hidden / 128;
  const double dispatch_msg = 16.0 + std::max(2.0 * h, h + 4.0 * scales);
  const double combine_msg = 4.0 * scales + 2.0 * h;
  const double send = std::max(t * dispatch_msg, num_experts * t * combine_msg);
  const double recv = num_experts * t * std::max(dispatch_msg, combine_msg);
  return 2.0 * send + 2.0 * recv + 2.0 * num_experts * 4.0;
}

namespace detail {

namespace {

/// Bytes of one token in DeepEP's normal kernels, padded to 16 bytes (int4): dispatch sends fp8
/// values with one fp32 scale per 128 (as SGLang runs DeepSeek-V3, and DeepEP's own
/// benchmarks), int top-k indices and fp32 weights and the 8-byte source metadata; combine sends
/// the activation-dtype row, the fp32 weights and the metadata.
double normal_token_bytes(const LayerDims& d, bool dispatch) {
  const double h = d.hidden;
  const double bytes = dispatch ? h + 4.0 * std::floor(h / 128.0) + 8.0 * d.top_k + 8.0
                                : h * d.activation_bytes + 4.0 * d.top_k + 8.0;
  return 16.0 * std::ceil(bytes / 16.0);
}

/// Each EP group's rank at (node, local index).
int member(const std::vector<int>& group, int node, int local, int per_node) {
  return group[static_cast<std::size_t>(node * per_node + local)];
}

/// The largest row sum of a traffic matrix (a collective query's nccl-tests size).
double largest_row(const std::vector<std::vector<double>>& m) {
  double out = 0.0;
  for (const auto& row : m) out = std::max(out, std::accumulate(row.begin(), row.end(), 0.0));
  return out;
}

std::vector<std::vector<double>> transposed(const std::vector<std::vector<double>>& m) {
  std::vector<std::vector<double>> t(m.size(), std::vector<double>(m.size(), 0.0));
  for (std::size_t i = 0; i < m.size(); ++i) {
    for (std::size_t j = 0; j < m.size(); ++j) t[j][i] = m[i][j];
  }
  return t;
}

/// The inter-node hop (one query over the rails) and the NVLink forward (one query per node) of
/// deepep_normal, `bytes` per token; `forward` false gives the combine direction.
std::vector<CollectiveQuery> normal_hops(const LayerDims& d, const Layout& layout,
                                         const std::vector<double>& p_node,
                                         const std::vector<double>& p_gpu, double bytes,
                                         bool forward) {
  const int per_node = d.ranks_per_node;
  const int nodes = d.ep_size / per_node;
  const auto un = static_cast<std::size_t>(nodes);
  const auto ug = static_cast<std::size_t>(per_node);
  const double tokens = d.group_tokens;
  std::vector<CollectiveQuery> hops;
  const auto ep_groups = layout.ep_groups();
  // Hop 1: rank (a, l) sends each token once to (b, l) for every node b it reaches.
  CollectiveQuery rail{CollectiveOp::kAllToAllV, {}, 0.0, {}, d.dtype};
  for (const auto& g : ep_groups) {
    for (int l = 0; l < per_node; ++l) {
      std::vector<int> lane;
      for (int a = 0; a < nodes; ++a) lane.push_back(member(g, a, l, per_node));
      rail.groups.push_back(std::move(lane));
    }
  }
  rail.matrix.assign(un, std::vector<double>(un, 0.0));
  for (std::size_t a = 0; a < un; ++a) {
    for (std::size_t b = 0; b < un; ++b) {
      if (a != b) rail.matrix[a][b] = tokens * p_node[b] * bytes;
    }
  }
  // Hop 2: (b, l) holds the tokens of every node's rank l that reach node b and forwards each to
  // the GPUs of node b holding its experts: nodes · T · P(GPU j) rows to (b, j).
  std::vector<CollectiveQuery> forward_hops;
  for (int b = 0; b < nodes; ++b) {
    CollectiveQuery nv{CollectiveOp::kAllToAllV, {}, 0.0, {}, d.dtype};
    for (const auto& g : ep_groups) {
      std::vector<int> node;
      for (int j = 0; j < per_node; ++j) node.push_back(member(g, b, j, per_node));
      nv.groups.push_back(std::move(node));
    }
    nv.matrix.assign(ug, std::vector<double>(ug, 0.0));
    for (std::size_t l = 0; l < ug; ++l) {
      for (std::size_t j = 0; j < ug; ++j) {
        if (l != j) {
          nv.matrix[l][j] = nodes * tokens * p_gpu[static_cast<std::size_t>(b) * ug + j] * bytes;
        }
      }
    }
    forward_hops.push_back(std::move(nv));
  }
  if (!forward) {
    rail.matrix = transposed(rail.matrix);
    for (auto& nv : forward_hops) nv.matrix = transposed(nv.matrix);
  }
  rail.bytes = largest_row(rail.matrix);
  hops.push_back(std::move(rail));
  for (auto& nv : forward_hops) {
    nv.bytes = largest_row(nv.matrix);
    if (nv.bytes > 0.0) hops.push_back(std::move(nv));
  }
  if (!(hops.front().bytes > 0.0)) hops.erase(hops.begin());
  return hops;
}

EpKernelQuery kernel_query(const LayerDims& d, EpKernelMode mode, EpKernelPhase phase) {
  EpKernelQuery q;
  q.mode = mode;
  q.phase = phase;
  q.tokens = d.group_tokens;
  q.hidden = static_cast<int>(d.hidden);
  q.top_k = static_cast<int>(d.top_k);
  q.num_experts = d.num_experts;
  q.num_nodes = std::max(1, d.ep_size / std::max(1, d.ranks_per_node));
  q.ep_size = d.ep_size;
  q.dtype = d.dtype;
  return q;
}

}  // namespace

Result<Exchange> deepep_normal_cost(const CostSource& cs, const LayerDims& d, const Layout& layout,
                                    const std::vector<double>& slots, const RankLoad& load,
                                    LayerCost& c) {
  const int per_node = d.ranks_per_node;
  const int nodes = d.ep_size / per_node;
  const int k = static_cast<int>(d.top_k);
  std::vector<double> node_pairs(static_cast<std::size_t>(nodes), 0.0);
  for (std::size_t r = 0; r < load.pairs.size(); ++r) {
    node_pairs[r / static_cast<std::size_t>(per_node)] += load.pairs[r];
  }
  const auto p_node = group_hit_probabilities(node_pairs, load.total, d.num_experts, k);
  const auto p_gpu = group_hit_probabilities(load.pairs, load.total, d.num_experts, k);
  const double tokens = d.group_tokens;

  EpKernelQuery dispatch = kernel_query(d, EpKernelMode::kNormal, EpKernelPhase::kDispatch);
  dispatch.notify.push_back(CollectiveQuery{
      CollectiveOp::kAllToAll, layout.ep_groups(), d.num_experts * 4.0, {}, d.dtype});
  dispatch.hops = normal_hops(d, layout, p_node, p_gpu, normal_token_bytes(d, true), true);
  const double fp8_row = deepep_ll_dispatch_message_bytes(static_cast<int>(d.hidden)) - 16.0;
  MOEPLAN_TRY_STATUS(add(
      c.dispatch, cs.elementwise({"quantize_fp8", tokens * (2.0 * d.hidden + fp8_row), d.dtype})));
  MOEPLAN_TRY_STATUS(add(c.dispatch, cs.ep_kernel(dispatch)));
  // The received rows (one per token and GPU) dequantized for the experts.
  const double received = nodes * per_node * tokens * *std::max_element(p_gpu.begin(), p_gpu.end());
  MOEPLAN_TRY_STATUS(
      add(c.dispatch,
          cs.elementwise({"dequantize_fp8", received * (fp8_row + 2.0 * d.hidden), d.dtype})));
  // Received rows expanded to one per (token, local expert).
  if (!d.fused) {
    MOEPLAN_TRY_STATUS(
        add(c.dispatch, cs.elementwise({"permute", 2.0 * d.row_bytes(load.max), d.dtype})));
  }

  // Combine: each GPU returns one row per token it served to the forwarder, which sums a node's
  // rows before the inter-node hop; the source sums one row per node.
  EpKernelQuery combine = kernel_query(d, EpKernelMode::kNormal, EpKernelPhase::kCombine);
  combine.hops = normal_hops(d, layout, p_node, p_gpu, normal_token_bytes(d, false), false);
  MOEPLAN_TRY_STATUS(add(c.combine, cs.ep_kernel(combine)));
  double forwarder_rows = 0.0;  // rows one forwarder reads and writes, the busiest node
  for (int b = 0; b < nodes; ++b) {
    double in = 0.0;
    for (int j = 0; j < per_node; ++j) in += p_gpu[static_cast<std::size_t>(b * per_node + j)];
    forwarder_rows =
        std::max(forwarder_rows, nodes * tokens * (in + p_node[static_cast<std::size_t>(b)]));
  }
  const double nodes_reached = std::accumulate(p_node.begin(), p_node.end(), 0.0);
  MOEPLAN_TRY_STATUS(
      add(c.combine,
          cs.elementwise({"combine_reduce",
                          d.row_bytes(forwarder_rows + tokens * (nodes_reached + 1.0)), d.dtype})));

  Exchange x;
  x.rows = rows_per_rank(slots, d);
  const double max_gpu = *std::max_element(p_gpu.begin(), p_gpu.end());
  const double max_node = *std::max_element(p_node.begin(), p_node.end());
  x.buffers = d.row_bytes(tokens * nodes_reached + nodes * tokens * max_node +
                          nodes * per_node * tokens * max_gpu);
  return x;
}

Result<Exchange> deepep_ll_cost(const CostSource& cs, const LayerDims& d, const Layout& layout,
                                const std::vector<double>& slots, const RankLoad& load,
                                LayerCost& c) {
  Exchange x;
  x.rows = rows_per_rank(slots, d);
  x.buffers = deepep_ll_buffer_bytes(d.ll_max_tokens, static_cast<int>(d.hidden), d.num_experts);
  const double tokens = d.group_tokens;
  if (tokens > d.ll_max_tokens) {
    x.infeasible = "deepep_ll: " + std::to_string(static_cast<long long>(std::ceil(tokens))) +
                   " tokens per rank exceed its buffer of " + std::to_string(d.ll_max_tokens) +
                   " tokens per rank (raise {ll_max_tokens})";
  }
  const double msg_dispatch = deepep_ll_dispatch_message_bytes(static_cast<int>(d.hidden));
  const double msg_combine = 2.0 * d.hidden;  // bf16 combine
  const auto ranks = static_cast<std::size_t>(d.ep_size);
  const double pairs = tokens * d.top_k;
  std::vector<std::vector<double>> share(ranks, std::vector<double>(ranks, 0.0));
  for (std::size_t i = 0; i < ranks; ++i) {
    for (std::size_t j = 0; j < ranks; ++j) {
      if (i != j && load.total > 0.0) share[i][j] = pairs * load.pairs[j] / load.total;
    }
  }
  const auto scaled = [](std::vector<std::vector<double>> m, double f) {
    for (auto& row : m) {
      for (double& v : row) v *= f;
    }
    return m;
  };
  // Dispatch: quantize the own tokens to fp8 with per-128 scales, send every pair directly, the
  // receiver dequantizes its rows for the bf16 experts.
  MOEPLAN_TRY_STATUS(
      add(c.dispatch,
          cs.elementwise({"quantize_fp8", tokens * (2.0 * d.hidden + msg_dispatch), d.dtype})));
  EpKernelQuery dispatch = kernel_query(d, EpKernelMode::kLowLatency, EpKernelPhase::kDispatch);
  CollectiveQuery send{CollectiveOp::kAllToAllV, layout.ep_groups(), 0.0,
                       scaled(share, msg_dispatch), d.dtype};
  send.bytes = largest_row(send.matrix);
  if (send.bytes > 0.0) dispatch.hops.push_back(send);
  MOEPLAN_TRY_STATUS(add(c.dispatch, cs.ep_kernel(dispatch)));
  MOEPLAN_TRY_STATUS(
      add(c.dispatch,
          cs.elementwise({"dequantize_fp8", load.max * (msg_dispatch + 2.0 * d.hidden), d.dtype})));
  // Combine: every pair's bf16 output straight back to its token's rank.
  EpKernelQuery combine = kernel_query(d, EpKernelMode::kLowLatency, EpKernelPhase::kCombine);
  CollectiveQuery back{CollectiveOp::kAllToAllV, layout.ep_groups(), 0.0,
                       transposed(scaled(share, msg_combine)), d.dtype};
  back.bytes = largest_row(back.matrix);
  if (back.bytes > 0.0) combine.hops.push_back(back);
  MOEPLAN_TRY_STATUS(add(c.combine, cs.ep_kernel(combine)));
  return x;
}

}  // namespace detail

}  // namespace moeplan::planner
