// `moeplan verify` as a user runs it: JSON rows, exit codes, one-line errors before any work.
#include <nlohmann/json.hpp>

#include "kernels/backends.hpp"
#include "tests/cli/cli_runner.hpp"

namespace moeplan::cli_test {
namespace test_verify_cli {
namespace {

TEST(CliVerify, JsonRowsForEveryLayoutAndDispatcher) {
  const auto r = run_cli(
      "verify --model qwen3-30b-a3b --scale 16 --tokens 40 --dtype bf16,fp32 "
      "--ranks 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("passed").get<bool>());
  EXPECT_EQ(j.at("ranks").get<int>(), 2);
  // 2x1 × 4 dispatchers (deepep_ll runs on ep 2; deepep_normal needs two nodes) and 1x2 × 3
  // (DeepEP sends whole tokens: tp 1 only) × 2 dtypes; what did not run is listed with why.
  ASSERT_EQ(j.at("rows").size(), 14U);
  EXPECT_EQ(j.at("skipped").size(), 3U) << j.at("skipped").dump();
  for (const auto& row : j.at("rows")) {
    EXPECT_TRUE(row.at("passed").get<bool>());
    EXPECT_LE(row.at("max_bound_use").get<double>(), 1.0);
    EXPECT_GT(row.at("max_abs_reference").get<double>(), 0.0);
    EXPECT_GT(row.at("layer_ms").get<double>(), 0.0);
  }
}

// verify --attention: the attention block of one rank at full width, every op against its
// reference on every row, per dtype, context and decode batch; its own inputs refused in one
// line before any work.
TEST(CliVerify, AttentionBlockEveryOpOnEveryRow) {
  const auto r = run_cli(
      "verify --attention --model qwen3-30b-a3b --dtype fp32,fp16 --contexts 24 --batches 3 "
      "--json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("passed").get<bool>());
  EXPECT_EQ(j.at("scope"), "block");
  ASSERT_EQ(j.at("rows").size(), 4U);  // 2 dtypes × (prefill 24, decode 3 × 24)
  const std::vector<std::string> ops = {"input norm",
                                        "q/k/v projection",
                                        "RoPE q",
                                        "RoPE k",
                                        "q norm",
                                        "k norm",
                                        "attention core",
                                        "output projection",
                                        "post-attention norm"};
  for (const auto& row : j.at("rows")) {
    const int tokens = row.at("phase") == "prefill" ? 24 : 3;
    ASSERT_EQ(row.at("ops").size(), ops.size()) << row.dump();
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const auto& op = row.at("ops")[i];
      EXPECT_EQ(op.at("op"), ops[i]);
      EXPECT_TRUE(op.at("passed").get<bool>()) << op.dump();
      EXPECT_LE(op.at("max_bound_use").get<double>(), 1.0);
    }
    // Every row: the input norm's tokens × 2048, the attention core's tokens × 32 heads × 128.
    EXPECT_EQ(row.at("ops")[0].at("checked").get<long>(), tokens * 2048L);
    EXPECT_EQ(row.at("ops")[6].at("checked").get<long>(), tokens * 32L * 128L);
  }
  expect_one_line_error(run_cli("verify --attention --model qwen3-30b-a3b --tokens 5"),
                        "--tokens applies to the MoE layer's cases, not to verify --attention");
  expect_one_line_error(run_cli("verify --attention --model qwen3-30b-a3b --ranks 2"),
                        "--ranks: verify --attention runs on one rank");
  expect_one_line_error(run_cli("verify --attention --model qwen3-30b-a3b --scope core"),
                        "--scope core: verify --attention checks the attention block");
  expect_one_line_error(run_cli("verify --attention --model qwen3-30b-a3b --contexts 99999999"),
                        "--contexts");
}

// MLA's block (DeepSeek-V2-Lite: q straight up, no q LoRA) at full width: prefill expanded,
// decode absorbed, every op named and within its bound.
TEST(CliVerify, MlaAttentionBlockEveryOp) {
  const auto r = run_cli(
      "verify --attention --model deepseek-v2-lite --dtype bf16 --contexts 16 --batches 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("passed").get<bool>());
  ASSERT_EQ(j.at("rows").size(), 2U);
  const std::vector<std::string> shared = {"input norm",     "q projection", "kv down projection",
                                           "kv latent norm", "RoPE k",       "RoPE q"};
  const std::vector<std::string> prefill = {"kv up projection", "attention core",
                                            "output projection", "post-attention norm"};
  const std::vector<std::string> decode = {"q through W_UK", "attention core",
                                           "latent through W_UV", "output projection",
                                           "post-attention norm"};
  for (const auto& row : j.at("rows")) {
    auto ops = shared;
    const auto& tail = row.at("phase") == "prefill" ? prefill : decode;
    ops.insert(ops.end(), tail.begin(), tail.end());
    ASSERT_EQ(row.at("ops").size(), ops.size()) << row.dump();
    for (std::size_t i = 0; i < ops.size(); ++i) {
      EXPECT_EQ(row.at("ops")[i].at("op"), ops[i]);
      EXPECT_TRUE(row.at("ops")[i].at("passed").get<bool>()) << row.at("ops")[i].dump();
    }
  }
}

TEST(CliVerify, TableEndsWithPassCount) {
  const auto r = run_cli(
      "verify --model mixtral-8x7b --scale 128 --tokens 16 --dtype fp16 --ranks 2 "
      "--layouts 2x1 --dispatcher a2av,allgather");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\n2 passed, 0 failed"), std::string::npos) << r.out;
}

TEST(CliVerify, Fp8BlockWeights) {
  // Qwen2-57B-A14B at 1/8 width with DeepSeek-V3's fp8 recipe: H 448 and I 320 are not whole
  // 128 blocks (partial edge blocks, as checkpoints tile them); tp 2 would split a block.
  const auto r = run_cli(
      "verify --model qwen2-57b-a14b --weights fp8-block --scale 8 --ranks 2 --tokens 16 "
      "--dtype bf16 --layouts 2x1 --dispatcher a2av --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("passed").get<bool>());
  EXPECT_EQ(j.at("weights").at("name"), "fp8-block");
  ASSERT_EQ(j.at("rows").size(), 1U);
  // DeepSeek-V3 runs its own fp8 format by default, and says so.
  const auto d = run_cli(
      "verify --model deepseek-v3 --scale 8 --ranks 2 --tokens 8 --dtype fp32 --layouts 2x1 "
      "--dispatcher a2av");
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_NE(d.out.find("expert weights: fp8 e4m3, 128×128 blocks"), std::string::npos) << d.out;
  expect_one_line_error(run_cli("verify --model qwen1.5-moe-a2.7b --weights nvfp4 --scale 16"),
                        "--weights: nvfp4 groups of 16 inputs do not divide "
                        "moe_intermediate_size = 88");
  expect_one_line_error(run_cli("verify --model qwen2-57b-a14b --weights w4a16 --scale 8"),
                        "--weights: w4a16 groups of 128 inputs do not divide "
                        "hidden_size = 448");
  expect_one_line_error(run_cli("verify --model qwen2-57b-a14b --weights fp8-block --scale 8 "
                                "--ranks 2 --layouts 1x2"),
                        "--layouts: fp8 blocks of 128×128 do not divide the expert width");
}

TEST(CliVerify, FourBitWeightsDecodedOnLoad) {
  // MXFP4 (groups of 32) on Qwen3-30B-A3B at 1/8 width: H 256, I 96; every dispatcher and the
  // 2x1 and 1x2 splits (a 48-wide slice of the down projection is not whole groups of 32).
  const auto r = run_cli(
      "verify --model qwen3-30b-a3b --weights mxfp4 --scale 8 --ranks 2 --tokens 16 "
      "--dtype bf16 --layouts 2x1,1x2 --dispatcher all --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("passed").get<bool>());
  EXPECT_EQ(j.at("weights").at("name"), "mxfp4");
  EXPECT_GE(j.at("rows").size(), 4U);
  for (const auto& row : j.at("rows")) EXPECT_EQ(row.at("layout"), "2x1") << row.dump();
  bool skipped_1x2 = false;
  for (const auto& s : j.at("skipped")) {
    skipped_1x2 = skipped_1x2 || s.get<std::string>().find(
                                     "1x2: mxfp4 groups of 32 inputs do "
                                     "not divide the expert width / tp = "
                                     "96 / 2 = 48") != std::string::npos;
  }
  EXPECT_TRUE(skipped_1x2) << j.at("skipped").dump();
  // W4A16 (int4 groups of 128, symmetric) on Mixtral-8x7B at 1/8 width (H 512, I 1792), tp 2.
  const auto w = run_cli(
      "verify --model mixtral-8x7b --weights w4a16 --scale 8 --ranks 2 --tokens 8 --dtype fp16 "
      "--layouts 2x1,1x2 --dispatcher a2av");
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_NE(w.out.find("expert weights: int4, groups of 128, 16-bit scales"), std::string::npos)
      << w.out;
  EXPECT_NE(w.out.find("\n2 passed, 0 failed"), std::string::npos) << w.out;
  // NVFP4 (e4m3 scales per 16, an fp32 scale per matrix) on Qwen3-30B-A3B at 1/8: 1x2 runs
  // (48 = 3 groups); run as W4A16, which the output says.
  const auto n = run_cli(
      "verify --model qwen3-30b-a3b --weights nvfp4 --scale 8 --ranks 2 --tokens 16 --dtype bf16 "
      "--layouts 2x1,1x2 --dispatcher a2av,allgather");
  ASSERT_EQ(n.exit_code, 0) << n.err;
  EXPECT_NE(n.out.find("expert weights: nvfp4 (e2m1, e4m3 scale per 16, fp32 per tensor); "
                       "activations: bf16"),
            std::string::npos)
      << n.out;
  EXPECT_NE(n.out.find("note: nvfp4 runs as W4A16 here"), std::string::npos) << n.out;
  EXPECT_NE(n.out.find("\n4 passed, 0 failed"), std::string::npos) << n.out;
}

TEST(CliVerify, Fp8ChannelAndTensorOnEveryDispatcher) {
  // Per-channel weights with per-token activations (each tp rank scales its slice of a row) and
  // per-tensor weights with static activation scales, on Qwen3-30B-A3B at 1/8 width (H 256,
  // I 96): every dispatcher on 2x1 (ranks grouped as 2 nodes of 1 for deepep_normal), and 1x2.
  for (const char* w : {"fp8-channel", "fp8-tensor"}) {
    const auto r = run_cli(std::string("verify --model qwen3-30b-a3b --weights ") + w +
                           " --scale 8 --ranks 2 --tokens 16 --dtype fp32,bf16 --layouts 2x1,1x2 "
                           "--dispatcher all --ranks-per-node 1 --json");
    ASSERT_EQ(r.exit_code, 0) << w << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j.at("passed").get<bool>()) << w;
    EXPECT_EQ(j.at("weights").at("name"), w);
    // 2x1: five dispatchers; 1x2: padded_a2a, allgather, a2av; two dtypes.
    EXPECT_EQ(j.at("rows").size(), 16U) << w << ": " << j.at("skipped").dump();
  }
}

TEST(CliVerify, DeepEpOnRanksGroupedIntoNodes) {
  // 4 in-process ranks as 2 nodes of 2: deepep_normal's two hops and deepep_ll's fp8 payload.
  const auto r = run_cli(
      "verify --model deepseek-v3 --scale 128 --tokens 64 --dtype bf16 --ranks 4 "
      "--layouts 4x1 --dispatcher deepep_normal,deepep_ll --ranks-per-node 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("rows").size(), 2U);
  EXPECT_EQ(j.at("rows")[0].at("dispatcher"), "deepep_normal");
  EXPECT_EQ(j.at("rows")[1].at("dispatcher"), "deepep_ll");
  EXPECT_TRUE(j.at("passed").get<bool>());
  EXPECT_EQ(j.at("ranks_per_node").get<int>(), 2);
  // Bad groupings and buffers: one line naming the option, before any work.
  expect_one_line_error(run_cli("verify --ranks 4 --ranks-per-node 3 --scale 64"),
                        "--ranks-per-node: expected a divisor of the 4 ranks, got 3");
  expect_one_line_error(
      run_cli("verify --ranks 4 --layouts 4x1 --dispatcher deepep_normal --scale 64"),
      "deepep_normal spans at least two nodes");
  expect_one_line_error(run_cli("verify --ranks 4 --layouts 4x1 --dispatcher deepep_normal "
                                "--ranks-per-node 4 --scale 64"),
                        "at least two nodes, got ep_size 4");
  expect_one_line_error(run_cli("verify --ranks 4 --layouts 2x2 --dispatcher deepep_ll "
                                "--scale 64"),
                        "expected tp_size 1, got 2");
  expect_one_line_error(run_cli("verify --ranks 4 --layouts 4x1 --dispatcher deepep_ll "
                                "--tokens 1024 --ll-max-tokens 128 --scale 64"),
                        "expected ll-max-tokens ≥ 256");
  expect_one_line_error(run_cli("verify --ranks 4 --ll-max-tokens -1 --scale 64"),
                        "--ll-max-tokens: expected 0");
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
  // DeepSeek-V3's own fp8 weights (128×128 blocks; cuBLASLt's fp8 matmul on the GPU) too.
  const auto inventory = kernels::backend_inventory();
  for (const std::string model : {"qwen2-57b-a14b", "deepseek-v3"}) {
    SCOPED_TRACE(model);
    const auto cuda = run_cli(small + "cuda --model " + model);
    if (inventory[1].usable) {
      ASSERT_EQ(cuda.exit_code, 0) << cuda.err;
      EXPECT_TRUE(nlohmann::json::parse(cuda.out).at("passed").get<bool>());
    } else {
      expect_one_line_error(cuda, inventory[1].compiled ? "--backend cuda: no usable CUDA device: "
                                                        : "--backend cuda: not compiled in");
    }
  }
}

}  // namespace
}  // namespace test_verify_cli
}  // namespace moeplan::cli_test
