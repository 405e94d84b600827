// The dense reference and its derived error bound.
#include "kernels/reference.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "kernels/backend.hpp"
#include "kernels/dtype_convert.hpp"
#include "kernels/fp8.hpp"
#include "models/index.hpp"

namespace moeplan::kernels {

namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using DMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// γ_n = n·u/(1 − n·u) for fp32 accumulation: the worst relative error of an n-term dot product
// in any order. Two independent computations (sharded, reference) can differ by twice that.
double gamma32(int n) {
  const double u = std::ldexp(1.0, -24);
  return 2.0 * n * u / (1.0 - n * u);
}

// One MLP (gate/up, SiLU·up, down) on rows X with its error bound, mirroring the rounding
// points of the sharded layer: gate and up stored in the dtype, the activation stored in the
// dtype, the down projection's partial sums stored in the dtype before the TP reduction, the
// reduced result stored in the dtype. `scale` multiplies the output (the shared expert's
// sigmoid gate; 1 otherwise) before the partial sums are rounded.
struct MlpOut {
  RowMat y;    // [m][H] values of the dtype
  DMat bound;  // [m][H]
};

// |round(a) − round(b)| ≤ |a − b| + ulp(max(|a|, |b|)) ≤ δ + 2u(|ref| + δ).
double after_rounding(double delta, double ref_abs, double u) {
  return delta + 2.0 * u * (ref_abs + delta);
}

MlpOut mlp_with_bound(const RowMat& x_in, const ExpertWeights& w, int hidden, DType dtype,
                      const Eigen::VectorXf& scale, const Eigen::VectorXd& scale_delta,
                      int tp_slices, const Fp8Accumulation& fp8_acc = {}) {
  const double u = unit_roundoff(dtype);
  const double u32 = std::ldexp(1.0, -24);
  const int width = w.width;
  const Eigen::Map<const RowMat> w1(w.gate_up.data(), hidden, 2 * width);
  const Eigen::Map<const RowMat> w2(w.down.data(), width, hidden);
  const Eigen::Index m = x_in.rows();
  // fp8 weights: gate_up and down hold the exact dequantized values; the rows are quantized
  // exactly as the layer quantizes them (same inputs, same function: every layout's gate/up
  // takes whole rows of H, and a static scale is the expert's own).
  const Fp8ExpertWeights* f8 = w.fp8.empty() ? nullptr : &w.fp8.front();
  RowMat x = x_in;
  if (f8 != nullptr && m > 0) {
    fake_quantize_activations(x.data(), static_cast<int>(m), hidden, f8->input_act());
  }
  // The groups of the activation's quantization: 1 × group, or per token the row of one
  // rank's tp-slice (width / tp_slices); none when static (0).
  int act_group = 0;
  if (f8 != nullptr) {
    if (f8->act.kind == Fp8Act::Kind::kGroups) act_group = f8->act.group;
    if (f8->act.kind == Fp8Act::Kind::kToken) act_group = std::max(1, width / tp_slices);
  }
  const bool static_act = f8 != nullptr && f8->act.kind == Fp8Act::Kind::kStatic;

  const RowMat gu = x * w1;
  const RowMat mgu = x.cwiseAbs() * w1.cwiseAbs();
  RowMat act(m, width);
  RowMat act_abs(m, width);
  RowMat dact(m, width);
  // fp8 GEMMs: the backend's accumulation beyond fp32 (the down GEMM's K is at most width).
  const double g_h = gamma32(hidden) + (f8 != nullptr ? fp8_acc.extra(hidden) : 0.0);
  for (Eigen::Index r = 0; r < m; ++r) {
    for (int c = 0; c < width; ++c) {
      const float g = round_to(dtype, gu(r, c));
      const float up = round_to(dtype, gu(r, width + c));
      const double dg = after_rounding(g_h * mgu(r, c), std::fabs(g), u);
      const double du = after_rounding(g_h * mgu(r, width + c), std::fabs(up), u);
      const float silu = g / (1.0F + std::exp(-g));
      const float a = round_to(dtype, silu * up);
      // |SiLU'| ≤ 1.1 everywhere; the product's own fp32 evaluation adds a few ulps.
      const double da_pre =
          1.1 * dg * (std::fabs(up) + du) + std::fabs(silu) * du + 8.0 * u32 * std::fabs(silu * up);
      act(r, c) = a;
      act_abs(r, c) = std::fabs(a);
      dact(r, c) = static_cast<float>(after_rounding(da_pre, std::fabs(a), u));
    }
  }
  if (act_group > 0 || static_act) {
    // The layer quantizes its activation (within dact of this one) before the down projection,
    // in 1 × act_group groups or with its static scale; so does this reference, with the same
    // function. Where the two activations differ, a group's scale lies in [amax − d, amax + d]
    // / 448 (d: the group's largest dact; a static scale is known) and each value's code
    // between the codes of the extremes of a / scale over those ranges (rounding is monotone):
    // the layer's value is within the largest corner distance of this one, plus the fp32
    // product's rounding.
    const double widen = std::ldexp(1.0, -22);
    const int group = static_act ? width : act_group;
    for (Eigen::Index r = 0; r < m; ++r) {
      for (int g0 = 0; g0 < width; g0 += group) {
        const int g1 = std::min(width, g0 + group);
        float amax = 0.0F;
        double dmax = 0.0;
        for (int c = g0; c < g1; ++c) {
          amax = std::max(amax, std::fabs(act(r, c)));
          dmax = std::max(dmax, double{dact(r, c)});
        }
        const float sr = static_act ? f8->mid_scale : amax > 0.0F ? amax / kE4m3Max : 1.0F;
        const double s_lo = static_act ? sr : (amax - dmax) / kE4m3Max * (1.0 - widen);
        const double s_hi = static_act ? sr : (amax + dmax) / kE4m3Max * (1.0 + widen);
        const bool scale_known = s_lo > 0.0;
        for (int c = g0; c < g1; ++c) {
          const float a = act(r, c);
          const float aq = e4m3_to_f32(f32_to_e4m3(a / sr)) * sr;
          const double d = dact(r, c);
          double e = 0.0;
          if (scale_known) {
            // The extremes of the layer's a / scale, widened outward for its fp32 division and
            // for the cast to float here (each at most 2^-24 relative).
            const double lo = std::min((a - d) / s_lo, (a - d) / s_hi);
            const double hi = std::max((a + d) / s_lo, (a + d) / s_hi);
            const double ylo = lo - widen * std::fabs(lo) - 1e-30;
            const double yhi = hi + widen * std::fabs(hi) + 1e-30;
            const double v1 = e4m3_to_f32(f32_to_e4m3(static_cast<float>(ylo)));
            const double v2 = e4m3_to_f32(f32_to_e4m3(static_cast<float>(yhi)));
            for (const double sc : {s_lo, s_hi}) {
              for (const double v : {v1, v2}) e = std::max(e, std::fabs(sc * v - aq));
            }
            e += widen * s_hi * std::max(std::fabs(v1), std::fabs(v2));
          } else {
            // An (almost) all-zero group whose scale may be 1: the plain rounding bound.
            e = d + e4m3_error_bound(std::fabs(a) + d, (amax + dmax) / kE4m3Max + 1.0) +
                e4m3_error_bound(std::fabs(a), sr);
          }
          act(r, c) = aq;
          dact(r, c) = static_cast<float>(e);
          act_abs(r, c) = static_cast<float>(std::fabs(aq) + e);
        }
      }
    }
  }
  RowMat y = act * w2;
  const RowMat my = act_abs * w2.cwiseAbs();
  const RowMat dy = dact * w2.cwiseAbs();
  MlpOut out;
  out.y.resize(m, hidden);
  out.bound.resize(m, hidden);
  const double g_i = gamma32(width) + (f8 != nullptr ? fp8_acc.extra(width) : 0.0);
  for (Eigen::Index r = 0; r < m; ++r) {
    const double sc = scale(r);
    for (int h = 0; h < hidden; ++h) {
      const float v = round_to(dtype, static_cast<float>(sc) * y(r, h));
      // Summation order (fp32, both sides), the propagated activation error, the rounding of
      // the tp partial sums (Σ|partials| ≤ my) and their fp32 reduction, then the final store.
      const double pre = sc * (g_i * my(r, h) + dy(r, h) + (u + 2.0 * u32) * my(r, h)) +
                         scale_delta(r) * (std::fabs(y(r, h)) + g_i * my(r, h) + dy(r, h));
      out.y(r, h) = v;
      out.bound(r, h) = after_rounding(pre, std::fabs(v), u);
    }
  }
  return out;
}

}  // namespace

