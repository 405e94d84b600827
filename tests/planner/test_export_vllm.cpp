// vLLM: the serve script on one node and across nodes (data-parallel EP ranks, or one tensor-
// parallel group), with the node's own arguments from NODE_RANK.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/planner/export_fixture.hpp"

namespace moeplan::planner {
namespace test_export_vllm {
namespace {

using export_test::exported;
using export_test::file_named;
using export_test::Fixture;
using export_test::make;
using export_test::rotated_placement;
using export_test::spec_for;

TEST(Export, VllmOneNodeHasNoNodeArguments) {
  const Fixture f = make("qwen2-57b-a14b", "1x-hgx-h200", 8);
  const std::string script = exported(spec_for(f, "8x1"), ExportFormat::kVllm).files.at(0).content;
  EXPECT_NE(script.find("--data-parallel-size 8 \\\n  --enable-expert-parallel"), std::string::npos)
      << script;
  EXPECT_EQ(script.find("NODE_RANK"), std::string::npos);
  EXPECT_EQ(script.find("--nnodes"), std::string::npos);
}

// A plan with a context carries it and its memory share to SGLang and vLLM; without one neither
// flag is written (the frameworks' defaults stand).
TEST(Export, ContextAndMemoryFractionOfThePlan) {
  const Fixture f = make("qwen2-57b-a14b", "1x-hgx-h200", 8);
  auto spec = spec_for(f, "8x1");
  const auto sg = [&] { return exported(spec, ExportFormat::kSglang).files.at(0).content; };
  const auto vl = [&] { return exported(spec, ExportFormat::kVllm).files.at(0).content; };
  for (const char* flag : {"--context-length", "--mem-fraction-static"}) {
    EXPECT_EQ(sg().find(flag), std::string::npos) << flag;
  }
  for (const char* flag : {"--max-model-len", "--gpu-memory-utilization"}) {
    EXPECT_EQ(vl().find(flag), std::string::npos) << flag;
  }
  spec.workload.isl = 4096;
  spec.workload.osl = 1024;
  spec.workload.mem_fraction = 0.85;
  EXPECT_NE(sg().find("--context-length 5120 \\\n  --mem-fraction-static 0.85"), std::string::npos)
      << sg();
  EXPECT_NE(vl().find("--max-model-len 5120 \\\n  --gpu-memory-utilization 0.85"),
            std::string::npos)
      << vl();
  // The share is written as planned, not rounded to two digits.
  spec.workload.mem_fraction = 0.855;
  EXPECT_NE(sg().find("--mem-fraction-static 0.855\n"), std::string::npos) << sg();
  EXPECT_NE(vl().find("--gpu-memory-utilization 0.855\n"), std::string::npos) << vl();
  // TensorRT-LLM: said, not written.
  const auto trt = exported(spec, ExportFormat::kTrtllm);
  EXPECT_TRUE(std::any_of(trt.warnings.begin(), trt.warnings.end(), [](const std::string& w) {
    return w.find("context (5120 tokens) and memory fraction are not exported") !=
           std::string::npos;
  }));
}

TEST(Export, VllmDataParallelRanksAcrossNodes) {
  const Fixture f = make("qwen2-57b-a14b", "2x-hgx-h200", 16);
  const std::string script = exported(spec_for(f, "16x1"), ExportFormat::kVllm).files.at(0).content;
  for (const char* part :
       {"NODE_RANK=\"${NODE_RANK:?set NODE_RANK to the index of this node, 0..1}\"\n",
        "DP_ADDRESS=\"${DP_ADDRESS:?set DP_ADDRESS to the IP address of node 0}\"\n",
        "DP_LOCAL=8\n",
        "  NODE_ARGS=(--headless --data-parallel-start-rank \"$(( NODE_RANK * 8 ))\")\n",
        "--data-parallel-size 16 \\\n", "--data-parallel-size-local \"$DP_LOCAL\" \\\n",
        "--data-parallel-address \"$DP_ADDRESS\" \\\n",
        "--data-parallel-rpc-port \"$DP_RPC_PORT\" \\\n", "  \"${NODE_ARGS[@]}\"\n"}) {
    EXPECT_NE(script.find(part), std::string::npos) << part << "\n" << script;
  }
  EXPECT_EQ(script.find("--nnodes"), std::string::npos) << "DP ranks: no torch TP across nodes";
}

TEST(Export, VllmTensorParallelAcrossNodes) {
  // Mixtral: 32 attention heads split over tp 16 (Qwen2's 28 do not).
  const Fixture f = make("mixtral-8x7b", "2x-hgx-h200", 16);
  const std::string script = exported(spec_for(f, "1x16"), ExportFormat::kVllm).files.at(0).content;
  for (const char* part : {"--tensor-parallel-size 16 \\\n", "--nnodes 2 \\\n",
                           "--node-rank \"$NODE_RANK\" \\\n", "--master-addr \"$MASTER_ADDR\" \\\n",
                           "--master-port \"$MASTER_PORT\" \\\n", "  NODE_ARGS=(--headless)\n"}) {
    EXPECT_NE(script.find(part), std::string::npos) << part << "\n" << script;
  }
  EXPECT_EQ(script.find("--data-parallel"), std::string::npos);
}

}  // namespace
}  // namespace test_export_vllm
}  // namespace moeplan::planner
