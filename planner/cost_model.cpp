// The per-layer MoE cost model for the three dispatchers.
#include "planner/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace moeplan::planner {

std::string phase_name(Phase p) { return p == Phase::kPrefill ? "prefill" : "decode"; }

std::optional<Phase> parse_phase(const std::string& name) {
  if (name == "prefill") return Phase::kPrefill;
  if (name == "decode") return Phase::kDecode;
  return std::nullopt;
}

namespace {

/// Inverse of the standard normal CDF (Acklam's rational approximation, |error| < 1.2e-9).
double normal_quantile(double p) {
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                 -2.759285104469687e+02, 1.383577518672690e+02,
                                 -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                 -1.556989798598866e+02, 6.680131188771972e+01,
                                 -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                 -2.400758277161838e+00, -2.549732539343734e+00,
                                 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                 2.445134137142996e+00, 3.754408661907416e+00};
  const double lo = 0.02425;
  if (p < lo) {
    const double q = std::sqrt(-2.0 * std::log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  }
  if (p > 1.0 - lo) return -normal_quantile(1.0 - p);
  const double q = p - 0.5;
  const double r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
}

}  // namespace

double padded_capacity(const std::vector<double>& slot_tokens, int ep_size) {
  // NOTE: slot s receives c_s pairs in total, each from one of ep source ranks: a source's count
  // is Binomial(c_s, 1/ep) with mean μ = c_s/ep and σ² = μ(1 − 1/ep). The capacity is the
  // largest count any source sends to any slot; the expected largest of ep such counts is
  // μ + σ·z(ep) with Blom's z(n) = Φ⁻¹((n − 0.375)/(n + 0.25)) (0.59 for 2 sources, 1.03 for 4).
  const double ep = static_cast<double>(ep_size);
  const double z = ep_size > 1 ? normal_quantile((ep - 0.375) / (ep + 0.25)) : 0.0;
  double cap = 0.0;
  for (const double c : slot_tokens) {
    const double mu = c / ep;
    cap = std::max(cap, mu + z * std::sqrt(std::max(0.0, mu * (1.0 - 1.0 / ep))));
  }
  return std::ceil(cap);
}

