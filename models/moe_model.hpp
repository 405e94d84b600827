// MoeModel: a Mixture-of-Experts model read from a Hugging Face config.json, with its router
// semantics and the sizes and FLOPs derived from it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "models/dtype.hpp"
#include "models/result.hpp"
#include "models/weight_format.hpp"

namespace moeplan::models {

enum class Family : std::uint8_t { kQwen2Moe, kQwen3Moe, kDeepseekV2, kDeepseekV3, kMixtral };

enum class ScoringFunc : std::uint8_t { kSoftmax, kSigmoid };

/// How the top-k experts are chosen from the router scores.
enum class TopkMethod : std::uint8_t {
  kGreedy,              ///< plain top-k over all experts
  kGroupLimitedGreedy,  ///< DeepSeek-V2: keep topk_group groups by their max score, then top-k
  kNoauxTc,             ///< DeepSeek-V3: bias-corrected scores pick groups (sum of top-2) and
                        ///< experts; weights are the unbiased scores
};

std::string family_name(Family f);
std::string scoring_name(ScoringFunc s);
std::string topk_method_name(TopkMethod m);

/// Router semantics of one model family.
struct RouterSpec {
  ScoringFunc scoring = ScoringFunc::kSoftmax;
  TopkMethod topk_method = TopkMethod::kGreedy;
  int num_groups = 1;   ///< n_group (1 when the model has no grouping)
  int topk_groups = 1;  ///< topk_group
  bool norm_topk_prob = false;
  double routed_scaling_factor = 1.0;
  bool has_score_correction_bias = false;  ///< e_score_correction_bias (noaux_tc)
  /// DeepSeek-V2 scales by routed_scaling_factor only when it does not renormalise; V3 does both.
  bool scale_after_norm = true;
};

/// Attention shape, enough for parameter counts and KV-cache sizes.
struct AttentionSpec {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  bool qkv_bias = false;        ///< Qwen2-MoE: q/k/v projections carry a bias
  bool qk_norm = false;         ///< Qwen3: RMSNorm on q and k per head
  bool mla = false;             ///< DeepSeek multi-head latent attention
  int q_lora_rank = 0;          ///< MLA; 0 when q is projected directly (V2-Lite)
  int kv_lora_rank = 0;         ///< MLA
  int qk_nope_head_dim = 0;     ///< MLA
  int qk_rope_head_dim = 0;     ///< MLA
  int v_head_dim = 0;           ///< MLA
  double rope_theta = 10000.0;  ///< RoPE base (config rope_theta; HF's default 10000)
  double rms_norm_eps = 1e-6;   ///< RMSNorm epsilon (config rms_norm_eps; HF's default 1e-6)

  /// Parameters of one attention block (projections and their norms).
  std::int64_t parameters(std::int64_t hidden_size) const;
};

/// A Mixture-of-Experts model as published in a Hugging Face config.json.
struct MoeModel {
  std::string name;          ///< bundled name ("qwen2-57b-a14b") or the file's stem
  std::string source_path;   ///< where the config was read from
  std::string architecture;  ///< e.g. "Qwen2MoeForCausalLM"
  Family family = Family::kQwen2Moe;

  std::int64_t hidden_size = 0;
  std::int64_t dense_intermediate_size = 0;  ///< intermediate_size of dense MLP layers
  std::int64_t moe_intermediate_size = 0;    ///< width of one routed expert
  int num_experts = 0;                       ///< routed experts per MoE layer
  int num_experts_per_tok = 0;               ///< top-k
  int num_shared_experts = 0;
  std::int64_t shared_expert_intermediate_size = 0;  ///< width of one shared expert
  bool shared_expert_gated = false;  ///< Qwen2-MoE: sigmoid(h·w) scales the shared expert
  int num_hidden_layers = 0;
  std::vector<bool> moe_layers;  ///< per hidden layer: MoE (true) or dense MLP (false)

  RouterSpec router;
  AttentionSpec attention;
  std::int64_t vocab_size = 0;
  bool tie_word_embeddings = false;
  DType dtype = DType::kBf16;  ///< torch_dtype
  /// The linear weights' storage and GEMM precision: quantization_config, else torch_dtype;
  /// `--weights` replaces it (with_weight_format).
  WeightFormat weights;
  /// The checkpoint's own format (quantization_config, else torch_dtype), kept when `--weights`
  /// replaces `weights`: what a serving framework loads (exports compare the two).
  WeightFormat checkpoint_weights;
  int num_nextn_predict_layers = 0;  ///< DeepSeek-V3 MTP (not counted in parameters)
  /// max_position_embeddings: the longest context the model takes (0: the config does not say).
  std::int64_t max_context = 0;

