// The CLI as a user runs it: golden outputs, exit codes and one-line errors.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.hpp"

namespace moeplan::cli_test {
namespace test_cli {
namespace {

TEST(CliModels, ListGolden) {
  const auto r = run_cli("models list");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("models_list.txt", r.out);
}

TEST(CliModels, ShowDefaultGolden) {
  const auto r = run_cli("models show");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("models_show_qwen2-57b-a14b.txt", r.out);
}

TEST(CliModels, ShowDeepSeekV3Golden) {
  const auto r = run_cli("models show deepseek-v3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("models_show_deepseek-v3.txt", r.out);
}

TEST(CliModels, ShowJsonGolden) {
  const auto r = run_cli("models show mixtral-8x7b --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("num_experts").get<int>(), 8);
  expect_golden("models_show_mixtral-8x7b.json", r.out);
}

TEST(CliModels, ShowByPath) {
  const auto path = moeplan::resource_dir() / "models" / "qwen3-30b-a3b.json";
  const auto r = run_cli("models show " + path.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Qwen3MoeForCausalLM"), std::string::npos);
}

TEST(CliModels, UnknownModelIsExit2) {
  expect_one_line_error(run_cli("models show no-such-model"), "unknown model 'no-such-model'");
}

TEST(CliModels, MissingFileIsExit2) {
  expect_one_line_error(run_cli("models show /nonexistent/config.json"),
                        "/nonexistent/config.json: file not found");
}

TEST(CliModels, BadConfigIsExit2) {
  const auto path = std::filesystem::temp_directory_path() / "moeplan_cli_bad_config.json";
  std::ofstream(path) << R"({"architectures": ["Qwen2MoeForCausalLM"], "hidden_size": 64,
    "intermediate_size": 128, "moe_intermediate_size": 32, "num_experts": 4,
    "num_experts_per_tok": 9, "num_hidden_layers": 2, "num_attention_heads": 4,
    "vocab_size": 100})";
  const auto r = run_cli("models show " + path.string());
  std::filesystem::remove(path);
  expect_one_line_error(r, "key 'num_experts_per_tok': expected an integer in [1, 4], got 9");
}

TEST(CliModels, UnknownFlagIsExit2) {
  const auto r = run_cli("models show --no-such-flag");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(r.err.empty());
}

TEST(CliVersion, ListsBackends) {
  const auto r = run_cli("--version");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind(std::string("moeplan ") + MOEPLAN_VERSION + "\n", 0), 0U) << r.out;
  for (const char* b : {"\ncpu ", "\ncuda ", "\nmpi ", "\nnccl "}) {
    EXPECT_NE(r.out.find(b), std::string::npos) << b;
  }
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
  // The CLI keeps freed buffers in the process (kernels/host_memory.hpp).
  EXPECT_NE(r.out.find("host allocator: glibc malloc: no mmapped blocks, one arena"),
            std::string::npos)
      << r.out;
#endif
}

TEST(CliHelp, NoCommandPrintsHelpAndExit2) {
  const auto r = run_cli("");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("models"), std::string::npos);
}

}  // namespace
}  // namespace test_cli
}  // namespace moeplan::cli_test
