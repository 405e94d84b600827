// PaddleNLP: expert parallelism inside the sharding group (3.0.0b4), no expert parallelism at all
// (2.8.1), and the unverified expert split under tensor parallelism.
#include <gtest/gtest.h>

#include "tests/planner/export_fixture.hpp"

namespace moeplan::planner {
namespace test_export_paddle {
namespace {

using export_test::exported;
using export_test::file_named;
using export_test::Fixture;
using export_test::make;
using export_test::rotated_placement;
using export_test::spec_for;

TEST(Export, PaddleExpertParallelismRunsInsideSharding) {
  const Fixture f = make("qwen2-57b-a14b", "2x-hgx-h200", 16);
  const ExportResult out = exported(spec_for(f, "16x1"), ExportFormat::kPaddle);
  const auto args = nlohmann::json::parse(out.files.at(0).content);
  EXPECT_EQ(args.at("expert_parallel_degree").get<int>(), 16);
  EXPECT_EQ(args.at("tensor_parallel_degree").get<int>(), 1);
  EXPECT_EQ(args.at("sharding").get<std::string>(), "stage1");
  EXPECT_EQ(args.at("sharding_parallel_degree").get<int>(), 16);
  EXPECT_FALSE(args.contains("expert_tensor_parallel_degree")) << "must be 1 or absent";
  // With tp 2: sharding = world / tp, and a warning that the experts' split is unverified.
  const ExportResult tp = exported(spec_for(f, "8x2"), ExportFormat::kPaddle);
  const auto tp_args = nlohmann::json::parse(tp.files.at(0).content);
  EXPECT_EQ(tp_args.at("sharding_parallel_degree").get<int>(), 8);
  EXPECT_EQ(tp_args.at("tensor_parallel_degree").get<int>(), 2);
  bool unverified = false;
  for (const auto& w : tp.warnings) unverified |= w.find("was not verified") != std::string::npos;
  EXPECT_TRUE(unverified);
  // Without EP there is nothing to shard for.
  const Fixture mixtral = make("mixtral-8x7b", "1x-hgx-h200", 8);
  const auto tp_only = nlohmann::json::parse(
      exported(spec_for(mixtral, "1x8"), ExportFormat::kPaddle).files.at(0).content);
  EXPECT_FALSE(tp_only.contains("sharding"));
  EXPECT_EQ(tp_only.at("sharding_parallel_degree").get<int>(), 1);
}

TEST(Export, Paddle281HasNoExpertParallelism) {
  // Mixtral on one node: 32 attention and 8 key/value heads split over tp 8.
  const Fixture f = make("mixtral-8x7b", "1x-hgx-h200", 8);
  auto ep = export_layout(spec_for(f, "8x1"), ExportFormat::kPaddle, {"2.8.1", ""});
  ASSERT_FALSE(ep.ok());
  const std::string& m = ep.error().message;
  EXPECT_NE(m.find("paddle 2.8.1: layout ep8×tp1 "), std::string::npos) << m;
  EXPECT_NE(m.find("PaddleNLP 2.8.1 has no expert parallelism"), std::string::npos) << m;
  EXPECT_NE(m.find("{framework_version} 3.0.0b4 has"), std::string::npos) << m;
  EXPECT_NE(m.find("nearest expressible layout in the plan: "), std::string::npos) << m;
  EXPECT_NE(m.find("ep1×tp8"), std::string::npos) << "the only ep1 shape: " << m;
  const auto args = nlohmann::json::parse(
      exported(spec_for(f, "1x8"), ExportFormat::kPaddle, "2.8.1").files.at(0).content);
  EXPECT_FALSE(args.contains("expert_parallel_degree")) << "2.8.1 rejects unknown keys";
  EXPECT_EQ(args.at("tensor_parallel_degree").get<int>(), 8);
  // Qwen2 on two nodes: its only ep1 layout (tp 16) cannot split 28 heads, so nothing runs.
  const Fixture qwen = make("qwen2-57b-a14b", "2x-hgx-h200", 16);
  auto none = export_layout(spec_for(qwen, "16x1"), ExportFormat::kPaddle, {"2.8.1", ""});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no layout of the plan can be expressed in paddle 2.8.1"),
            std::string::npos)
      << none.error().message;
}

}  // namespace
}  // namespace test_export_paddle
}  // namespace moeplan::planner
