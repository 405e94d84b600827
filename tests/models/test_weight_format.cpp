// Weight formats: quantization_config as published, sizes with scales, the --weights names, and
// DeepSeek-V3's bytes against its checkpoint.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/model_summary.hpp"
#include "models/registry.hpp"
#include "models/weight_format.hpp"
#include "tests/models/dsv3_checkpoint.hpp"

namespace moeplan::models {
namespace test_weight_format {
namespace {

MoeModel load(const std::string& name) {
  auto m = load_model(name);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return m.ok() ? *m : MoeModel{};
}

// A valid tiny Qwen2-MoE config with `qc` as its quantization_config.
nlohmann::json tiny(const nlohmann::json& qc) {
  auto j = nlohmann::json::parse(R"({"architectures": ["Qwen2MoeForCausalLM"], "hidden_size": 256,
    "intermediate_size": 512, "moe_intermediate_size": 256, "num_experts": 4,
    "num_experts_per_tok": 2, "num_hidden_layers": 2, "num_attention_heads": 4,
    "vocab_size": 100})");
  if (!qc.is_null()) j["quantization_config"] = qc;
  return j;
}

WeightFormat format_of(const nlohmann::json& qc) {
  auto m = parse_model_config(tiny(qc).dump(), "q/config.json", "q");
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return m.ok() ? m->weights : WeightFormat{};
}

std::string error_of(const nlohmann::json& qc) {
  auto m = parse_model_config(tiny(qc).dump(), "q/config.json", "q");
  EXPECT_FALSE(m.ok());
  return m.ok() ? "" : m.error().message;
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << text << "' lacks '" << part << "'";
}

TEST(WeightFormat, DeepSeekV3IsFp8BlockScaled) {
  const MoeModel m = load("deepseek-v3");
  EXPECT_EQ(m.dtype, DType::kBf16);  // torch_dtype: the unquantized tensors
  EXPECT_EQ(m.weights.scheme, WeightScheme::kFp8Block);
  EXPECT_EQ(m.weights.name(), "fp8-block");
  EXPECT_EQ(m.weights.block_out, 128);
  EXPECT_EQ(m.weights.block_in, 128);
  EXPECT_EQ(m.weights.activations, ActivationScheme::kFp8Group);
  EXPECT_EQ(m.weights.activation_group, 128);
  EXPECT_EQ(m.weights.source, "quantization_config (fp8)");
  EXPECT_EQ(m.weights.compute_dtype(), DType::kFp8);
  // gate and up [2048, 7168], down [7168, 2048]: one byte a value, and a [16, 56] / [56, 16]
  // fp32 weight_scale_inv each.
  EXPECT_DOUBLE_EQ(m.expert_weight_bytes(), 3.0 * 2048 * 7168 + 3.0 * 16 * 56 * 4);
  EXPECT_DOUBLE_EQ(m.expert_weight_bytes(), 44050944.0);
  // TP 4: [512, 7168] slices, [4, 56] scales.
  EXPECT_DOUBLE_EQ(m.expert_weight_bytes(4), 3.0 * 512 * 7168 + 3.0 * 4 * 56 * 4);
  // The bf16 figure of the issue is twice as large.
  EXPECT_DOUBLE_EQ(m.expert_bytes(DType::kBf16) / (1024.0 * 1024.0), 84.0);
}

TEST(WeightFormat, DeepSeekV3MatchesItsCheckpoint) {
  const auto c = testing::dsv3_checkpoint();
  // Our tensor list with the MTP module against the published file sizes: the files hold
  // safetensors headers besides (a few MB of JSON over 163 files), so ours is just below.
  const double listed = c.main_model() + c.mtp;
  EXPECT_LT(listed, testing::kDsv3PublishedBytes);
  EXPECT_NEAR(listed / testing::kDsv3PublishedBytes, 1.0, 1e-4);
  // moeplan's model (the main model, MTP excluded) gives the same bytes as the tensor list.
  const MoeModel m = load("deepseek-v3");
  EXPECT_NEAR(m.total_weight_bytes(), c.main_model(), 1.0);
  EXPECT_NEAR(m.num_moe_layers() * m.num_experts * m.expert_weight_bytes(), c.routed, 1.0);
}

TEST(WeightFormat, ScalesTileWithCeilDivision) {
  const MoeModel m = load("deepseek-v3");
  // kv_a_proj_with_mqa [576, 7168] has a [5, 56] weight_scale_inv in the checkpoint.
  EXPECT_DOUBLE_EQ(m.weights.scale_bytes(576, 7168), 5.0 * 56 * 4);
  EXPECT_DOUBLE_EQ(m.weights.matrix_bytes(576, 7168), 576.0 * 7168 + 5.0 * 56 * 4);
}

TEST(WeightFormat, EveryNamedFormatSizesOneExpertMatrix) {
  // One [2048, 7168] weight (rows: output channels, columns: inputs) in each format.
  const std::pair<const char*, double> expected[] = {
      {"bf16", 2048.0 * 7168 * 2},
      {"fp16", 2048.0 * 7168 * 2},
      {"fp8-block", 2048.0 * 7168 + 16.0 * 56 * 4},     // fp32 per 128×128 block
      {"fp8-channel", 2048.0 * 7168 + 2048.0 * 4},      // fp32 per output channel
      {"fp8-tensor", 2048.0 * 7168 + 4},                // one fp32
      {"mxfp4", 2048.0 * 7168 / 2 + 2048.0 * 224},      // e8m0 per 32 inputs
      {"nvfp4", 2048.0 * 7168 / 2 + 2048.0 * 448 + 8},  // e4m3 per 16, two fp32 per tensor
      {"w4a16", 2048.0 * 7168 / 2 + 2048.0 * 56 * 2},   // 16-bit scale per 128 inputs
  };
  ASSERT_EQ(std::size(expected), weight_format_names().size());
  for (const auto& [name, bytes] : expected) {
    auto f = parse_weight_format(name, DType::kBf16);
    ASSERT_TRUE(f.ok()) << name;
    EXPECT_EQ(f->name(), name);
    EXPECT_DOUBLE_EQ(f->matrix_bytes(2048, 7168), bytes) << name;
    EXPECT_EQ(f->source, std::string("--weights ") + name);
  }
}

TEST(WeightFormat, DispatchRowCarriesScales) {
  const MoeModel m = load("deepseek-v3");
  // DeepEP's fp8 payload: H values and an fp32 scale per 128 (FACTS: H + 4·H/128).
  EXPECT_DOUBLE_EQ(m.weights.dispatch_row_bytes(7168), 7168.0 + 4.0 * 56);
  auto channel = parse_weight_format("fp8-channel", DType::kBf16);
  EXPECT_DOUBLE_EQ(channel->dispatch_row_bytes(7168), 7168.0 + 4.0);
  auto w4 = parse_weight_format("w4a16", DType::kBf16);
  EXPECT_DOUBLE_EQ(w4->dispatch_row_bytes(7168), 7168.0 * 2);
  EXPECT_EQ(w4->compute_dtype(), DType::kBf16);
}

TEST(WeightFormat, UnknownNameIsAnErrorAboutTheFlag) {
  auto f = parse_weight_format("fp9", DType::kBf16);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().input, "weights");
  expect_contains(f.error().message, "weights: expected one of fp8-block, fp8-channel");
  expect_contains(f.error().message, "got 'fp9'");
}

TEST(WeightFormat, OverrideReplacesTheModelsFormat) {
  MoeModel m = load("deepseek-v3");
  ASSERT_TRUE(apply_weights_choice(m, "bf16").ok());
  EXPECT_FALSE(m.weights.quantized());
  EXPECT_DOUBLE_EQ(m.expert_weight_bytes() / (1024.0 * 1024.0), 84.0);
  ASSERT_TRUE(apply_weights_choice(m, "nvfp4").ok());
  EXPECT_EQ(m.weights.name(), "nvfp4");
  EXPECT_EQ(m.dtype, DType::kBf16);
  EXPECT_TRUE(apply_weights_choice(m, "").ok());  // "" keeps the format
  EXPECT_EQ(m.weights.name(), "nvfp4");
  EXPECT_FALSE(apply_weights_choice(m, "int3").ok());
  // A plain model made fp8: its router and embeddings stay bf16.
  MoeModel q = load("qwen3-30b-a3b");
  const double bf16_total = q.total_weight_bytes();
  ASSERT_TRUE(apply_weights_choice(q, "fp8-block").ok());
  EXPECT_LT(q.total_weight_bytes(), 0.6 * bf16_total);
  EXPECT_GT(q.total_weight_bytes(), 0.5 * bf16_total);
}

TEST(WeightFormat, PlainModelsKeepTheirBytes) {
  for (const auto& name : bundled_model_names()) {
    const MoeModel m = load(name);
    if (m.weights.quantized()) continue;
    EXPECT_EQ(m.weights.source, "torch_dtype") << name;
    EXPECT_DOUBLE_EQ(m.expert_weight_bytes(), m.expert_bytes(m.dtype)) << name;
    EXPECT_DOUBLE_EQ(m.moe_layer_weight_bytes(), m.moe_layer_bytes(m.dtype)) << name;
    EXPECT_NEAR(m.total_weight_bytes(),
                static_cast<double>(m.total_parameters()) * dtype_bytes(m.dtype), 1.0)
        << name;
  }
}

TEST(QuantizationConfig, Fbgemm) {
  const auto f = format_of({{"quant_method", "fbgemm_fp8"},
                            {"activation_scale_ub", 1200.0},
                            {"modules_to_not_convert", {"lm_head"}}});
  EXPECT_EQ(f.scheme, WeightScheme::kFp8Channel);
  EXPECT_EQ(f.activations, ActivationScheme::kFp8Token);
  EXPECT_TRUE(f.attention_quantized);
}

TEST(QuantizationConfig, Fp8WithoutBlocksIsPerTensor) {
  const auto f = format_of({{"quant_method", "fp8"}, {"activation_scheme", "static"}});
  EXPECT_EQ(f.scheme, WeightScheme::kFp8Tensor);
  EXPECT_EQ(f.activations, ActivationScheme::kFp8Tensor);
}

TEST(QuantizationConfig, CompressedTensorsFp8Dynamic) {
  // As llm-compressor writes FP8_DYNAMIC checkpoints.
  const auto qc = nlohmann::json::parse(R"({"quant_method": "compressed-tensors",
    "format": "float-quantized", "ignore": ["lm_head"], "config_groups": {"group_0": {
      "targets": ["Linear"],
      "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true,
                  "dynamic": false},
      "input_activations": {"num_bits": 8, "type": "float", "strategy": "token",
                            "dynamic": true, "symmetric": true}}}})");
  const auto f = format_of(qc);
  EXPECT_EQ(f.name(), "fp8-channel");
  EXPECT_EQ(f.activations, ActivationScheme::kFp8Token);
  EXPECT_EQ(f.source, "quantization_config (compressed-tensors)");
}