Fp8Accumulation fp8_accumulation_of(const Backend& backend, const LayerSpec& s) {
  if (!s.fp8()) return {};
  const bool blocks = s.fp8_scheme == WeightScheme::kFp8Block;
  return backend.fp8_accumulation(s.fp8_act, blocks ? s.fp8_block_in : 0,
                                  blocks ? s.fp8_block_out : 0);
}

MlpReference mlp_reference(std::span<const float> x, int num_rows, int hidden,
                           const ExpertWeights& w, DType dtype, std::span<const float> scale,
                           std::span<const double> scale_delta, const Fp8Accumulation& fp8_acc) {
  const RowMat xm = Eigen::Map<const RowMat>(x.data(), num_rows, hidden);
  Eigen::VectorXf sc = Eigen::VectorXf::Ones(num_rows);
  Eigen::VectorXd sd = Eigen::VectorXd::Zero(num_rows);
  for (int r = 0; r < num_rows && !scale.empty(); ++r) sc(r) = scale[uz(r)];
  for (int r = 0; r < num_rows && !scale_delta.empty(); ++r) sd(r) = scale_delta[uz(r)];
  const MlpOut out = mlp_with_bound(xm, w, hidden, dtype, sc, sd, 1, fp8_acc);
  MlpReference ref;
  ref.y.assign(out.y.data(), out.y.data() + out.y.size());
  ref.bound.assign(out.bound.data(), out.bound.data() + out.bound.size());
  return ref;
}