namespace {

/// Adds an answer to a cost item; the item names every source that contributed.
Status add(CostItem& item, const Result<CostEstimate>& r) {
  if (!r) return r.error();
  item.seconds += r->seconds;
  if (item.source.empty()) {
    item.source = r->source;
  } else if (item.source.find(r->source) == std::string::npos) {
    item.source += "+" + r->source;
  }
  return Status::Ok();
}

/// Figures of one layer that depend on the slot token counts.
struct LayerFigures {
  LayerCost cost;
  double imbalance = 1.0;
  double expert_rows = 0.0;
  double useful_rows = 0.0;
  double buffers = 0.0;
  double activations = 0.0;
};

struct Dims {
  double hidden = 0.0;        // H
  double width = 0.0;         // I / tp
  double shared_width = 0.0;  // S / tp
  double top_k = 0.0;
  double act_bytes = 0.0;     // activation bytes per element
  double group_tokens = 0.0;  // Tg = tp · tokens_per_gpu
  int num_experts = 0;
  int ep = 1;
  int slots_per_rank = 1;
  DType dtype = DType::kBf16;
};

Result<LayerFigures> cost_one_layer(const CostContext& ctx, const Layout& layout, const Dims& d,
                                    const std::vector<double>& slots) {
  LayerFigures f;
  LayerCost& c = f.cost;
  const CostSource& cs = ctx.costs;
  const double H = d.hidden;
  const double b = d.act_bytes;
  const double Tg = d.group_tokens;
  const double k = d.top_k;
  const double ep = static_cast<double>(d.ep);
  const auto spr = static_cast<std::size_t>(d.slots_per_rank);
  const std::size_t num_slots = slots.size();
  const auto ep_groups = layout.ep_groups();
  const auto tp_groups = layout.tp_groups();
  const auto rank_pairs = rank_tokens({slots}, d.ep).front();
  const double pairs_max = *std::max_element(rank_pairs.begin(), rank_pairs.end());
  const double pairs_total = std::accumulate(rank_pairs.begin(), rank_pairs.end(), 0.0);
  const double pairs_mean = pairs_total / ep;
  f.imbalance = pairs_mean > 0.0 ? pairs_max / pairs_mean : 1.0;

  // Router: logits GEMM [Tg, H] x [H, E], then softmax/sigmoid + top-k over fp32 logits.
  MOEPLAN_TRY_STATUS(add(c.router, cs.gemm({Tg, static_cast<double>(d.num_experts), H, d.dtype})));
  MOEPLAN_TRY_STATUS(add(
      c.router, cs.elementwise({"router_topk", Tg * d.num_experts * 4.0 + Tg * k * 8.0, d.dtype})));

  // Rows each local slot computes, per EP rank.
  std::vector<std::vector<double>> rows(static_cast<std::size_t>(d.ep));
  switch (layout.dispatcher) {
    case Dispatcher::kPaddedA2a: {
      // Capacity: the most tokens one source rank routes to one slot, all-reduced (MAX) over EP.
      const double cap = padded_capacity(slots, d.ep);
      const double send = static_cast<double>(num_slots) * cap * H * b;
      MOEPLAN_TRY_STATUS(add(
          c.dispatch,
          cs.collective({CollectiveOp::kAllReduce, ep_groups, d.num_experts * 4.0, {}, d.dtype})));
      // Tokens scattered into their slots of the padded send buffer; the received buffer staged
      // out into expert-major rows.
      MOEPLAN_TRY_STATUS(
          add(c.dispatch, cs.elementwise({"permute", 2.0 * Tg * k * H * b, d.dtype})));
      MOEPLAN_TRY_STATUS(add(c.dispatch, cs.elementwise({"stage", 2.0 * send, d.dtype})));
      MOEPLAN_TRY_STATUS(
          add(c.dispatch, cs.collective({CollectiveOp::kAllToAll, ep_groups, send, {}, d.dtype})));
      for (auto& r : rows) r.assign(spr, ep * cap);
      // Expert outputs staged in, the returned buffer received and staged out.
      MOEPLAN_TRY_STATUS(add(c.combine, cs.elementwise({"stage", 3.0 * send, d.dtype})));
      MOEPLAN_TRY_STATUS(
          add(c.combine, cs.collective({CollectiveOp::kAllToAll, ep_groups, send, {}, d.dtype})));
      MOEPLAN_TRY_STATUS(
          add(c.combine, cs.elementwise({"combine_sum", (Tg * k + Tg) * H * b, d.dtype})));
      f.buffers = 2.0 * send;
      break;
    }
    case Dispatcher::kAllGather: {
      // Every rank gathers the EP group's tokens, keeps the pairs routed to its slots, and
      // all-gathers (-v) the expert outputs back.
      MOEPLAN_TRY_STATUS(
          add(c.dispatch,
              cs.collective({CollectiveOp::kAllGather, ep_groups, ep * Tg * H * b, {}, d.dtype})));
      // Own tokens staged into the wire format, the gathered ones received and staged out; the
      // local filter gathers the rows routed here.
      MOEPLAN_TRY_STATUS(
          add(c.dispatch, cs.elementwise({"stage", (1.0 + 2.0 * ep) * Tg * H * b, d.dtype})));
      MOEPLAN_TRY_STATUS(
          add(c.dispatch, cs.elementwise({"permute", 2.0 * pairs_max * H * b, d.dtype})));
      std::vector<std::vector<double>> m(static_cast<std::size_t>(d.ep),
                                         std::vector<double>(static_cast<std::size_t>(d.ep)));
      double row_max = 0.0;
      for (std::size_t i = 0; i < m.size(); ++i) {
        for (std::size_t j = 0; j < m.size(); ++j) m[i][j] = i == j ? 0.0 : rank_pairs[i] * H * b;
        row_max = std::max(row_max, (ep - 1.0) * rank_pairs[i] * H * b);
      }
      // This rank's expert outputs staged in, every rank's gathered outputs received and staged
      // out.
      MOEPLAN_TRY_STATUS(add(
          c.combine, cs.elementwise({"stage", (pairs_max + 2.0 * pairs_total) * H * b, d.dtype})));
      if (row_max > 0.0) {
        MOEPLAN_TRY_STATUS(add(c.combine, cs.collective({CollectiveOp::kAllGatherV, ep_groups,
                                                         row_max, std::move(m), d.dtype})));
      }
      MOEPLAN_TRY_STATUS(
          add(c.combine, cs.elementwise({"combine_sum", (Tg * k + Tg) * H * b, d.dtype})));
      f.buffers = ep * Tg * H * b + pairs_total * H * b;
      break;
    }
    case Dispatcher::kA2av: {
      // Count exchange (E ints per rank), then variable all-to-all by where the pairs land.
      MOEPLAN_TRY_STATUS(add(
          c.dispatch,
          cs.collective({CollectiveOp::kAllToAll, ep_groups, d.num_experts * 4.0, {}, d.dtype})));
      MOEPLAN_TRY_STATUS(
          add(c.dispatch, cs.elementwise({"permute", 2.0 * Tg * k * H * b, d.dtype})));
      std::vector<std::vector<double>> m(static_cast<std::size_t>(d.ep),
                                         std::vector<double>(static_cast<std::size_t>(d.ep)));
      std::vector<std::vector<double>> mt = m;
      for (std::size_t i = 0; i < m.size(); ++i) {
        for (std::size_t j = 0; j < m.size(); ++j) {
          // Rank i's Tg·k pairs split over destinations in proportion to their load.
          m[i][j] = pairs_total > 0.0 ? Tg * k * rank_pairs[j] / pairs_total * H * b : 0.0;
          mt[j][i] = m[i][j];
        }
      }
      const double send = Tg * k * H * b;
      const double recv_max =
          ep * (pairs_total > 0.0 ? Tg * k * pairs_max / pairs_total : 0.0) * H * b;
      // Received rows staged out of the wire format; expert outputs staged back in and the
      // returned rows received and staged out again.
      const double staged = pairs_max * H * b;
      if (send > 0.0) {
        MOEPLAN_TRY_STATUS(add(c.dispatch, cs.collective({CollectiveOp::kAllToAllV, ep_groups, send,
                                                          std::move(m), d.dtype})));
        MOEPLAN_TRY_STATUS(add(c.dispatch, cs.elementwise({"stage", 2.0 * staged, d.dtype})));
        MOEPLAN_TRY_STATUS(add(c.combine, cs.elementwise({"stage", staged + 2.0 * send, d.dtype})));
        MOEPLAN_TRY_STATUS(add(c.combine, cs.collective({CollectiveOp::kAllToAllV, ep_groups,
                                                         recv_max, std::move(mt), d.dtype})));
      }
      MOEPLAN_TRY_STATUS(
          add(c.combine, cs.elementwise({"combine_sum", (Tg * k + Tg) * H * b, d.dtype})));
      f.buffers = send + recv_max;
      break;
    }
  }
  if (layout.dispatcher != Dispatcher::kPaddedA2a) {
    for (std::size_t r = 0; r < rows.size(); ++r) {
      rows[r].assign(slots.begin() + static_cast<std::ptrdiff_t>(r * spr),
                     slots.begin() + static_cast<std::ptrdiff_t>((r + 1) * spr));
    }
  }

  // Expert compute: gate+up [m, H] x [H, 2I/tp], SiLU·up, down [m, I/tp] x [I/tp, H]; the
  // slowest rank sets the layer's time.
  double slowest = -1.0;
  std::string source;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    CostItem item;
    const double m_total = std::accumulate(rows[r].begin(), rows[r].end(), 0.0);
    MOEPLAN_TRY_STATUS(add(item, cs.grouped_gemm({rows[r], 2.0 * d.width, H, d.dtype})));
    MOEPLAN_TRY_STATUS(
        add(item, cs.elementwise({"silu_mul", 3.0 * m_total * d.width * b, d.dtype})));
    MOEPLAN_TRY_STATUS(add(item, cs.grouped_gemm({rows[r], H, d.width, d.dtype})));
    if (item.seconds > slowest) {
      slowest = item.seconds;
      c.experts = item;
      f.expert_rows = m_total;
      f.useful_rows = rank_pairs[r];
    }
  }
  const double rows_max = f.expert_rows;

