// Every bundled config parses to the published figures (../shared/reference/FACTS.md), and the
// derived sizes match hand-computed values.
#include <gtest/gtest.h>

#include "models/model_json.hpp"
#include "models/registry.hpp"

namespace moeplan::models {
namespace test_moe_model {
namespace {

MoeModel load(const std::string& name) {
  auto m = load_model(name);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return m.ok() ? *m : MoeModel{};
}

TEST(BundledModels, AllBundledConfigsParse) {
  const auto names = bundled_model_names();
  const std::vector<std::string> expected = {
      "deepseek-v2-lite", "deepseek-v3",     "mixtral-8x7b", "qwen1.5-moe-a2.7b",
      "qwen2-57b-a14b",   "qwen3-235b-a22b", "qwen3-30b-a3b"};
  EXPECT_EQ(names, expected);
  for (const auto& n : names) {
    auto m = load_model(n);
    ASSERT_TRUE(m.ok()) << n << ": " << m.error().message;
    EXPECT_EQ(m->name, n);
  }
}

TEST(BundledModels, Qwen2_57B_A14B) {
  const MoeModel m = load("qwen2-57b-a14b");
  EXPECT_EQ(m.architecture, "Qwen2MoeForCausalLM");
  EXPECT_EQ(m.family, Family::kQwen2Moe);
  EXPECT_EQ(m.hidden_size, 3584);
  EXPECT_EQ(m.dense_intermediate_size, 18944);
  EXPECT_EQ(m.moe_intermediate_size, 2560);
  EXPECT_EQ(m.num_experts, 64);
  EXPECT_EQ(m.num_experts_per_tok, 8);
  EXPECT_EQ(m.num_shared_experts, 1);
  EXPECT_EQ(m.shared_expert_intermediate_size, 20480);
  EXPECT_TRUE(m.shared_expert_gated);
  EXPECT_EQ(m.num_hidden_layers, 28);
  EXPECT_EQ(m.num_moe_layers(), 28);
  EXPECT_EQ(m.router.scoring, ScoringFunc::kSoftmax);
  EXPECT_EQ(m.router.topk_method, TopkMethod::kGreedy);
  EXPECT_FALSE(m.router.norm_topk_prob);
  EXPECT_DOUBLE_EQ(m.router.routed_scaling_factor, 1.0);
  EXPECT_EQ(m.attention.num_heads, 28);
  EXPECT_EQ(m.attention.num_kv_heads, 4);
  EXPECT_EQ(m.attention.head_dim, 128);
  EXPECT_TRUE(m.attention.qkv_bias);
  EXPECT_EQ(m.vocab_size, 151936);
  EXPECT_EQ(m.dtype, DType::kBf16);
  // bf16 bytes per routed expert: 3·3584·2560·2 = 55050240 B = 52.5 MiB (FACTS.md).
  EXPECT_DOUBLE_EQ(m.expert_bytes(DType::kBf16), 55050240.0);
  EXPECT_DOUBLE_EQ(m.expert_bytes(DType::kBf16) / (1024.0 * 1024.0), 52.5);
  // Hand count (docs/MODELS.md): 57,408,658,944 total, 14,249,270,784 active.
  EXPECT_EQ(m.total_parameters(), 57408658944);
  EXPECT_EQ(m.active_parameters(), 14249270784);
  // FLOPs per token: 2·(H·E + k·3·H·I + 3·H·Is + H).
  EXPECT_EQ(m.moe_flops_per_token(),
            2 * (3584LL * 64 + 8LL * 3 * 3584 * 2560 + 3LL * 3584 * 20480 + 3584));
}

TEST(BundledModels, Qwen15_MoE_A27B) {
  const MoeModel m = load("qwen1.5-moe-a2.7b");
  EXPECT_EQ(m.hidden_size, 2048);
  EXPECT_EQ(m.moe_intermediate_size, 1408);
  EXPECT_EQ(m.num_experts, 60);
  EXPECT_EQ(m.num_experts_per_tok, 4);
  EXPECT_EQ(m.shared_expert_intermediate_size, 5632);
  EXPECT_EQ(m.num_hidden_layers, 24);
  EXPECT_EQ(m.attention.num_kv_heads, 16);
  EXPECT_FALSE(m.router.norm_topk_prob);
  // Published: 14.3B total, 2.7B activated.
  EXPECT_NEAR(static_cast<double>(m.total_parameters()) / 1e9, 14.3, 0.05);
  EXPECT_NEAR(static_cast<double>(m.active_parameters()) / 1e9, 2.7, 0.05);
}

TEST(BundledModels, Qwen3_30B_A3B) {
  const MoeModel m = load("qwen3-30b-a3b");
  EXPECT_EQ(m.family, Family::kQwen3Moe);
  EXPECT_EQ(m.hidden_size, 2048);
  EXPECT_EQ(m.moe_intermediate_size, 768);
  EXPECT_EQ(m.num_experts, 128);
  EXPECT_EQ(m.num_experts_per_tok, 8);
  EXPECT_EQ(m.num_shared_experts, 0);
  EXPECT_EQ(m.num_hidden_layers, 48);
  EXPECT_TRUE(m.router.norm_topk_prob);
  EXPECT_EQ(m.attention.head_dim, 128);
  EXPECT_TRUE(m.attention.qk_norm);
  EXPECT_FALSE(m.attention.qkv_bias);
  EXPECT_DOUBLE_EQ(m.expert_bytes(DType::kBf16) / (1024.0 * 1024.0), 9.0);
  EXPECT_EQ(m.total_parameters(), 30532122624);
  EXPECT_NEAR(static_cast<double>(m.active_parameters()) / 1e9, 3.35, 0.01);
}

TEST(BundledModels, Qwen3_235B_A22B) {
  const MoeModel m = load("qwen3-235b-a22b");
  EXPECT_EQ(m.hidden_size, 4096);
  EXPECT_EQ(m.moe_intermediate_size, 1536);
  EXPECT_EQ(m.num_experts, 128);
  EXPECT_EQ(m.num_hidden_layers, 94);
  EXPECT_EQ(m.attention.num_heads, 64);
  EXPECT_EQ(m.attention.num_kv_heads, 4);
  EXPECT_DOUBLE_EQ(m.expert_bytes(DType::kBf16) / (1024.0 * 1024.0), 36.0);
  EXPECT_NEAR(static_cast<double>(m.total_parameters()) / 1e9, 235.1, 0.2);
  EXPECT_NEAR(static_cast<double>(m.active_parameters()) / 1e9, 22.1, 0.2);
}

TEST(BundledModels, DeepSeekV3) {
  const MoeModel m = load("deepseek-v3");
  EXPECT_EQ(m.family, Family::kDeepseekV3);
  EXPECT_EQ(m.hidden_size, 7168);
  EXPECT_EQ(m.dense_intermediate_size, 18432);
  EXPECT_EQ(m.moe_intermediate_size, 2048);
  EXPECT_EQ(m.num_experts, 256);
  EXPECT_EQ(m.num_experts_per_tok, 8);
  EXPECT_EQ(m.num_shared_experts, 1);
  EXPECT_EQ(m.shared_expert_intermediate_size, 2048);
  EXPECT_FALSE(m.shared_expert_gated);
  EXPECT_EQ(m.num_hidden_layers, 61);
  EXPECT_EQ(m.num_moe_layers(), 58);
  EXPECT_FALSE(m.moe_layers[2]);
  EXPECT_TRUE(m.moe_layers[3]);
  EXPECT_EQ(m.router.scoring, ScoringFunc::kSigmoid);
  EXPECT_EQ(m.router.topk_method, TopkMethod::kNoauxTc);
  EXPECT_EQ(m.router.num_groups, 8);
  EXPECT_EQ(m.router.topk_groups, 4);
  EXPECT_TRUE(m.router.norm_topk_prob);
  EXPECT_TRUE(m.router.has_score_correction_bias);
  EXPECT_DOUBLE_EQ(m.router.routed_scaling_factor, 2.5);
  EXPECT_TRUE(m.attention.mla);
  EXPECT_EQ(m.attention.q_lora_rank, 1536);
  EXPECT_EQ(m.attention.kv_lora_rank, 512);
  EXPECT_EQ(m.vocab_size, 129280);
  EXPECT_EQ(m.num_nextn_predict_layers, 1);
  EXPECT_DOUBLE_EQ(m.expert_bytes(DType::kBf16) / (1024.0 * 1024.0), 84.0);
  // 671B total, 37B activated (the MTP module excluded).
  EXPECT_NEAR(static_cast<double>(m.total_parameters()) / 1e9, 671.0, 0.5);
  EXPECT_NEAR(static_cast<double>(m.active_parameters()) / 1e9, 37.5, 0.5);
}

TEST(BundledModels, DeepSeekV2Lite) {
  const MoeModel m = load("deepseek-v2-lite");
  EXPECT_EQ(m.family, Family::kDeepseekV2);
  EXPECT_EQ(m.num_experts, 64);
  EXPECT_EQ(m.num_experts_per_tok, 6);
  EXPECT_EQ(m.num_shared_experts, 2);
  EXPECT_EQ(m.shared_intermediate_total(), 2 * 1408);
  EXPECT_EQ(m.num_moe_layers(), 26);  // first layer dense: matches the 26-layer ESFT load
  EXPECT_EQ(m.router.scoring, ScoringFunc::kSoftmax);
  EXPECT_EQ(m.router.topk_method, TopkMethod::kGreedy);
  EXPECT_FALSE(m.router.norm_topk_prob);
  EXPECT_EQ(m.attention.q_lora_rank, 0);  // null in the config: q projected directly
  // Published: 15.7B total, 2.4B activated.
  EXPECT_NEAR(static_cast<double>(m.total_parameters()) / 1e9, 15.7, 0.1);
  EXPECT_NEAR(static_cast<double>(m.active_parameters()) / 1e9, 2.66, 0.3);
}

TEST(BundledModels, Mixtral8x7B) {
  const MoeModel m = load("mixtral-8x7b");
  EXPECT_EQ(m.family, Family::kMixtral);
  EXPECT_EQ(m.num_experts, 8);
  EXPECT_EQ(m.num_experts_per_tok, 2);
  EXPECT_EQ(m.moe_intermediate_size, 14336);
  EXPECT_TRUE(m.router.norm_topk_prob);
  EXPECT_EQ(m.num_moe_layers(), 32);
  EXPECT_DOUBLE_EQ(m.expert_bytes(DType::kBf16) / (1024.0 * 1024.0), 336.0);
  EXPECT_EQ(m.total_parameters(), 46702792704);
  EXPECT_NEAR(static_cast<double>(m.active_parameters()) / 1e9, 12.9, 0.05);
}

// KV-cache bytes per token per layer per rank, bf16: GQA's K and V heads split over attention TP
// (at least one per rank), MLA's latent + rope key whole on every rank; and the longest context.
TEST(ModelConfig, KvCacheBytesPerToken) {
  const auto q3 = load("qwen3-30b-a3b");  // 4 KV heads of 128
  EXPECT_DOUBLE_EQ(q3.kv_cache_bytes_per_token(1), 2.0 * 4 * 128 * 2);
  EXPECT_DOUBLE_EQ(q3.kv_cache_bytes_per_token(2), 2.0 * 2 * 128 * 2);
  EXPECT_DOUBLE_EQ(q3.kv_cache_bytes_per_token(8), 2.0 * 1 * 128 * 2);  // a head replicated
  EXPECT_EQ(q3.kv_heads_per_rank(8), 1);
  EXPECT_EQ(q3.max_context, 40960);
  const auto q2 = load("qwen2-57b-a14b");  // head_dim = 3584 / 28 = 128
  EXPECT_DOUBLE_EQ(q2.kv_cache_bytes_per_token(1), 2.0 * 4 * 128 * 2);
  const auto mx = load("mixtral-8x7b");  // 8 KV heads of 4096 / 32
  EXPECT_DOUBLE_EQ(mx.kv_cache_bytes_per_token(4), 2.0 * 2 * 128 * 2);
  const auto ds = load("deepseek-v3");  // kv_lora_rank 512 + qk_rope_head_dim 64
  EXPECT_DOUBLE_EQ(ds.kv_cache_bytes_per_token(1), (512.0 + 64.0) * 2);
  EXPECT_DOUBLE_EQ(ds.kv_cache_bytes_per_token(8), (512.0 + 64.0) * 2);
  EXPECT_EQ(ds.kv_heads_per_rank(8), 0);
  EXPECT_EQ(ds.max_context, 163840);
}

TEST(ModelConfig, QwenSparseStepAndMlpOnlyLayers) {
  const std::string cfg = R"({"architectures": ["Qwen2MoeForCausalLM"], "hidden_size": 64,
    "intermediate_size": 128, "moe_intermediate_size": 32, "num_experts": 4,
    "num_experts_per_tok": 2, "num_hidden_layers": 6, "num_attention_heads": 4,
    "vocab_size": 100, "decoder_sparse_step": 2, "mlp_only_layers": [3]})";
  auto m = parse_model_config(cfg, "inline.json", "tiny");
  ASSERT_TRUE(m.ok()) << m.error().message;
  // (i + 1) % 2 == 0 → layers 1, 3, 5; layer 3 is forced dense.
  EXPECT_EQ(m->moe_layers, (std::vector<bool>{false, true, false, false, false, true}));
  EXPECT_EQ(m->num_moe_layers(), 2);
  EXPECT_EQ(m->attention.num_kv_heads, 4);  // defaults to num_attention_heads
  EXPECT_EQ(m->num_shared_experts, 0);      // no shared_expert_intermediate_size
}

TEST(ModelConfig, DeepSeekMoeLayerFreq) {
  const std::string cfg = R"({"architectures": ["DeepseekV2ForCausalLM"], "hidden_size": 64,
    "intermediate_size": 128, "moe_intermediate_size": 32, "n_routed_experts": 8,
    "num_experts_per_tok": 2, "num_hidden_layers": 7, "num_attention_heads": 4,
    "vocab_size": 100, "first_k_dense_replace": 2, "moe_layer_freq": 2, "kv_lora_rank": 16,
    "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8,
    "topk_method": "group_limited_greedy", "n_group": 4, "topk_group": 2})";
  auto m = parse_model_config(cfg, "inline.json", "tiny");
  ASSERT_TRUE(m.ok()) << m.error().message;
  // i >= 2 and i % 2 == 0 → layers 2, 4, 6.
  EXPECT_EQ(m->moe_layers, (std::vector<bool>{false, false, true, false, true, false, true}));
  EXPECT_EQ(m->router.topk_method, TopkMethod::kGroupLimitedGreedy);
  EXPECT_EQ(m->router.topk_groups, 2);
}