ReferenceOutput reference_forward(const LayerSpec& s, std::span<const float> x, int num_tokens,
                                  const ReferenceBounds& extra) {
  const int h = s.hidden;
  const int k = s.top_k;
  const double u = unit_roundoff(s.dtype);
  const Eigen::Map<const RowMat> xm(x.data(), num_tokens, h);
  // The routed experts' inputs as a dispatcher that sends fp8 delivers them (sends_fp8): each
  // token quantized in 1 × 128 groups, dequantized and stored in the dtype.
  RowMat x8;
  if (extra.fp8_inputs) {
    constexpr int kGroup = 128;
    x8.resize(num_tokens, h);
    const int groups = (h + kGroup - 1) / kGroup;
    std::vector<std::uint8_t> q(uz(h));
    std::vector<float> scales(uz(groups));
    for (int t = 0; t < num_tokens; ++t) {
      quantize_blocks(x.subspan(uz(t) * uz(h), uz(h)), 1, h, 1, kGroup, q, scales);
      dequantize_blocks(q, scales, 1, h, 1, kGroup, std::span(x8.row(t).data(), uz(h)));
      round_to(s.dtype, std::span(x8.row(t).data(), uz(h)));
    }
  }

  // Routing: the replicated router op (tested on its own against a naive router), so every
  // token picks the same experts here as in any layout.
  const std::vector<float> router = make_router_weight(s);
  const std::vector<float> bias = make_score_bias(s);
  std::vector<float> logits(uz(num_tokens) * uz(s.num_experts));
  std::vector<int> ids(uz(num_tokens) * uz(k));
  std::vector<float> weights(ids.size());
  const auto cpu = make_cpu_backend();
  cpu->router_logits(OpContext{}, x, num_tokens, h, router, s.num_experts, logits);
  cpu->route(OpContext{}, s.router, logits, bias, num_tokens, s.num_experts, k, ids, weights);

  // Routed experts: for each expert, its tokens; out accumulates Σ_k w·y in double.
  DMat acc = DMat::Zero(num_tokens, h);
  DMat mag = DMat::Zero(num_tokens, h);    // Σ_k |w|·|y|: for the combine's summation bound
  DMat delta = DMat::Zero(num_tokens, h);  // Σ_k |w|·bound(y)
  DMat acc8, mag8, delta8;                 // the same with the fp8 inputs (DeepEP)
  if (extra.fp8_inputs) {
    acc8 = mag8 = delta8 = DMat::Zero(num_tokens, h);
  }
  for (int e = 0; e < s.num_experts; ++e) {
    std::vector<std::pair<int, float>> tokens;  // (token, weight)
    for (int t = 0; t < num_tokens; ++t) {
      for (int j = 0; j < k; ++j) {
        if (ids[uz(t) * uz(k) + uz(j)] == e) tokens.emplace_back(t, weights[uz(t) * uz(k) + uz(j)]);
      }
    }
    if (tokens.empty()) continue;
    const ExpertWeights w = make_expert(s, e, 0, 1);
    const auto m = static_cast<Eigen::Index>(tokens.size());
    // This expert's tokens taken from `inputs`, through its MLP, weighted into the three sums.
    const auto add_expert = [&](const auto& inputs, DMat& sum, DMat& sum_abs, DMat& sum_bound) {
      RowMat rows(m, h);
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        rows.row(static_cast<Eigen::Index>(i)) = inputs.row(tokens[i].first);
      }
      const MlpOut y =
          mlp_with_bound(rows, w, h, s.dtype, Eigen::VectorXf::Ones(m), Eigen::VectorXd::Zero(m),
                         extra.tp_slices, extra.fp8_accumulation);
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        const auto r = static_cast<Eigen::Index>(i);
        const double wt = tokens[i].second;
        const int t = tokens[i].first;
        for (int c = 0; c < h; ++c) {
          sum(t, c) += wt * y.y(r, c);
          sum_abs(t, c) += std::fabs(wt * y.y(r, c));
          sum_bound(t, c) += std::fabs(wt) * y.bound(r, c);
        }
      }
    };
    add_expert(xm, acc, mag, delta);
    if (extra.fp8_inputs) add_expert(x8, acc8, mag8, delta8);
  }

  // Shared expert on every token (gated by sigmoid(x·g) for Qwen2-MoE).
  if (s.shared_intermediate > 0) {
    const ExpertWeights w = make_shared_expert(s, 0, 1);
    const std::vector<float> gate = make_shared_gate(s);
    Eigen::VectorXf scale = Eigen::VectorXf::Ones(num_tokens);
    Eigen::VectorXd scale_delta = Eigen::VectorXd::Zero(num_tokens);
    if (!gate.empty()) {
      const Eigen::Map<const Eigen::VectorXf> g(gate.data(), h);
      for (int t = 0; t < num_tokens; ++t) {
        const float z = xm.row(t).dot(g.transpose());
        scale(t) = 1.0F / (1.0F + std::exp(-z));
        // |σ'| ≤ 1/4; the gate's dot product may be summed in another order by the backend.
        const double mz = xm.row(t).cwiseAbs().dot(g.cwiseAbs().transpose());
        scale_delta(t) = 0.25 * gamma32(h) * mz + 4.0 * std::ldexp(1.0, -24);
      }
    }
    const RowMat xs = xm;
    const MlpOut y = mlp_with_bound(xs, w, h, s.dtype, scale, scale_delta, extra.tp_slices,
                                    extra.fp8_accumulation);
    acc += y.y.cast<double>();
    mag += y.y.cast<double>().cwiseAbs();
    delta += y.bound;
    if (extra.fp8_inputs) {  // the shared expert reads x, not the fp8 copy
      acc8 += y.y.cast<double>();
      mag8 += y.y.cast<double>().cwiseAbs();
      delta8 += y.bound;
    }
  }

  ReferenceOutput out;
  out.output.resize(uz(num_tokens) * uz(h));
  out.bound.resize(out.output.size());
  if (extra.fp8_inputs) {
    out.output_fp8_inputs.resize(out.output.size());
    out.bound_fp8_inputs.resize(out.output.size());
    out.bound_fp8_inputs_prereduced.resize(out.output.size());
  }
  const double g_k = gamma32(k + 1);
  for (int t = 0; t < num_tokens; ++t) {
    for (int c = 0; c < h; ++c) {
      const std::size_t i = uz(t) * uz(h) + uz(c);
      // The sharded combine sums in fp32 where this sums in double: its error is γ_{k+1}·Σ|terms|.
      const float v = round_to(s.dtype, static_cast<float>(acc(t, c)));
      out.output[i] = v;
      const double pre = delta(t, c) + g_k * mag(t, c);
      out.bound[i] = static_cast<float>(after_rounding(pre, std::fabs(v), u));
      if (extra.fp8_inputs) {
        const float v8 = round_to(s.dtype, static_cast<float>(acc8(t, c)));
        out.output_fp8_inputs[i] = v8;
        const double pre8 = delta8(t, c) + g_k * mag8(t, c);
        out.bound_fp8_inputs[i] = static_cast<float>(after_rounding(pre8, std::fabs(v8), u));
        // deepep_normal stores two stages of partial sums on the way back (per expert rank, per
        // node): each adds u·Σ|partials| ≤ u·(1 + u)·Σ|terms|, the terms within delta8 of the
        // reference's and summed in fp32 (γ).
        const double terms = (mag8(t, c) + delta8(t, c)) * (1.0 + g_k);
        const double pre2 =
            delta8(t, c) + g_k * terms * (1.0 + 4.0 * u) + u * terms + u * (1.0 + u) * terms;
        out.bound_fp8_inputs_prereduced[i] =
            static_cast<float>(after_rounding(pre2, std::fabs(v8), u));
      }
    }
  }
  return out;
}

int ref_tp_slices(const LayerSpec& s, int tp) {
  return s.fp8() && s.fp8_act.kind == Fp8Act::Kind::kToken ? tp : 1;
}

bool sends_fp8(const LayerSpec& s, models::Dispatcher d) { return models::is_deepep(d) || s.fp8(); }

const std::vector<float>& reference_of(const ReferenceOutput& ref, const LayerSpec& s,
                                       models::Dispatcher d) {
  if (!sends_fp8(s, d)) return ref.output;
  MOEPLAN_ASSERT(ref.output_fp8_inputs.size() == ref.output.size(),
                 "reference_of: the reference was made without fp8_inputs");
  return ref.output_fp8_inputs;
}

const std::vector<float>& bound_of(const ReferenceOutput& ref, const LayerSpec& s,
                                   models::Dispatcher d) {
  if (!sends_fp8(s, d)) return ref.bound;
  MOEPLAN_ASSERT(ref.output_fp8_inputs.size() == ref.output.size(),
                 "bound_of: the reference was made without fp8_inputs");
  return d == models::Dispatcher::kDeepEpNormal ? ref.bound_fp8_inputs_prereduced
                                                : ref.bound_fp8_inputs;
}

}  // namespace moeplan::kernels
