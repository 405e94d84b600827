// `moeplan verify` as a user runs it: JSON rows, exit codes, one-line errors before any work.
#include <nlohmann/json.hpp>

#include "kernels/backends.hpp"
#include "tests/cli/cli_runner.hpp"

namespace moeplan::cli_test {
namespace {

TEST(CliVerify, JsonRowsForEveryLayoutAndDispatcher) {
  const auto r = run_cli(
      "verify --model qwen3-30b-a3b --scale 16 --tokens 40 --dtype bf16,fp32 "
      "--ranks 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("passed").get<bool>());
  EXPECT_EQ(j.at("ranks").get<int>(), 2);
  // 2x1 and 1x2 (no ep-inner variant without both > 1) × 3 dispatchers × 2 dtypes.
  ASSERT_EQ(j.at("rows").size(), 12U);
  for (const auto& row : j.at("rows")) {
    EXPECT_TRUE(row.at("passed").get<bool>());
    EXPECT_LE(row.at("max_bound_use").get<double>(), 1.0);
    EXPECT_GT(row.at("max_abs_reference").get<double>(), 0.0);
    EXPECT_GT(row.at("layer_ms").get<double>(), 0.0);
  }
}

TEST(CliVerify, TableEndsWithPassCount) {
  const auto r = run_cli(
      "verify --model mixtral-8x7b --scale 128 --tokens 16 --dtype fp16 --ranks 2 "
      "--layouts 2x1 --dispatcher a2av,allgather");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\n2 passed, 0 failed"), std::string::npos) << r.out;
}

TEST(CliVerify, IllegalLayoutsRejectedBeforeWork) {
  expect_one_line_error(
      run_cli("verify --model qwen1.5-moe-a2.7b --scale 1 --ranks 8 --layouts 8x1"),
      "layout 8x1: num_experts=60 % ep=8 != 0");
  expect_one_line_error(run_cli("verify --ranks 4 --layouts 2x1 --scale 64"),
                        "ep·tp = 2 but there are 4 ranks");
  expect_one_line_error(run_cli("verify --ranks 2 --layouts 1x2 --scale 3"),
                        "--scale 3 does not divide hidden_size=3584");
  expect_one_line_error(run_cli("verify --tokens 0 --scale 64"), "--tokens");
  expect_one_line_error(run_cli("verify --tokens 12,abc --scale 64"), "got 'abc'");
  expect_one_line_error(run_cli("verify --dtype int8 --scale 64"),
                        "--dtype: expected fp32, fp16 or bf16");
  expect_one_line_error(run_cli("verify --dispatcher ring --scale 64"),
                        "unknown dispatcher 'ring'");
  expect_one_line_error(run_cli("verify --layouts 2by2 --scale 64"), "expected EPxTP");
  expect_one_line_error(run_cli("verify --model nope --scale 64"), "unknown model 'nope'");
  expect_one_line_error(run_cli("verify --ranks 0 --scale 64"), "--ranks: expected 1 to 256");
}

TEST(CliVerify, BackendChoice) {
  expect_one_line_error(run_cli("verify --backend gpu --scale 64"),
                        "--backend: expected cpu or cuda, got 'gpu'");
  const std::string small =
      "verify --scale 64 --tokens 16 --ranks 1 --layouts 1x1 --dispatcher a2av --dtype bf16 "
      "--json --backend ";
  const auto cpu = run_cli(small + "cpu");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  EXPECT_TRUE(nlohmann::json::parse(cpu.out).at("passed").get<bool>());

  // The CUDA backend runs where a device is usable, and otherwise refuses before any work,
  // saying why (not compiled in, or the CUDA error).
  const auto inventory = kernels::backend_inventory();
  const auto cuda = run_cli(small + "cuda");
  if (inventory[1].usable) {
    ASSERT_EQ(cuda.exit_code, 0) << cuda.err;
    EXPECT_TRUE(nlohmann::json::parse(cuda.out).at("passed").get<bool>());
  } else {
    expect_one_line_error(cuda, inventory[1].compiled ? "--backend cuda: no usable CUDA device: "
                                                      : "--backend cuda: not compiled in");
  }
}

}  // namespace
}  // namespace moeplan::cli_test