  // TP all-reduce of the routed expert outputs (the slowest rank's rows) and of the shared
  // expert's output.
  if (layout.tp_size > 1) {
    MOEPLAN_TRY_STATUS(add(
        c.tp, cs.collective({CollectiveOp::kAllReduce, tp_groups, rows_max * H * b, {}, d.dtype})));
    if (d.shared_width > 0.0) {
      MOEPLAN_TRY_STATUS(
          add(c.tp, cs.collective({CollectiveOp::kAllReduce, tp_groups, Tg * H * b, {}, d.dtype})));
    }
  }
  if (d.shared_width > 0.0) {
    MOEPLAN_TRY_STATUS(add(c.shared, cs.gemm({Tg, 2.0 * d.shared_width, H, d.dtype})));
    MOEPLAN_TRY_STATUS(
        add(c.shared, cs.elementwise({"silu_mul", 3.0 * Tg * d.shared_width * b, d.dtype})));
    MOEPLAN_TRY_STATUS(add(c.shared, cs.gemm({Tg, H, d.shared_width, d.dtype})));
    if (ctx.model.shared_expert_gated) {
      MOEPLAN_TRY_STATUS(
          add(c.shared, cs.elementwise({"sigmoid_gate", 3.0 * Tg * H * b, d.dtype})));
    }
  }
  f.activations =
      4.0 * Tg * H * b + rows_max * (3.0 * d.width + H) * b + 3.0 * Tg * d.shared_width * b;
  for (CostItem* item : {&c.router, &c.dispatch, &c.experts, &c.combine, &c.tp, &c.shared}) {
    if (item->source.empty()) item->source = cs.name();
  }
  return f;
}

