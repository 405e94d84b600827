// The per-layer MoE cost model for the three dispatchers.
#include "planner/costs/cost_model.hpp"

#include "planner/costs/cost_model_parts.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

namespace moeplan::planner {

std::string phase_name(Phase p) { return p == Phase::kPrefill ? "prefill" : "decode"; }

std::string moe_table_dtype(const WeightFormat& f) {
  switch (f.scheme) {
    case WeightScheme::kPlain: return std::string(dtype_name(f.plain));
    case WeightScheme::kFp8Block: return "fp8_block";
    case WeightScheme::kFp8Channel:
    case WeightScheme::kFp8Tensor: return "fp8";
    case WeightScheme::kMxfp4: return "w4a16_mxfp4";
    case WeightScheme::kNvfp4: return "nvfp4";
    case WeightScheme::kW4A16: return "int4_wo";
  }
  return "?";
}

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

namespace detail {

/// True when the "+"-joined source list `sources` names `source`.
bool names_source(const std::string& sources, const std::string& source) {
  for (std::size_t at = 0; at <= sources.size();) {
    std::size_t end = sources.find('+', at);
    if (end == std::string::npos) end = sources.size();
    if (sources.compare(at, end - at, source) == 0) return true;
    at = end + 1;
  }
  return false;
}

void add_source(std::string& sources, const std::string& source) {
  for (std::size_t at = 0; at <= source.size();) {
    std::size_t end = source.find('+', at);
    if (end == std::string::npos) end = source.size();
    const std::string one = source.substr(at, end - at);
    if (sources.empty()) {
      sources = one;
    } else if (!one.empty() && !names_source(sources, one)) {
      sources += "+" + one;
    }
    at = end + 1;
  }
}

Status add(CostItem& item, const Result<CostEstimate>& r) {
  if (!r) return r.error();
  item.seconds += r->seconds;
  add_source(item.source, r->source);
  return Status::Ok();
}

std::vector<std::vector<double>> rows_per_rank(const std::vector<double>& slots,
                                               const LayerDims& d) {
  const auto per_rank = static_cast<std::size_t>(d.slots_per_rank);
  std::vector<std::vector<double>> rows(static_cast<std::size_t>(d.ep_size));
  for (std::size_t r = 0; r < rows.size(); ++r) {
    rows[r].assign(slots.begin() + static_cast<std::ptrdiff_t>(r * per_rank),
                   slots.begin() + static_cast<std::ptrdiff_t>((r + 1) * per_rank));
  }
  return rows;
}

}  // namespace detail

namespace {

using detail::add;
using detail::add_source;
using detail::Exchange;
using detail::LayerDims;
using detail::RankLoad;
using detail::rows_per_rank;

/// Figures of one layer that depend on the slot token counts.
struct LayerFigures {
  LayerCost cost;
  double imbalance = 1.0;
  double expert_rows = 0.0;
  double useful_rows = 0.0;
  double buffers = 0.0;
  double activations = 0.0;
  std::string infeasible;  ///< the dispatcher cannot run this layer ("" when it can)
};

/// Router: logits GEMM [Tg, H] × [H, E], then softmax/sigmoid + top-k over fp32 logits.
Status router_cost(const CostSource& cs, const LayerDims& d, CostItem& router) {
  const double tokens = d.group_tokens;
  const double experts = static_cast<double>(d.num_experts);
  MOEPLAN_TRY_STATUS(add(router, cs.gemm({tokens, experts, d.hidden, d.dtype})));
  return add(router, cs.elementwise({"router_topk", tokens * experts * 4.0 + tokens * d.top_k * 8.0,
                                     d.dtype}));
}

/// Whether the dispatch payload is fp8 (values and scales) rather than the dtype.
bool fp8_payload(const LayerDims& d) { return d.dispatch_row != d.row_bytes(1.0); }

/// The dispatch's wire buffers: `sent` rows written into the wire format (this rank's) and
/// `received` rows made usable for the experts. In the dtype both are `stage` (pack, unpack:
/// 2 bytes moved per wire byte of the received); with an fp8 payload (kernels/moe_layer.cpp's
/// Payload) the rows were quantized once already (quantize_fp8), so sending copies the wire rows
/// (`stage` on their bytes) and receiving dequantizes them (`dequantize_fp8`, bytes as the
/// profiler's op counts them: the fp8 row and scales read, the dtype row written).
Status dispatch_staging(const CostSource& cs, const LayerDims& d, double sent, double received,
                        LayerCost& c) {
  if (!fp8_payload(d)) {
    return add(c.dispatch,
               cs.elementwise({"stage", d.dispatch_bytes(sent + 2.0 * received), d.dtype}));
  }
  MOEPLAN_TRY_STATUS(add(c.dispatch, cs.elementwise({"stage", d.dispatch_bytes(sent), d.dtype})));
  return add(c.dispatch, cs.elementwise({"dequantize_fp8",
                                         received * (d.dispatch_row + 2.0 * d.hidden), d.dtype}));
}

/// padded_a2a (PaddleNLP #9368; kernels/moe_layer.cpp padded_a2a): the capacity (the most
/// tokens one source rank routes to one slot) all-reduced over EP, an equal-split all-to-all of
/// every slot padded to it, and the same back.
Result<Exchange> padded_a2a_cost(const CostSource& cs, const LayerDims& d,
                                 const std::vector<std::vector<int>>& ep_groups,
                                 const std::vector<double>& slots, LayerCost& c) {
  const double capacity = padded_capacity(slots, d.ep_size);
  const double padded_rows = static_cast<double>(slots.size()) * capacity;
  const double send_bytes = d.dispatch_bytes(padded_rows);
  const double return_bytes = d.row_bytes(padded_rows);
  const double routed_bytes = d.row_bytes(d.group_tokens * d.top_k);
  MOEPLAN_TRY_STATUS(
      add(c.dispatch,
          cs.collective({CollectiveOp::kAllReduce, ep_groups, d.num_experts * 4.0, {}, d.dtype})));
  // Tokens scattered into their slots of the padded send buffer; the received buffer staged out
  // into expert-major rows.
  if (!d.fused) {
    MOEPLAN_TRY_STATUS(add(c.dispatch, cs.elementwise({"permute", 2.0 * routed_bytes, d.dtype})));
  }
  MOEPLAN_TRY_STATUS(dispatch_staging(cs, d, 0.0, padded_rows, c));
  MOEPLAN_TRY_STATUS(add(
      c.dispatch, cs.collective({CollectiveOp::kAllToAll, ep_groups, send_bytes, {}, d.dtype})));
  // Expert outputs staged in, the returned buffer received and staged out.
  MOEPLAN_TRY_STATUS(add(c.combine, cs.elementwise({"stage", 3.0 * return_bytes, d.dtype})));
  MOEPLAN_TRY_STATUS(add(
      c.combine, cs.collective({CollectiveOp::kAllToAll, ep_groups, return_bytes, {}, d.dtype})));
  Exchange x;
  // Every slot computes its padded rows: capacity from each of the ep source ranks.
  x.expected_rows = false;
  x.rows.assign(static_cast<std::size_t>(d.ep_size),
                std::vector<double>(static_cast<std::size_t>(d.slots_per_rank),
                                    static_cast<double>(d.ep_size) * capacity));
  x.buffers = send_bytes + return_bytes;
  return x;
}

/// allgather (sglang-jax #349; kernels/moe_layer.cpp allgather): every rank gathers the EP
/// group's tokens, keeps the pairs routed to its slots, and all-gathers (-v) the expert outputs.
Result<Exchange> allgather_cost(const CostSource& cs, const LayerDims& d,
                                const std::vector<std::vector<int>>& ep_groups,
                                const std::vector<double>& slots, const RankLoad& load,
                                LayerCost& c) {
  const double ep = static_cast<double>(d.ep_size);
  MOEPLAN_TRY_STATUS(add(c.dispatch, cs.collective({CollectiveOp::kAllGather,
                                                    ep_groups,
                                                    d.dispatch_bytes(ep * d.group_tokens),
                                                    {},
                                                    d.dtype})));
  // Own tokens staged into the wire format, the gathered ones received and staged out; the local
  // filter gathers the rows routed here.
  MOEPLAN_TRY_STATUS(dispatch_staging(cs, d, d.group_tokens, ep * d.group_tokens, c));
  if (!d.fused) {
    MOEPLAN_TRY_STATUS(
        add(c.dispatch, cs.elementwise({"permute", 2.0 * d.row_bytes(load.max), d.dtype})));
  }
  // Rank i sends its expert outputs to every other rank.
  const auto ranks = static_cast<std::size_t>(d.ep_size);
  std::vector<std::vector<double>> traffic(ranks, std::vector<double>(ranks, 0.0));
  double busiest_sender = 0.0;
  for (std::size_t i = 0; i < ranks; ++i) {
    for (std::size_t j = 0; j < ranks; ++j) {
      traffic[i][j] = i == j ? 0.0 : d.row_bytes(load.pairs[i]);
    }
    busiest_sender = std::max(busiest_sender, d.row_bytes((ep - 1.0) * load.pairs[i]));
  }
  // This rank's expert outputs staged in, every rank's gathered outputs received and staged out.
  MOEPLAN_TRY_STATUS(
      add(c.combine, cs.elementwise({"stage", d.row_bytes(load.max + 2.0 * load.total), d.dtype})));
  if (busiest_sender > 0.0) {
    MOEPLAN_TRY_STATUS(
        add(c.combine, cs.collective({CollectiveOp::kAllGatherV, ep_groups, busiest_sender,
                                      std::move(traffic), d.dtype})));
  }
  Exchange x;
  x.rows = rows_per_rank(slots, d);
  x.buffers = d.dispatch_bytes(ep * d.group_tokens) + d.row_bytes(load.total);
  return x;
}

/// a2av (dropless, DeepEP-style; kernels/moe_layer.cpp a2av): a count exchange (E ints per
/// rank), then a variable all-to-all by where the pairs land, and the reverse for combine.
Result<Exchange> a2av_cost(const CostSource& cs, const LayerDims& d,
                           const std::vector<std::vector<int>>& ep_groups,
                           const std::vector<double>& slots, const RankLoad& load, LayerCost& c) {
  const double ep = static_cast<double>(d.ep_size);
  const double pairs_sent = d.group_tokens * d.top_k;  // every rank's routed pairs
  MOEPLAN_TRY_STATUS(
      add(c.dispatch,
          cs.collective({CollectiveOp::kAllToAll, ep_groups, d.num_experts * 4.0, {}, d.dtype})));
  if (!d.fused) {
    MOEPLAN_TRY_STATUS(
        add(c.dispatch, cs.elementwise({"permute", 2.0 * d.row_bytes(pairs_sent), d.dtype})));
  }
  const auto ranks = static_cast<std::size_t>(d.ep_size);
  std::vector<std::vector<double>> dispatch_traffic(ranks, std::vector<double>(ranks, 0.0));
  std::vector<std::vector<double>> combine_traffic = dispatch_traffic;
  for (std::size_t i = 0; i < ranks; ++i) {
    for (std::size_t j = 0; j < ranks; ++j) {
      // Rank i's pairs split over destinations in proportion to their load; combine reverses it.
      const double rows = load.total > 0.0 ? pairs_sent * load.pairs[j] / load.total : 0.0;
      dispatch_traffic[i][j] = d.dispatch_bytes(rows);
      combine_traffic[j][i] = d.row_bytes(rows);
    }
  }
  const double send_bytes = d.dispatch_bytes(pairs_sent);
  const double returned_bytes = d.row_bytes(pairs_sent);
  const double most_received =
      d.row_bytes(ep * (load.total > 0.0 ? pairs_sent * load.max / load.total : 0.0));
  // Received rows staged out of the wire format; expert outputs staged back in and the returned
  // rows received and staged out again.
  if (send_bytes > 0.0) {
    MOEPLAN_TRY_STATUS(
        add(c.dispatch, cs.collective({CollectiveOp::kAllToAllV, ep_groups, send_bytes,
                                       std::move(dispatch_traffic), d.dtype})));
    MOEPLAN_TRY_STATUS(dispatch_staging(cs, d, 0.0, load.max, c));
    MOEPLAN_TRY_STATUS(
        add(c.combine,
            cs.elementwise({"stage", d.row_bytes(load.max) + 2.0 * returned_bytes, d.dtype})));
    MOEPLAN_TRY_STATUS(
        add(c.combine, cs.collective({CollectiveOp::kAllToAllV, ep_groups, most_received,
                                      std::move(combine_traffic), d.dtype})));
  }
  Exchange x;
  x.rows = rows_per_rank(slots, d);
  x.buffers = d.dispatch_bytes(pairs_sent) + most_received;
  return x;
}

/// Expert compute on the slowest EP rank: gate+up [m, H] × [H, 2I/tp], SiLU·up,
/// down [m, I/tp] × [I/tp, H] as grouped GEMMs over its slots' rows; or, where the source prices
/// it, the rank's fused MoE kernel (which also expands its rows in and writes them back out).
Status expert_cost(const CostSource& cs, const LayerDims& d, const Exchange& x,
                   const RankLoad& load, LayerFigures& f) {
  double slowest = -1.0;
  for (std::size_t r = 0; r < x.rows.size(); ++r) {
    CostItem item;
    const double rows = std::accumulate(x.rows[r].begin(), x.rows[r].end(), 0.0);
    // Under independent routing a slot's rows are a Poisson count: a decode step leaves slots
    // empty (their weights unread) that the expected rows alone would count as busy.
    const bool expected = x.expected_rows && !d.realized_load;
    if (d.fused) {
      MoeFusedQuery q;
      q.tokens = d.ep_size * d.group_tokens;
      q.hidden = d.hidden;
      q.inter = d.inter;
      q.top_k = static_cast<int>(d.top_k);
      q.num_experts = d.num_experts;
      q.tp_size = d.tp_size;
      q.ep_size = d.ep_size;
      q.rows = x.rows[r];
      q.expected = expected;
      // An all-to-all dispatch hands the kernel only its own rows; all-gather every token.
      q.rows_in = d.gathers_tokens ? 0.0 : rows;
      q.dtype = d.gemm_dtype;
      q.format = d.table_dtype;
      q.weight_bytes = d.expert_weight_bytes;
      MOEPLAN_TRY_STATUS(add(item, cs.moe_fused(q)));
    } else {
      MOEPLAN_TRY_STATUS(
          add(item, cs.grouped_gemm({x.rows[r], 2.0 * d.expert_width, d.hidden, d.gemm_dtype,
                                     d.expert_weight_bytes, expected})));
      MOEPLAN_TRY_STATUS(add(
          item,
          cs.elementwise({"silu_mul", 3.0 * rows * d.expert_width * d.activation_bytes, d.dtype})));
      MOEPLAN_TRY_STATUS(
          add(item, cs.grouped_gemm({x.rows[r], d.hidden, d.expert_width, d.gemm_dtype,
                                     d.expert_weight_bytes, expected})));
    }
    if (item.seconds > slowest) {
      slowest = item.seconds;
      f.cost.experts = item;
      f.expert_rows = rows;
      f.useful_rows = load.pairs[r];
    }
  }
  return Status::Ok();
}

/// The TP all-reduces of the routed expert outputs (the slowest rank's rows) and of the shared
/// expert's output, and the shared expert itself (with its gate where the model has one).
Status tp_and_shared_cost(const CostSource& cs, const LayerDims& d, const Layout& layout,
                          bool shared_gated, double expert_rows, LayerCost& c) {
  const double tokens = d.group_tokens;
  if (layout.tp_size > 1) {
    const auto tp_groups = layout.tp_groups();
    MOEPLAN_TRY_STATUS(add(
        c.tp, cs.collective(
                  {CollectiveOp::kAllReduce, tp_groups, d.row_bytes(expert_rows), {}, d.dtype})));
    if (d.shared_width > 0.0) {
      MOEPLAN_TRY_STATUS(add(
          c.tp,
          cs.collective({CollectiveOp::kAllReduce, tp_groups, d.row_bytes(tokens), {}, d.dtype})));
    }
  }
  if (d.shared_width > 0.0) {
    MOEPLAN_TRY_STATUS(add(c.shared, cs.gemm({tokens, 2.0 * d.shared_width, d.hidden, d.gemm_dtype,
                                              d.shared_weight_bytes})));
    MOEPLAN_TRY_STATUS(add(
        c.shared,
        cs.elementwise({"silu_mul", 3.0 * tokens * d.shared_width * d.activation_bytes, d.dtype})));
    MOEPLAN_TRY_STATUS(add(c.shared, cs.gemm({tokens, d.hidden, d.shared_width, d.gemm_dtype,
                                              d.shared_weight_bytes})));
    if (shared_gated) {
      MOEPLAN_TRY_STATUS(
          add(c.shared, cs.elementwise({"sigmoid_gate", d.row_bytes(3.0 * tokens), d.dtype})));
    }
  }
  return Status::Ok();
}

/// One MoE layer of `layout` with these slot token counts.
Result<LayerFigures> cost_one_layer(const CostContext& ctx, const Layout& layout,
                                    const LayerDims& d, const std::vector<double>& slots) {
  LayerFigures f;
  LayerCost& c = f.cost;
  const CostSource& cs = ctx.costs;
  RankLoad load;
  load.pairs = rank_tokens({slots}, d.ep_size).front();
  load.max = *std::max_element(load.pairs.begin(), load.pairs.end());
  load.total = std::accumulate(load.pairs.begin(), load.pairs.end(), 0.0);
  const double mean = load.total / static_cast<double>(d.ep_size);
  f.imbalance = mean > 0.0 ? load.max / mean : 1.0;

  MOEPLAN_TRY_STATUS(router_cost(cs, d, c.router));
  if (fp8_payload(d)) {
    // Each token quantized once before it is sent (values and scales written), bytes as the
    // profiler's quantize_fp8 and the DeepEP model count them.
    MOEPLAN_TRY_STATUS(add(
        c.dispatch, cs.elementwise({"quantize_fp8",
                                    d.group_tokens * (2.0 * d.hidden + d.dispatch_row), d.dtype})));
  }
  const auto ep_groups = layout.ep_groups();
  Result<Exchange> exchange = Error{"no dispatcher"};
  switch (layout.dispatcher) {
    case Dispatcher::kPaddedA2a: exchange = padded_a2a_cost(cs, d, ep_groups, slots, c); break;
    case Dispatcher::kAllGather: exchange = allgather_cost(cs, d, ep_groups, slots, load, c); break;
    case Dispatcher::kA2av: exchange = a2av_cost(cs, d, ep_groups, slots, load, c); break;
    case Dispatcher::kDeepEpNormal:
      exchange = detail::deepep_normal_cost(cs, d, layout, slots, load, c);
      break;
    case Dispatcher::kDeepEpLl:
      exchange = detail::deepep_ll_cost(cs, d, layout, slots, load, c);
      break;
  }
  if (!exchange) return exchange.error();
  f.infeasible = exchange->infeasible;
  // Every dispatcher ends with the weighted sum of the k expert outputs and the shared output.
  MOEPLAN_TRY_STATUS(
      add(c.combine,
          cs.elementwise(
              {"combine_sum", d.row_bytes(d.group_tokens * d.top_k + d.group_tokens), d.dtype})));
  f.buffers = exchange->buffers;
  MOEPLAN_TRY_STATUS(expert_cost(cs, d, *exchange, load, f));
  MOEPLAN_TRY_STATUS(
      tp_and_shared_cost(cs, d, layout, ctx.model.shared_expert_gated, f.expert_rows, c));
  f.activations = 4.0 * d.row_bytes(d.group_tokens) +
                  f.expert_rows * (3.0 * d.expert_width + d.hidden) * d.activation_bytes +
                  3.0 * d.group_tokens * d.shared_width * d.activation_bytes;
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
    if (!src[i]->source.empty()) add_source(dst[i]->source, src[i]->source);
  }
}

/// One MoE layer, with two-batch overlap when the layout asks for it: both micro-batches of half
/// the tokens (smaller GEMMs), each costed as a layer of its own; their compute (router,
/// experts, TP, shared, and the layer's attention block of a micro-batch, `attention_half`, as
/// SGLang's and DeepSeek's overlap runs one micro-batch's attention under the other's dispatch
/// and combine) and their communication (dispatch, combine) run on two streams, so a step of L
/// layers takes L · max(2C, 2M) + min(C, M) (the pipeline's fill) for one micro-batch's compute
/// C and communication M. The parts show both micro-batches' sums and overlap_hidden what of
/// them (and of the attention blocks) the schedule hides.
Result<LayerFigures> cost_layer(const CostContext& ctx, const Layout& layout, const LayerDims& d,
                                const std::vector<double>& slots, int num_moe,
                                double attention_half) {
  if (!layout.tbo) return cost_one_layer(ctx, layout, d, slots);
  LayerDims half = d;
  half.group_tokens = d.group_tokens / 2.0;
  std::vector<double> half_slots = slots;
  for (double& v : half_slots) v /= 2.0;
  auto f = cost_one_layer(ctx, layout, half, half_slots);
  if (!f) return f.error();
  LayerCost& c = f->cost;
  const double compute =
      c.router.seconds + c.experts.seconds + c.tp.seconds + c.shared.seconds + attention_half;
  const double comm = c.dispatch.seconds + c.combine.seconds;
  for (CostItem* item : {&c.router, &c.dispatch, &c.experts, &c.combine, &c.tp, &c.shared}) {
    item->seconds *= 2.0;
  }
  const double shorter = std::min(compute, comm);
  c.overlap_hidden = 2.0 * shorter - shorter / std::max(1, num_moe);
  f->expert_rows *= 2.0;
  f->useful_rows *= 2.0;
  return f;
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
  if (auto why = models::dispatcher_violation(layout.dispatcher, layout.ep_size, layout.tp_size,
                                              ctx.cluster.info().gpus_per_node)) {
    return Error{"layout " + layout.full_name() + " on cluster '" + ctx.cluster.name() +
                 "': " + *why};
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
  if (!ctx.placement) {  // contiguous: E slots
    if (auto rule = layout_rule_violation(m, layout.ep_size, layout.tp_size)) {
      return Error{"layout " + layout.shape_name() + " is illegal for '" + m.name + "': " + *rule};
    }
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
  // Redundant slots make an EP size legal when every rank holds the same number of slots.
  if (auto rule = layout_rule_violation(m, layout.ep_size, layout.tp_size,
                                        placement->num_slots - m.num_experts)) {
    return Error{"layout " + layout.shape_name() + " is illegal for '" + m.name + "': " + *rule};
  }

  LayerDims d;
  d.hidden = static_cast<double>(m.hidden_size);
  d.expert_width = static_cast<double>(m.moe_intermediate_size / layout.tp_size);
  d.shared_width = static_cast<double>(m.shared_intermediate_total() / layout.tp_size);
  d.top_k = m.num_experts_per_tok;
  d.dtype = m.dtype;
  d.activation_bytes = dtype_bytes(m.dtype);
  d.group_tokens = static_cast<double>(layout.tp_size) * ctx.workload.tokens_per_gpu;
  d.realized_load = ctx.load.realized;
  d.num_experts = m.num_experts;
  d.ep_size = layout.ep_size;
  d.ranks_per_node = std::max(1, ctx.cluster.info().gpus_per_node);
  d.ll_max_tokens = ctx.workload.ll_max_tokens_per_rank;
  d.slots_per_rank = placement->slots_per_rank();
  d.tp_size = layout.tp_size;
  d.inter = static_cast<double>(m.moe_intermediate_size);
  const WeightFormat& wf = m.weights;
  d.gemm_dtype = wf.compute_dtype();
  d.expert_weight_bytes = d.expert_width > 0.0 ? m.expert_weight_bytes(layout.tp_size) /
                                                     (3.0 * d.hidden * d.expert_width)
                                               : 0.0;
  d.shared_weight_bytes =
      d.shared_width > 0.0
          ? (2.0 * m.linear_bytes(static_cast<std::int64_t>(d.shared_width), m.hidden_size) +
             m.linear_bytes(m.hidden_size, static_cast<std::int64_t>(d.shared_width))) /
                (3.0 * d.hidden * d.shared_width)
          : 0.0;
  d.dispatch_row = wf.dispatch_row_bytes(m.hidden_size);
  d.table_dtype = moe_table_dtype(wf);
  d.fused = ctx.costs.has_fused_moe(d.table_dtype);
  d.gathers_tokens = layout.dispatcher == Dispatcher::kAllGather;
  const double routed_pairs = layout.ep_size * d.group_tokens * d.top_k;
  auto slots = slot_tokens(ctx.load, *placement, routed_pairs);
  if (!slots) return slots.error();

  LayoutCost out;
  out.layout = layout;
  out.num_slots = placement->num_slots;
  const double layer_weight = static_cast<double>(num_moe) / static_cast<double>(slots->size());
  LayerCost step;
  double buffers = 0.0, activations = 0.0, imbalance = 0.0, rows = 0.0, useful = 0.0;
  double hidden_sum = 0.0;
  std::string infeasible;
  const std::vector<double>* prev = nullptr;
  const bool varies = std::any_of(slots->begin(), slots->end(), [&](const std::vector<double>& r) {
    return r != slots->front();
  });
  LayerFigures fig;
  // Two-batch overlap of the whole model: each micro-batch's attention block (half the tokens)
  // is compute the other micro-batch's communication can hide.
  std::optional<DenseCost> dense_half;
  if (layout.tbo && ctx.whole_model) {
    CostContext half_ctx = ctx;
    half_ctx.workload.tokens_per_gpu = std::max(1, ctx.workload.tokens_per_gpu / 2);
    auto h = cost_dense_parts(half_ctx, layout);
    if (!h) return h.error();
    dense_half = std::move(*h);
  }
  const double attention_half = dense_half ? dense_half->attention.seconds : 0.0;
  for (const auto& row : *slots) {
    if (prev == nullptr || *prev != row) {  // identical rows (e.g. uniform load) cost the same
      auto r = cost_layer(ctx, layout, d, row, num_moe, attention_half);
      if (!r) return r.error();
      fig = std::move(*r);
      prev = &row;
    }
    accumulate(step, fig.cost, layer_weight);
    hidden_sum += fig.cost.overlap_hidden * layer_weight;
    if (infeasible.empty()) infeasible = fig.infeasible;
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
  step.overlap_hidden = hidden_sum;
  out.moe_seconds = step.total();
  if (ctx.whole_model) {
    auto dense = cost_dense_parts(ctx, layout);
    if (!dense) return dense.error();
    out.dense = *dense;
    if (dense_half) {
      // Overlapped, every layer runs both micro-batches' attention blocks (what the MoE layers'
      // overlap_hidden counts part of).
      out.dense.attention.seconds = 2.0 * dense_half->attention.seconds;
      out.dense.attention.source = dense_half->attention.source;
    }
  }
  out.step_seconds = out.moe_seconds + m.num_hidden_layers * out.dense.attention.seconds +
                     m.num_dense_layers() * out.dense.dense_mlp.seconds + out.dense.head.seconds;
  out.per_layer = step;
  for (CostItem* item : {&out.per_layer.router, &out.per_layer.dispatch, &out.per_layer.experts,
                         &out.per_layer.combine, &out.per_layer.tp, &out.per_layer.shared}) {
    item->seconds /= num_moe;
  }
  out.per_layer.overlap_hidden /= num_moe;
  out.tokens_per_s_per_gpu =
      out.step_seconds > 0.0 ? ctx.workload.tokens_per_gpu / out.step_seconds : 0.0;
  if (ctx.workload.phase == Phase::kDecode && out.step_seconds > 0.0) {
    out.tokens_per_s_per_user = 1.0 / out.step_seconds;
  }
  out.imbalance = imbalance / num_moe;
  out.expert_rows = rows / num_moe;
  out.useful_rows = useful / num_moe;

  // Memory per GPU: weights as the checkpoint stores them (the weight format's values and
  // scales; torch_dtype for norms, router and embeddings).
  const double plain_bytes = dtype_bytes(m.dtype);
  const double hidden = d.hidden;
  const double tp = layout.tp_size;
  MemoryPerGpu& mem = out.memory;
  mem.experts = num_moe * d.slots_per_rank * m.expert_weight_bytes(layout.tp_size);
  mem.shared = num_moe * m.moe_block_other_bytes(layout.tp_size);
  mem.dense = m.num_hidden_layers * (m.attention_weight_bytes() / tp + 2.0 * hidden * plain_bytes) +
              m.num_dense_layers() * m.dense_mlp_weight_bytes() / tp + m.embedding_bytes() / tp +
              hidden * plain_bytes;
  mem.buffers = buffers;
  mem.activations = activations;
  out.memory_capacity = ctx.cluster.device().hbm_bytes;
  out.memory_limit = out.memory_capacity;
  const Workload& w = ctx.workload;
  if (w.counts_kv()) {
    // KV cache: each rank of a TP group holds its heads' share of every sequence of the group
    // (MLA: the whole latent); a decode step's tp · tokens_per_gpu tokens are as many sequences.
    out.memory_limit = w.mem_fraction * out.memory_capacity;
    const double per_token = m.num_hidden_layers * m.kv_cache_bytes_per_token(layout.tp_size);
    const double context = static_cast<double>(w.isl) + w.osl;
    double kv_tokens = 0.0;
    if (w.phase == Phase::kDecode) {
      kv_tokens = d.group_tokens * context;
    } else {
      kv_tokens = std::ceil(d.group_tokens / w.isl) * w.isl;
    }
    mem.kv_cache = kv_tokens * per_token;
    const double left = out.memory_limit - (mem.total() - mem.kv_cache);
    out.max_sequences_per_gpu =
        left > 0.0 ? std::floor(left / (context * per_token)) / layout.tp_size : 0.0;
  }
  out.infeasible_reason = infeasible;
  out.feasible = mem.total() <= out.memory_limit && infeasible.empty();
  return out;
}

}  // namespace moeplan::planner
