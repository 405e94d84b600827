// TensorRT-LLM: the options YAML; the static load balancer inline (current main) or, for
// releases that only open a path, its own file named so that trtllm-serve finds it.
#include <filesystem>

#include <gtest/gtest.h>

#include "tests/planner/export_fixture.hpp"

namespace moeplan::planner {
namespace test_export_trtllm {
namespace {

using export_test::exported;
using export_test::file_named;
using export_test::Fixture;
using export_test::make;
using export_test::rotated_placement;
using export_test::spec_for;

TEST(Export, TrtllmLoadBalancerIsInlineKeyedByHiddenLayer) {
  const Fixture f = make("deepseek-v3", "16x-hgx-h200", 128);
  const PlacementFile placement = rotated_placement(f.model, 128, 128);
  const ExportResult out = exported(spec_for(f, "128x1", &placement), ExportFormat::kTrtllm);
  ASSERT_EQ(out.files.size(), 1U) << "no path for trtllm-serve to resolve";
  const std::string& opts = out.files[0].content;
  EXPECT_NE(opts.find("moe_expert_parallel_size: 128\n"), std::string::npos);
  EXPECT_NE(opts.find("enable_attention_dp: true\n"), std::string::npos);
  EXPECT_NE(opts.find("moe_config:\n"), std::string::npos);
  EXPECT_NE(opts.find("  load_balancer:\n    num_slots: 384\n    layer_updates_per_iter: 0\n"
                      "    initial_global_assignments:\n      3: [0, 1, 2,"),
            std::string::npos)
      << opts.substr(0, 2000);
  EXPECT_NE(opts.find("\n      60: [57, 58,"), std::string::npos);
  EXPECT_EQ(opts.find("\n      2: ["), std::string::npos) << "dense layer 2 has no slots";
  EXPECT_EQ(opts.find("moe_load_balancer.yaml"), std::string::npos) << "no file reference";
}

TEST(Export, TrtllmPathReleasesNameTheBalancerSoServeFindsIt) {
  const Fixture f = make("deepseek-v3", "16x-hgx-h200", 128);
  const PlacementFile placement = rotated_placement(f.model, 128, 128);
  const ExportSpec spec = spec_for(f, "128x1", &placement);
  // Printed (no folder known): relative, with how to start trtllm-serve.
  const ExportResult printed = exported(spec, ExportFormat::kTrtllm, "1.3");
  ASSERT_EQ(printed.files.size(), 2U);
  const std::string& opts = printed.files[0].content;
  EXPECT_NE(opts.find("  load_balancer: \"./moe_load_balancer.yaml\"\n"), std::string::npos);
  EXPECT_NE(opts.find("start it in the folder of these files"), std::string::npos);
  const std::string& lb = export_test::file_named(printed, "moe_load_balancer.yaml")->content;
  EXPECT_NE(lb.find("num_slots: 384\nlayer_updates_per_iter: 0\n"), std::string::npos);
  EXPECT_NE(lb.find("\n  3: [0, 1, 2,"), std::string::npos);
  // Written to a folder: the absolute path of the balancer there.
  auto written = export_layout(spec, ExportFormat::kTrtllm, {"1.3", "out/trt"});
  ASSERT_TRUE(written.ok());
  const std::string abs =
      (std::filesystem::current_path() / "out/trt/moe_load_balancer.yaml").string();
  EXPECT_NE(written->files[0].content.find("  load_balancer: \"" + abs + "\"\n"), std::string::npos)
      << written->files[0].content.substr(0, 1500);
}

}  // namespace
}  // namespace test_export_trtllm
}  // namespace moeplan::planner
