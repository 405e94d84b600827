// Bad model configs: each gives one error naming the file, the key and what was expected.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "models/registry.hpp"

namespace moeplan::models {
namespace test_bad_configs {
namespace {

// A valid tiny Qwen2-MoE config; each test breaks one thing.
nlohmann::json tiny() {
  return nlohmann::json::parse(R"({"architectures": ["Qwen2MoeForCausalLM"], "hidden_size": 64,
    "intermediate_size": 128, "moe_intermediate_size": 32, "num_experts": 4,
    "num_experts_per_tok": 2, "num_hidden_layers": 2, "num_attention_heads": 4,
    "vocab_size": 100})");
}

std::string error_of(const nlohmann::json& j) {
  auto m = parse_model_config(j.dump(), "bad/config.json", "bad");
  EXPECT_FALSE(m.ok());
  return m.ok() ? "" : m.error().message;
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << text << "' lacks '" << part << "'";
}

TEST(BadConfig, TinyIsValid) {
  auto m = parse_model_config(tiny().dump(), "ok.json", "ok");
  ASSERT_TRUE(m.ok()) << m.error().message;
}

TEST(BadConfig, MissingFile) {
  auto m = load_model("/nonexistent/dir/config.json");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().message, "/nonexistent/dir/config.json: file not found");
}

TEST(BadConfig, UnknownBundledName) {
  auto m = load_model("gpt-4");
  ASSERT_FALSE(m.ok());
  expect_contains(m.error().message, "unknown model 'gpt-4'");
  expect_contains(m.error().message, "qwen2-57b-a14b");
}

TEST(BadConfig, InvalidJson) {
  auto m = parse_model_config(R"({"hidden_size": 64,)", "bad/config.json", "bad");
  ASSERT_FALSE(m.ok());
  expect_contains(m.error().message, "bad/config.json: invalid JSON at byte");
}

TEST(BadConfig, EmptyFile) {
  auto m = parse_model_config("  \n", "bad/config.json", "bad");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().message, "bad/config.json: empty file, expected a JSON document");
}

TEST(BadConfig, NotAnObject) {
  expect_contains(error_of(nlohmann::json::array({1, 2})), "expected a JSON object");
}

TEST(BadConfig, UnknownArchitecture) {
  auto j = tiny();
  j["architectures"] = {"LlamaForCausalLM"};
  const std::string e = error_of(j);
  expect_contains(
      e, "bad/config.json: key 'architectures': unsupported architecture 'LlamaForCausalLM'");
  expect_contains(e, "MixtralForCausalLM");
}

TEST(BadConfig, NoArchitectureAtAll) {
  auto j = tiny();
  j.erase("architectures");
  expect_contains(error_of(j), "key 'architectures': missing, expected one of");
}

TEST(BadConfig, MissingKey) {
  auto j = tiny();
  j.erase("num_experts");
  EXPECT_EQ(error_of(j),
            "bad/config.json: key 'num_experts': missing, expected an integer in [1, 65536]");
}

TEST(BadConfig, IllTypedKey) {
  auto j = tiny();
  j["hidden_size"] = "64";
  EXPECT_EQ(error_of(j),
            "bad/config.json: key 'hidden_size': expected an integer in [1, 16777216], "
            "got string \"64\"");
}

TEST(BadConfig, FractionalInteger) {
  auto j = tiny();
  j["num_hidden_layers"] = 2.5;
  expect_contains(error_of(j), "key 'num_hidden_layers': expected an integer");
}

TEST(BadConfig, TopkAboveExperts) {
  auto j = tiny();
  j["num_experts_per_tok"] = 8;
  EXPECT_EQ(error_of(j),
            "bad/config.json: key 'num_experts_per_tok': expected an integer in [1, 4], got 8");
}

// Every size in range, but together past what std::int64_t parameter counts can hold (found by
// reasoning about fuzz_model_config's target: total_parameters() overflowed silently).
TEST(BadConfig, SizesTooLargeTogether) {
  auto j = tiny();
  j["hidden_size"] = 16777216;
  j["num_attention_heads"] = 65536;
  j["head_dim"] = 16777216;
  j["num_hidden_layers"] = 65536;
  const std::string e = error_of(j);
  EXPECT_EQ(e.rfind("bad/config.json: the sizes give ", 0), 0U) << e;
  expect_contains(e, " parameters, expected at most 1e15 (moeplan's model limit;");
  // The largest bundled model is far inside the limit.
  auto big = load_model("deepseek-v3");
  ASSERT_TRUE(big.ok());
  EXPECT_LT(static_cast<double>(big->total_parameters()), kMaxModelParameters / 1000);
}