TEST(QuantizationConfig, CompressedTensorsBlockAndW4A16AndNvfp4) {
  auto block = nlohmann::json::parse(R"({"quant_method": "compressed-tensors", "config_groups":
    {"group_0": {"weights": {"num_bits": 8, "type": "float", "strategy": "block",
      "block_structure": [128, 128]}, "input_activations": {"num_bits": 8, "type": "float",
      "strategy": "group", "group_size": 128, "dynamic": true}}}})");
  auto f = format_of(block);
  EXPECT_EQ(f.name(), "fp8-block");
  EXPECT_EQ(f.activation_group, 128);
  auto w4 = nlohmann::json::parse(R"({"quant_method": "compressed-tensors",
    "format": "pack-quantized", "config_groups": {"group_0": {"weights": {"num_bits": 4,
    "type": "int", "strategy": "group", "group_size": 128, "symmetric": true},
    "input_activations": null, "targets": ["Linear"]}}})");
  f = format_of(w4);
  EXPECT_EQ(f.name(), "w4a16");
  EXPECT_EQ(f.group_size, 128);
  EXPECT_FALSE(f.zero_points);
  EXPECT_EQ(f.activations, ActivationScheme::kPlain);
  auto fp4 = nlohmann::json::parse(R"({"quant_method": "compressed-tensors",
    "format": "nvfp4-pack-quantized", "config_groups": {"group_0": {"weights": {"num_bits": 4,
    "type": "float", "strategy": "tensor_group", "group_size": 16},
    "input_activations": {"num_bits": 4, "type": "float", "strategy": "tensor_group",
    "group_size": 16, "dynamic": "local"}}}})");
  f = format_of(fp4);
  EXPECT_EQ(f.name(), "nvfp4");
  EXPECT_EQ(f.activations, ActivationScheme::kFp4Group);
}