void accumulate(LayerCost& sum, const LayerCost& add_cost, double weight) {
  CostItem* dst[] = {&sum.router, &sum.dispatch, &sum.experts, &sum.combine, &sum.tp, &sum.shared};
  const CostItem* src[] = {&add_cost.router,  &add_cost.dispatch, &add_cost.experts,
                           &add_cost.combine, &add_cost.tp,       &add_cost.shared};
  for (std::size_t i = 0; i < 6; ++i) {
    dst[i]->seconds += weight * src[i]->seconds;
    if (dst[i]->source.empty()) {
      dst[i]->source = src[i]->source;
    } else if (dst[i]->source.find(src[i]->source) == std::string::npos) {
      dst[i]->source += "+" + src[i]->source;
    }
  }
}

}  // namespace

Result<LayoutCost> cost_layout(const CostContext& ctx, const Layout& layout) {
  const auto& m = ctx.model;
  if (layout.num_gpus > ctx.cluster.num_gpus()) {
    return Error{"layout " + layout.shape_name() + " needs " + std::to_string(layout.num_gpus) +
                 " GPUs but cluster '" + ctx.cluster.name() + "' has " +
                 std::to_string(ctx.cluster.num_gpus())};
  }
  if (layout.dp_size * layout.ep_size * layout.tp_size != layout.num_gpus) {
    return Error{"layout " + layout.shape_name() +
                 ": expected dp·ep·tp = " + std::to_string(layout.num_gpus)};
  }
  if (auto rule = layout_rule_violation(m, layout.ep_size, layout.tp_size)) {
    return Error{"layout " + layout.shape_name() + " is illegal for '" + m.name + "': " + *rule};
  }
  if (ctx.workload.tokens_per_gpu <= 0) {
    return Error{"tokens per GPU: expected a positive count, got " +
                 std::to_string(ctx.workload.tokens_per_gpu)};
  }
  const int num_moe = m.num_moe_layers();
  if (ctx.load.num_layers() != 1 && ctx.load.num_layers() != num_moe) {
    return Error{"load '" + ctx.load.source + "' has " + std::to_string(ctx.load.num_layers()) +
                 " layers, expected 1 or the " + std::to_string(num_moe) + " MoE layers of '" +
                 m.name + "'"};
  }
  auto placement = ctx.placement
                       ? ctx.placement(layout.ep_size)
                       : Result<Placement>(contiguous_placement(1, m.num_experts, layout.ep_size));
  if (!placement) return placement.error();
  if (placement->ep_size != layout.ep_size) {
    return Error{"placement '" + placement->policy + "' is for ep_size " +
                 std::to_string(placement->ep_size) + ", expected " +
                 std::to_string(layout.ep_size)};
  }

  Dims d;
  d.hidden = static_cast<double>(m.hidden_size);
  d.width = static_cast<double>(m.moe_intermediate_size / layout.tp_size);
  d.shared_width = static_cast<double>(m.shared_intermediate_total() / layout.tp_size);
  d.top_k = m.num_experts_per_tok;
  d.dtype = m.dtype;
  d.act_bytes = dtype_bytes(m.dtype);
  d.group_tokens = static_cast<double>(layout.tp_size) * ctx.workload.tokens_per_gpu;
  d.num_experts = m.num_experts;
  d.ep = layout.ep_size;
  d.slots_per_rank = placement->slots_per_rank();
  const double routed_pairs = layout.ep_size * d.group_tokens * d.top_k;
  auto slots = slot_tokens(ctx.load, *placement, routed_pairs);
  if (!slots) return slots.error();

  LayoutCost out;
  out.layout = layout;
  const double layer_weight = static_cast<double>(num_moe) / static_cast<double>(slots->size());
  LayerCost step;
  double buffers = 0.0, activations = 0.0, imbalance = 0.0, rows = 0.0, useful = 0.0;
  const std::vector<double>* prev = nullptr;
  const bool varies = std::any_of(slots->begin(), slots->end(), [&](const std::vector<double>& r) {
    return r != slots->front();
  });
  LayerFigures fig;
  for (const auto& row : *slots) {
    if (prev == nullptr || *prev != row) {  // identical rows (e.g. uniform load) cost the same
      auto r = cost_one_layer(ctx, layout, d, row);
      if (!r) return r.error();
      fig = std::move(*r);
      prev = &row;
    }
    accumulate(step, fig.cost, layer_weight);
    if (varies) {
      out.layers.push_back(fig.cost);
      out.layer_imbalance.push_back(fig.imbalance);
    }
    buffers = std::max(buffers, fig.buffers);
    activations = std::max(activations, fig.activations);
    imbalance += fig.imbalance * layer_weight;
    rows += fig.expert_rows * layer_weight;
    useful += fig.useful_rows * layer_weight;
  }
  out.step_seconds = step.total();
  out.per_layer = step;
  for (CostItem* item : {&out.per_layer.router, &out.per_layer.dispatch, &out.per_layer.experts,
                         &out.per_layer.combine, &out.per_layer.tp, &out.per_layer.shared}) {
    item->seconds /= num_moe;
  }
  out.tokens_per_s_per_gpu =
      out.step_seconds > 0.0 ? ctx.workload.tokens_per_gpu / out.step_seconds : 0.0;
  out.imbalance = imbalance / num_moe;
  out.expert_rows = rows / num_moe;
  out.useful_rows = useful / num_moe;

  // Memory per GPU.
  const double wb = dtype_bytes(m.dtype);
  const double H = d.hidden;
  const double tp = layout.tp_size;
  MemoryPerGpu& mem = out.memory;
  mem.experts = num_moe * d.slots_per_rank * 3.0 * H * d.width * wb;
  mem.shared = num_moe *
               (3.0 * H * d.shared_width + (m.shared_expert_gated ? H : 0.0) + H * m.num_experts) *
               wb;
  const double attention = static_cast<double>(m.attention.parameters(m.hidden_size)) / tp;
  const double dense_mlp =
      m.num_dense_layers() * static_cast<double>(m.dense_mlp_parameters()) / tp;
  const double embed =
      static_cast<double>(m.vocab_size) * H * (m.tie_word_embeddings ? 1.0 : 2.0) / tp;
  mem.dense = (m.num_hidden_layers * (attention + 2.0 * H) + dense_mlp + embed + H) * wb;
  mem.buffers = buffers;
  mem.activations = activations;
  out.memory_capacity = ctx.cluster.device().hbm_bytes;
  out.feasible = mem.total() <= out.memory_capacity;
  return out;
}

}  // namespace moeplan::planner
