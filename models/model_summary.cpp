// A model's figures as labelled, unit-carrying text rows, shown by `moeplan models show` and the
// GUI's model view alike.
#include "models/model_summary.hpp"

#include "models/units.hpp"

namespace moeplan::models {

namespace {
std::string yes_no(bool b) { return b ? "true" : "false"; }

}  // namespace

std::vector<std::pair<std::string, std::string>> model_summary(const MoeModel& m) {
  const auto& r = m.router;
  const auto& a = m.attention;
  std::string router = scoring_name(r.scoring) + " scoring, " + topk_method_name(r.topk_method) +
                       " top-" + std::to_string(m.num_experts_per_tok);
  if (r.topk_method != TopkMethod::kGreedy) {
    router += " (best " + std::to_string(r.topk_groups) + " of " + std::to_string(r.num_groups) +
              " groups)";
  }
  router += ", norm_topk_prob=" + yes_no(r.norm_topk_prob) +
            ", routed_scaling_factor=" + format_fixed(r.routed_scaling_factor, 2);
  if (r.has_score_correction_bias) router += ", e_score_correction_bias";
  std::string shared = "none";
  if (m.num_shared_experts > 0) {
    shared = std::to_string(m.num_shared_experts) + " × width " +
             std::to_string(m.shared_expert_intermediate_size) +
             (m.shared_expert_gated ? ", sigmoid-gated" : ", ungated");
  }
  std::string attention = std::to_string(a.num_heads) + " heads, " +
                          std::to_string(a.num_kv_heads) + " KV heads, head_dim " +
                          std::to_string(a.head_dim);
  if (a.mla) {
    attention += " (MLA: q_lora_rank " + std::to_string(a.q_lora_rank) + ", kv_lora_rank " +
                 std::to_string(a.kv_lora_rank) + ")";
  }
  const std::string dt(dtype_name(m.dtype));
  // KV cache per token over every layer, one rank without TP (the plan splits GQA heads by tp).
  std::string kv =
      format_bytes(m.num_hidden_layers * m.kv_cache_bytes_per_token(1)) + " per token over " +
      std::to_string(m.num_hidden_layers) + " layers (" + dt +
      (a.mla ? ", MLA latent " + std::to_string(a.kv_lora_rank) + " + rope " +
                   std::to_string(a.qk_rope_head_dim) + ", whole on every TP rank)"
             : ", K and V of " + std::to_string(a.num_kv_heads) + " heads, split over TP ranks)");
  const std::string context =
      m.max_context > 0 ? std::to_string(m.max_context) + " tokens" : "not given";
  const std::string wf =
      m.weights.quantized() ? m.weights.name() + ", scales included" : m.weights.name();
  return {
      {"Model", m.name},
      {"Source", m.source_path},
      {"Architecture", m.architecture + " (" + family_name(m.family) + ")"},
      {"Hidden size", std::to_string(m.hidden_size)},
      {"Layers", std::to_string(m.num_hidden_layers) + " (" + std::to_string(m.num_moe_layers()) +
                     " MoE, " + std::to_string(m.num_dense_layers()) + " dense)"},
      {"Routed experts", std::to_string(m.num_experts) + " × width " +
                             std::to_string(m.moe_intermediate_size) + ", top-" +
                             std::to_string(m.num_experts_per_tok)},
      {"Shared experts", shared},
      {"Dense MLP width", std::to_string(m.dense_intermediate_size)},
      {"Router", router},
      {"Attention", attention},
      {"KV cache", kv},
      {"Max context", context},
      {"Vocabulary", std::to_string(m.vocab_size)},
      {"dtype", dt},
      {"Weights", m.weights.describe() + " [" + m.weights.name() + ", " + m.weights.source + "]"},
      {"Activations", m.weights.describe_activations()},
      {"Bytes per expert", format_bytes(m.expert_weight_bytes()) + " (" + wf + ")"},
      {"Bytes per MoE layer", format_bytes(m.moe_layer_weight_bytes()) + " (" + wf + ")"},
      {"MoE FLOPs per token",
       format_si(static_cast<double>(m.moe_flops_per_token()), "FLOP") + " per layer (routed " +
           format_si(static_cast<double>(m.routed_flops_per_token()), "FLOP") + ")"},
      {"Parameters", format_count(static_cast<double>(m.total_parameters())) + " total, " +
                         format_count(static_cast<double>(m.active_parameters())) + " active"},
  };
}

}  // namespace moeplan::models