TEST(QuantizationConfig, GptOssMxfp4LeavesAttentionPlain) {
  // openai/gpt-oss-120b's quantization_config.
  const auto f = format_of(nlohmann::json::parse(R"({"modules_to_not_convert": [
    "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"],
    "quant_method": "mxfp4"})"));
  EXPECT_EQ(f.name(), "mxfp4");
  EXPECT_EQ(f.group_size, 32);
  EXPECT_FALSE(f.attention_quantized);
  auto m = parse_model_config(tiny(nlohmann::json::parse(R"({"quant_method": "mxfp4",
    "modules_to_not_convert": ["model.layers.*.self_attn"]})"))
                                  .dump(),
                              "q/config.json", "q");
  ASSERT_TRUE(m.ok());
  auto plain = parse_model_config(tiny(nullptr).dump(), "q/config.json", "q");
  ASSERT_TRUE(plain.ok());
  EXPECT_DOUBLE_EQ(m->attention_weight_bytes(), plain->attention_weight_bytes());
  EXPECT_LT(m->expert_weight_bytes(), plain->expert_weight_bytes() / 3.0);
}

TEST(QuantizationConfig, ModeloptAndGptqAndAwq) {
  auto f = format_of({{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}, {"group_size", 16}});
  EXPECT_EQ(f.name(), "nvfp4");
  f = format_of({{"quant_method", "modelopt"}, {"quantization", {{"quant_algo", "FP8"}}}});
  EXPECT_EQ(f.name(), "fp8-tensor");
  f = format_of({{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128}, {"sym", true}});
  EXPECT_EQ(f.name(), "w4a16");
  EXPECT_TRUE(f.zero_points);  // GPTQ stores qzeros
  f = format_of({{"quant_method", "awq"}, {"bits", 4}, {"group_size", 64}, {"zero_point", false}});
  EXPECT_EQ(f.group_size, 64);
  EXPECT_FALSE(f.zero_points);
}

