// MoeModel as JSON.
#include "models/model_json.hpp"

namespace moeplan::models {

nlohmann::json model_to_json(const MoeModel& m) {
  using nlohmann::json;
  json moe_layers = json::array();
  for (int i = 0; i < m.num_hidden_layers; ++i) {
    if (m.moe_layers[static_cast<std::size_t>(i)]) moe_layers.push_back(i);
  }
  const auto& a = m.attention;
  json attention = {{"num_heads", a.num_heads}, {"num_kv_heads", a.num_kv_heads},
                    {"head_dim", a.head_dim},   {"qkv_bias", a.qkv_bias},
                    {"qk_norm", a.qk_norm},     {"mla", a.mla}};
  if (a.mla) {
    attention["q_lora_rank"] = a.q_lora_rank;
    attention["kv_lora_rank"] = a.kv_lora_rank;
    attention["qk_nope_head_dim"] = a.qk_nope_head_dim;
    attention["qk_rope_head_dim"] = a.qk_rope_head_dim;
    attention["v_head_dim"] = a.v_head_dim;
  }
  const auto& r = m.router;
  return json{
      {"name", m.name},
      {"source", m.source_path},
      {"architecture", m.architecture},
      {"family", family_name(m.family)},
      {"hidden_size", m.hidden_size},
      {"dense_intermediate_size", m.dense_intermediate_size},
      {"moe_intermediate_size", m.moe_intermediate_size},
      {"num_experts", m.num_experts},
      {"num_experts_per_tok", m.num_experts_per_tok},
      {"num_shared_experts", m.num_shared_experts},
      {"shared_expert_intermediate_size", m.shared_expert_intermediate_size},
      {"shared_expert_gated", m.shared_expert_gated},
      {"num_hidden_layers", m.num_hidden_layers},
      {"num_moe_layers", m.num_moe_layers()},
      {"num_dense_layers", m.num_dense_layers()},
      {"moe_layer_indices", moe_layers},
      {"router",
       {{"scoring_func", scoring_name(r.scoring)},
        {"topk_method", topk_method_name(r.topk_method)},
        {"n_group", r.num_groups},
        {"topk_group", r.topk_groups},
        {"norm_topk_prob", r.norm_topk_prob},
        {"routed_scaling_factor", r.routed_scaling_factor},
        {"score_correction_bias", r.has_score_correction_bias}}},
      {"attention", attention},
      {"vocab_size", m.vocab_size},
      {"max_position_embeddings",
       m.max_context > 0 ? json(m.max_context) : json(nullptr)},  // null: not in the config
      {"tie_word_embeddings", m.tie_word_embeddings},
      {"dtype", std::string(dtype_name(m.dtype))},
      {"weight_format", m.weights.to_json()},
      {"derived",
       {{"expert_parameters", m.expert_parameters()},
        {"expert_bytes", m.expert_weight_bytes()},
        {"moe_layer_parameters", m.moe_block_parameters()},
        {"moe_layer_bytes", m.moe_layer_weight_bytes()},
        {"total_weight_bytes", m.total_weight_bytes()},
        {"moe_flops_per_token", m.moe_flops_per_token()},
        {"kv_cache_bytes_per_token", m.num_hidden_layers * m.kv_cache_bytes_per_token(1)},
        {"routed_flops_per_token", m.routed_flops_per_token()},
        {"total_parameters", m.total_parameters()},
        {"active_parameters", m.active_parameters()}}},
  };
}

}  // namespace moeplan::models
