// Sweep derivation and the op registry.
#include "profiler/sweep.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/moe_layer.hpp"
#include "models/scaled_model.hpp"
#include "planner/costs/cost_model.hpp"
#include "profiler/ops.hpp"

namespace moeplan::profiler {

const std::vector<OpTable>& all_ops() {
  static const std::vector<OpTable> ops = {
      gemm_op(),           router_topk_op(),  permute_op(),       stage_op(),
      silu_mul_op(),       sigmoid_gate_op(), combine_sum_op(),   attention_op(),
      norm_op(),           rope_op(),         quantize_fp8_op(),  dequantize_fp8_op(),
      combine_reduce_op(), all_to_all_op(),   all_to_all_v_op(),  all_gather_op(),
      all_gather_v_op(),   all_reduce_op(),   reduce_scatter_op()};
  return ops;
}

std::optional<AttentionSweepShape> attention_sweep_shape(const models::MoeModel& model, int tp,
                                                         bool decode) {
  // MLA prefill expanded into the rank's heads, MLA decode absorbed over the shared latent,
  // GQA's K/V heads split over tp; the softmax scale is the unabsorbed head's 1/√(q·k dim).
  const auto& a = model.attention;
  const int qk_head = a.mla ? a.qk_nope_head_dim + a.qk_rope_head_dim : a.head_dim;
  const planner::AttentionQuery q = planner::attention_core_query(model, tp, decode, 1.0, 1.0);
  const AttentionSweepShape sh{decode,
                               static_cast<int>(q.heads),
                               static_cast<int>(q.kv_heads),
                               static_cast<int>(q.qk_dim),
                               static_cast<int>(q.v_dim),
                               1.0F / std::sqrt(static_cast<float>(std::max(1, qk_head)))};
  if (sh.heads < 1 || sh.kv_heads < 1 || sh.heads % sh.kv_heads != 0 || sh.qk_dim < 1 ||
      sh.v_dim < 1) {
    return std::nullopt;
  }
  return sh;
}

Result<SweepSpec> make_sweep(const models::MoeModel& model, const SweepRequest& r) {
  if (r.world_size < 1) return Error{"world size: expected at least one rank"};
  auto layer = kernels::LayerSpec::from_model(model, r.scale, DType::kFp32, 0);
  if (!layer) return layer.error();
  // The weight format: fp8 weights make fp8 expert GEMMs; 4-bit weights run decoded (plain
  // GEMMs); a format with no kernel is the named error.
  MOEPLAN_TRY_STATUS(kernels::apply_weight_format(*layer, model.weights));
  SweepSpec s;
  s.fp8_scheme = layer->fp8_scheme;
  s.fp8_block_out = layer->fp8_block_out;
  s.fp8_block_in = layer->fp8_block_in;
  s.fp8_act = layer->fp8_act;
  s.model = model.name;
  s.hidden = layer->hidden;
  s.intermediate = layer->intermediate;
  s.shared_width = layer->shared_intermediate;
  s.num_experts = layer->num_experts;
  s.top_k = layer->top_k;
  s.shared_gated = layer->shared_gated;
  s.router = layer->router;
  s.world_size = r.world_size;
  s.quick = r.quick;
  for (const auto& l : kernels::legal_layouts(*layer, r.world_size)) {
    if (std::find(s.tp_sizes.begin(), s.tp_sizes.end(), l.tp_size) == s.tp_sizes.end()) {
      s.tp_sizes.push_back(l.tp_size);
    }
  }
  if (s.tp_sizes.empty()) {
    return Error{"no legal layout of " + model.name + " on " + std::to_string(r.world_size) +
                 " ranks; expected a rank count whose ep·tp split divides the experts and widths"};
  }
  if (std::find(s.tp_sizes.begin(), s.tp_sizes.end(), 1) == s.tp_sizes.end()) {
    s.tp_sizes.insert(s.tp_sizes.begin(), 1);
  }
  // The attention core of every tp's ranks, as the cost model asks for it.
  for (const int tp : s.tp_sizes) {
    for (const bool decode : {false, true}) {
      const auto sh = attention_sweep_shape(model, tp, decode);
      if (sh && std::find(s.attention.begin(), s.attention.end(), *sh) == s.attention.end()) {
        s.attention.push_back(*sh);
      }
    }
  }
  // The projections and dense MLP GEMMs of every tp, on the model as the planner prices it
  // (widths divided by the scale); RoPE's heads on a tp-1 rank.
  auto scaled = models::scale_model(model, r.scale);
  if (!scaled) return scaled.error();
  for (const int tp : s.tp_sizes) {
    for (const auto& nk : planner::dense_gemm_shapes(*scaled, tp)) {
      if (std::find(s.projections.begin(), s.projections.end(), nk) == s.projections.end()) {
        s.projections.push_back(nk);
      }
    }
  }
  const auto& a = model.attention;
  if (a.num_heads > 0) {
    s.rope_heads = a.mla ? a.num_heads + 1 : a.num_heads + a.num_kv_heads;
    s.rope_head_dim = a.mla ? a.qk_rope_head_dim : a.head_dim;
    s.rope_rot_dim = s.rope_head_dim - s.rope_head_dim % 2;
    if (s.rope_rot_dim < 2) s.rope_heads = 0;
  }
  s.rope_theta = a.rope_theta;
  s.norm_eps = static_cast<float>(a.rms_norm_eps);
  for (int g = 2; g <= r.world_size; ++g) {
    if (r.world_size % g == 0) s.group_sizes.push_back(g);
  }
  for (const DType d : r.dtypes) {
    if (d == DType::kFp8) {
      return input_error("dtype",
                         ": fp8 is not a storage dtype of the CPU backend; expected fp32, bf16 "
                         "or fp16");
    }
  }
  s.dtypes = r.dtypes.empty() ? std::vector<DType>{model.dtype} : r.dtypes;
  s.max_rows = r.max_tokens > 0 ? r.max_tokens : (r.quick ? 512 : 4096);
  if (s.max_rows > (1 << 20)) {
    return input_error("max_tokens",
                       ": expected at most 1048576, got " + std::to_string(s.max_rows));
  }
  s.max_bytes = r.max_bytes > 0.0 ? r.max_bytes : (r.quick ? 1024.0 * 1024 : 64.0 * 1024 * 1024);
  if (s.max_bytes < s.min_bytes || s.max_bytes > 4.0 * 1024 * 1024 * 1024) {
    return input_error("max_bytes", ": expected 256 B to 4 GiB");
  }
  return s;
}

Result<std::vector<std::pair<const OpTable*, OpPoint>>> sweep_points(
    const SweepSpec& sweep, const std::vector<std::string>& ops) {
  for (const auto& name : ops) {
    const bool known = std::any_of(all_ops().begin(), all_ops().end(),
                                   [&](const OpTable& t) { return t.name == name; });
    if (!known) {
      std::string list;
      for (const auto& t : all_ops()) list += (list.empty() ? "" : ", ") + t.name;
      return input_error("ops", ": unknown op '" + name + "'; expected some of " + list);
    }
  }
  std::vector<std::pair<const OpTable*, OpPoint>> out;
  for (const auto& t : all_ops()) {
    if (!ops.empty() && std::find(ops.begin(), ops.end(), t.name) == ops.end()) continue;
    if (t.collective && sweep.group_sizes.empty()) continue;  // one rank: nothing to measure
    for (auto& p : t.sweep(sweep)) out.emplace_back(&t, std::move(p));
  }
  return out;
}

}  // namespace moeplan::profiler