TEST(QuantizationConfig, BadInputNamesFileAndKey) {
  expect_contains(error_of({{"quant_method", "bitsandbytes"}}),
                  "q/config.json: key 'quantization_config.quant_method': unknown quantization "
                  "method \"bitsandbytes\"");
  expect_contains(error_of({{"fmt", "e4m3"}}),
                  "q/config.json: key 'quantization_config.quant_method': missing");
  expect_contains(error_of({{"quant_method", "fp8"}, {"weight_block_size", {128}}}),
                  "key 'quantization_config.weight_block_size': expected two positive block");
  expect_contains(error_of({{"quant_method", "fp8"}, {"weight_block_size", {128, 0}}}),
                  "weight_block_size");
  expect_contains(error_of({{"quant_method", "fp8"}, {"fmt", "e5m2"}}),
                  "key 'quantization_config.fmt': expected \"e4m3\"");
  expect_contains(error_of({{"quant_method", "fp8"},
                            {"weight_block_size", {128, 128}},
                            {"activation_scheme", "static"}}),
                  "quantization_config.activation_scheme");
  expect_contains(error_of({{"quant_method", "gptq"}, {"bits", 8}}),
                  "key 'quantization_config.bits': expected 4");
  expect_contains(error_of({{"quant_method", "modelopt"}, {"quant_algo", "INT8_SQ"}}),
                  "key 'quantization_config.quant_algo': unknown ModelOpt algorithm");
  expect_contains(error_of({{"quant_method", "compressed-tensors"}}),
                  "key 'quantization_config.config_groups'");
  expect_contains(error_of(nlohmann::json::parse(R"({"quant_method": "compressed-tensors",
    "config_groups": {"g": {"weights": {"num_bits": 2, "type": "int", "strategy": "group",
    "group_size": 64}}}})")),
                  "key 'quantization_config.config_groups.g.weights': unsupported scheme");
  expect_contains(error_of(nlohmann::json::parse(R"({"quant_method": "compressed-tensors",
    "config_groups": {"a": {"weights": {"num_bits": 8, "type": "float", "strategy": "channel"}},
    "b": {"weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}}}})")),
                  "groups with different schemes");
  expect_contains(error_of("fp8"), "key 'quantization_config': expected an object");
}

TEST(WeightFormat, SummaryShowsWeightsAndActivations) {
  const auto rows = model_summary(load("deepseek-v3"));
  auto find = [&](const std::string& key) {
    for (const auto& [k, v] : rows) {
      if (k == key) return v;
    }
    return std::string("(missing)");
  };
  EXPECT_EQ(find("Weights"),
            "fp8 e4m3, 128×128 blocks, fp32 scales [fp8-block, quantization_config (fp8)]");
  EXPECT_EQ(find("Activations"), "fp8 e4m3 dynamic, 1×128 groups, fp32 scales");
  EXPECT_EQ(find("Bytes per expert"), "42.01 MiB (fp8-block, scales included)");
}

}  // namespace
}  // namespace test_weight_format
}  // namespace moeplan::models