  // ---- derived figures -------------------------------------------------------------------
  int num_moe_layers() const;
  int num_dense_layers() const { return num_hidden_layers - num_moe_layers(); }
  /// Total width of all shared experts (count × width).
  std::int64_t shared_intermediate_total() const {
    return num_shared_experts * shared_expert_intermediate_size;
  }
  /// Parameters of one routed expert: gate, up (H×I each) and down (I×H).
  std::int64_t expert_parameters() const { return 3 * hidden_size * moe_intermediate_size; }
  /// Bytes of one routed expert stored in `t`.
  double expert_bytes(DType t) const {
    return static_cast<double>(expert_parameters()) * dtype_bytes(t);
  }
  /// Parameters of one MoE block: router, routed experts, shared experts and their gate.
  std::int64_t moe_block_parameters() const;
  /// Parameters of the MoE block that one token uses (router, top-k experts, shared experts).
  std::int64_t moe_block_active_parameters() const;
  /// Bytes of one MoE block stored in `t`.
  double moe_layer_bytes(DType t) const {
    return static_cast<double>(moe_block_parameters()) * dtype_bytes(t);
  }
  // ---- bytes in the model's weight format (scales included) -----------------------------
  /// Bytes of one [rows × cols] linear weight: in the weight format when `quantized`, else in
  /// torch_dtype.
  double linear_bytes(std::int64_t rows, std::int64_t cols, bool quantized = true) const;
  /// Bytes of one routed expert's slice on a rank of TP size `tp_size`: gate and up
  /// [I/tp × H], down [H × I/tp], with their scales.
  double expert_weight_bytes(int tp_size = 1) const;
  /// KV-cache heads one rank of attention TP size `tp_size` holds per layer: the KV heads split
  /// across the ranks, at least one (a rank replicates a head when tp exceeds the KV heads, as
  /// vLLM and SGLang do); 0 for MLA.
  int kv_heads_per_rank(int tp_size) const;
  /// KV-cache bytes one token adds per layer on one rank of attention TP size `tp_size`, in
  /// torch_dtype (the frameworks' default kv-cache dtype, "auto"): K and V of its heads for MHA
  /// and GQA; MLA's compressed latent and rope key (kv_lora_rank + qk_rope_head_dim), which
  /// every TP rank holds whole.
  double kv_cache_bytes_per_token(int tp_size = 1) const;
  /// Bytes of one attention block: projections in the weight format (unless it keeps attention
  /// unquantized), norms and biases in torch_dtype.
  double attention_weight_bytes() const;
  /// Bytes of one MoE block besides its routed experts, on a rank of TP size `tp_size`: the
  /// shared experts' slices and their gate (in the weight format / torch_dtype) and the router
  /// (torch_dtype, e_score_correction_bias fp32), which every rank holds whole.
  double moe_block_other_bytes(int tp_size = 1) const;
  /// Bytes of one dense MLP layer (whole).
  double dense_mlp_weight_bytes() const;
  /// Bytes of one MoE block (router, every routed expert, shared experts) whole.
  double moe_layer_weight_bytes() const {
    return num_experts * expert_weight_bytes(1) + moe_block_other_bytes(1);
  }
  /// Bytes of the token embeddings and the output head (torch_dtype).
  double embedding_bytes() const;
  /// Bytes of every weight of the model (MTP layers excluded), as its checkpoint stores them.
  double total_weight_bytes() const;

  /// FLOPs per token of one MoE block (router GEMM, top-k experts, shared experts), 2 per MAC.
  std::int64_t moe_flops_per_token() const;
  /// FLOPs per token of the routed experts alone.
  std::int64_t routed_flops_per_token() const {
    return 2 * num_experts_per_tok * expert_parameters();
  }
  /// Parameters of one dense MLP layer.
  std::int64_t dense_mlp_parameters() const { return 3 * hidden_size * dense_intermediate_size; }
  /// All parameters (embeddings, attention, MLPs, norms, head), MTP layers excluded.
  std::int64_t total_parameters() const;
  /// Parameters one token touches.
  std::int64_t active_parameters() const;
};

/// The largest model moeplan reads: 10^15 parameters (about 1000× the largest published MoE), so
/// that every derived count fits std::int64_t with room to spare.
inline constexpr double kMaxModelParameters = 1e15;

/// `m` with its weights in `format` (a what-if plan: --weights), keeping torch_dtype for the
/// tensors the format leaves unquantized.
MoeModel with_weight_format(MoeModel m, WeightFormat format);

/// Applies the --weights choice `name` to `m` ("" keeps the model's own format). Errors name
/// the input "weights".
Status apply_weights_choice(MoeModel& m, const std::string& name);

/// An error naming `source` when the model's sizes exceed kMaxModelParameters.
Status check_model_size(const MoeModel& m, const std::string& source);

/// Reads and validates a Hugging Face config.json. Errors name the file, the key and what was
/// expected. `name` overrides the display name (defaults to the file's stem).
Result<MoeModel> load_model_config(const std::filesystem::path& path, const std::string& name = "");

/// Parses config JSON text (already read); `source` names it in error messages.
Result<MoeModel> parse_model_config(const std::string& json_text, const std::string& source,
                                    const std::string& name);

}  // namespace moeplan::models