TEST(ModelConfig, ModelTypeWithoutArchitectures) {
  const std::string cfg = R"({"model_type": "mixtral", "hidden_size": 64,
    "intermediate_size": 128, "num_local_experts": 4, "num_experts_per_tok": 2,
    "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100})";
  auto m = parse_model_config(cfg, "inline.json", "tiny");
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->architecture, "MixtralForCausalLM");
}

TEST(ModelConfig, JsonCarriesDerivedFigures) {
  const MoeModel m = load("qwen2-57b-a14b");
  const auto j = model_to_json(m);
  EXPECT_EQ(j.at("num_experts").get<int>(), 64);
  EXPECT_EQ(j.at("router").at("scoring_func").get<std::string>(), "softmax");
  EXPECT_EQ(j.at("derived").at("total_parameters").get<std::int64_t>(), 57408658944);
  EXPECT_DOUBLE_EQ(j.at("derived").at("expert_bytes").get<double>(), 55050240.0);
  EXPECT_EQ(j.at("moe_layer_indices").size(), 28U);
}

TEST(ModelConfig, PathWorksAsWellAsName) {
  auto by_name = load_model("mixtral-8x7b");
  ASSERT_TRUE(by_name.ok());
  auto by_path = load_model(by_name->source_path);
  ASSERT_TRUE(by_path.ok()) << by_path.error().message;
  EXPECT_EQ(by_path->total_parameters(), by_name->total_parameters());
}

}  // namespace
}  // namespace test_moe_model
}  // namespace moeplan::models