TEST(BadConfig, ZeroWidth) {
  auto j = tiny();
  j["moe_intermediate_size"] = 0;
  EXPECT_EQ(error_of(j),
            "bad/config.json: key 'moe_intermediate_size': expected an integer in "
            "[1, 16777216], got 0");
}

TEST(BadConfig, NegativeValue) {
  auto j = tiny();
  j["vocab_size"] = -5;
  expect_contains(error_of(j), "key 'vocab_size': expected an integer in [1, 16777216], got -5");
}

TEST(BadConfig, BooleanIllTyped) {
  auto j = tiny();
  j["norm_topk_prob"] = "yes";
  EXPECT_EQ(error_of(j),
            "bad/config.json: key 'norm_topk_prob': expected true or false, got string \"yes\"");
}

TEST(BadConfig, MlpOnlyLayerOutOfRange) {
  auto j = tiny();
  j["mlp_only_layers"] = {0, 7};
  expect_contains(error_of(j),
                  "key 'mlp_only_layers': expected an array of integers in [0, 1], "
                  "got 7 at index 1");
}

TEST(BadConfig, EveryLayerDense) {
  auto j = tiny();
  j["mlp_only_layers"] = {0, 1};
  expect_contains(error_of(j), "bad/config.json: no MoE layer");
}

TEST(BadConfig, KvHeadsNotDividingHeads) {
  auto j = tiny();
  j["num_key_value_heads"] = 3;
  expect_contains(error_of(j),
                  "key 'num_key_value_heads': expected a divisor of num_attention_heads=4");
}

TEST(BadConfig, UnknownDtype) {
  auto j = tiny();
  j["torch_dtype"] = "int4";
  expect_contains(error_of(j), "key 'torch_dtype': expected \"bfloat16\"");
}

TEST(BadConfig, DeepSeekBadScoringAndGroups) {
  auto j = nlohmann::json::parse(R"({"architectures": ["DeepseekV3ForCausalLM"],
    "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
    "n_routed_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 2,
    "num_attention_heads": 4, "vocab_size": 100, "kv_lora_rank": 16, "qk_nope_head_dim": 8,
    "qk_rope_head_dim": 8, "v_head_dim": 8, "n_group": 4, "topk_group": 2})");
  auto ok = parse_model_config(j.dump(), "ds.json", "ds");
  ASSERT_TRUE(ok.ok()) << ok.error().message;

  auto bad = j;
  bad["scoring_func"] = "relu";
  expect_contains(error_of(bad), "key 'scoring_func': expected \"softmax\" or \"sigmoid\"");
  bad = j;
  bad["topk_method"] = "random";
  expect_contains(error_of(bad), "key 'topk_method'");
  bad = j;
  bad["n_group"] = 3;  // 8 experts do not split into 3 groups
  expect_contains(error_of(bad), "key 'n_group': expected a divisor of n_routed_experts=8");
  bad = j;
  bad["topk_group"] = 5;
  expect_contains(error_of(bad), "key 'topk_group': expected an integer in [1, 4], got 5");
  bad = j;
  bad["topk_group"] = 1;  // one group of 2 experts cannot supply a top-3
  bad["num_experts_per_tok"] = 3;
  expect_contains(error_of(bad), "key 'num_experts_per_tok': expected at most topk_group");
  bad = j;
  bad.erase("kv_lora_rank");
  expect_contains(error_of(bad), "key 'kv_lora_rank': missing");
}

TEST(BadConfig, DirectoryInsteadOfFile) {
  const auto dir = std::filesystem::temp_directory_path() / "moeplan_test_dir.json";
  std::filesystem::create_directories(dir);
  auto m = load_model(dir.string());
  std::filesystem::remove(dir);
  ASSERT_FALSE(m.ok());
  expect_contains(m.error().message, "expected a file, got a directory");
}

}  // namespace
}  // namespace test_bad_configs
}  // namespace moeplan::models
