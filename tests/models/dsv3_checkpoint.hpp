// DeepSeek-V3's published checkpoint, tensor by tensor (deepseek-ai/DeepSeek-V3, 163 safetensors
// files): names, shapes and dtypes as its README_WEIGHTS.md and inference/model.py define them,
// written out independently of moeplan's MoeModel so tests can compare the two.
#pragma once

#include <cstdint>

namespace moeplan::testing {

/// The bytes of DeepSeek-V3's checkpoint by the part a layout splits differently.
struct Dsv3Checkpoint {
  double routed = 0.0;  ///< routed experts of the 58 MoE layers (values and weight_scale_inv)
  /// What every TP rank holds whole: the 58 routers (mlp.gate.weight, e_score_correction_bias)
  /// and the RMSNorm weights (serving frameworks replicate both).
  double replicated = 0.0;
  /// The rest of the main model (layers 0..60, embeddings, head), which TP splits.
  double split = 0.0;
  double mtp = 0.0;  ///< the MTP module (model.layers.61, with its own embed and head copies)

  double main_model() const { return routed + replicated + split; }
};

/// fp8 e4m3 weight [rows, cols] with its fp32 weight_scale_inv [⌈rows/128⌉, ⌈cols/128⌉].
inline double dsv3_fp8(std::int64_t rows, std::int64_t cols) {
  return static_cast<double>(rows * cols) +
         4.0 * static_cast<double>(((rows + 127) / 128) * ((cols + 127) / 128));
}
inline double dsv3_bf16(std::int64_t n) { return 2.0 * static_cast<double>(n); }

inline Dsv3Checkpoint dsv3_checkpoint() {
  constexpr std::int64_t h = 7168, inter = 18432, moe_inter = 2048, experts = 256, vocab = 129280;
  constexpr std::int64_t q_lora = 1536, kv_lora = 512, nope = 128, rope = 64, v_dim = 128,
                         heads = 128;
  // self_attn: q_a_proj, q_a_layernorm, q_b_proj, kv_a_proj_with_mqa, kv_a_layernorm,
  // kv_b_proj, o_proj; input_layernorm and post_attention_layernorm.
  const double attention_norms = dsv3_bf16(q_lora) + dsv3_bf16(kv_lora) + 2.0 * dsv3_bf16(h);
  const double attention_proj =
      dsv3_fp8(q_lora, h) + dsv3_fp8(heads * (nope + rope), q_lora) + dsv3_fp8(kv_lora + rope, h) +
      dsv3_fp8(heads * (nope + v_dim), kv_lora) + dsv3_fp8(h, heads * v_dim);
  const double attention = attention_proj + attention_norms;
  const double expert = 2.0 * dsv3_fp8(moe_inter, h) + dsv3_fp8(h, moe_inter);
  // mlp.gate.weight bf16 [256, 7168], mlp.gate.e_score_correction_bias fp32 [256], one shared
  // expert as wide as a routed one.
  const double router = dsv3_bf16(experts * h) + 4.0 * experts;
  const double moe_other = router + expert;
  const double dense_mlp = 2.0 * dsv3_fp8(inter, h) + dsv3_fp8(h, inter);
  const double embed_and_head = 2.0 * dsv3_bf16(vocab * h);
  Dsv3Checkpoint c;
  c.routed = 58.0 * experts * expert;
  c.replicated = 58.0 * router + 61.0 * attention_norms + dsv3_bf16(h) /* model.norm */;
  c.split = embed_and_head + 61.0 * attention_proj + 58.0 * expert /* shared */ + 3.0 * dense_mlp;
  // Layer 61: a MoE layer, enorm, hnorm, eh_proj (bf16 [7168, 14336]), shared_head.norm, and
  // its copies of embed_tokens and shared_head.head.
  c.mtp = attention + experts * expert + moe_other + 3.0 * dsv3_bf16(h) + dsv3_bf16(h * 2 * h) +
          embed_and_head;
  return c;
}

/// The published size of deepseek-ai/DeepSeek-V3's 163 safetensors files in bytes (the
/// repository's weight files; the safetensors headers included).
inline constexpr double kDsv3PublishedBytes = 688586727753.0;

}  // namespace moeplan::testing
