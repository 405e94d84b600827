// moeplan's own layout file: the typed struct, its text, and the round trip through the reader
// (exporting what was read gives the same bytes); errors name the key.
#include <gtest/gtest.h>

#include "tests/planner/export_fixture.hpp"

namespace moeplan::planner {
namespace test_export_layout_file {
namespace {

using export_test::exported;
using export_test::Fixture;
using export_test::make;
using export_test::rotated_placement;
using export_test::spec_for;

TEST(Export, JsonRoundTripGivesTheSameLayoutAndPlacement) {
  const Fixture f = make("deepseek-v3", "16x-hgx-h200", 128);
  const PlacementFile placement = rotated_placement(f.model, 128, 128);
  const ExportSpec spec = spec_for(f, "128x1", &placement);
  auto out = export_layout(spec, ExportFormat::kJson);
  ASSERT_TRUE(out.ok()) << out.error().message;
  ASSERT_EQ(out->files.size(), 1U);
  EXPECT_TRUE(out->warnings.empty());
  auto back = parse_layout_file(out->files[0].content, "layout.json");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->chosen.rank, spec.chosen.rank);
  EXPECT_EQ(back->chosen.layout.shape_name(), "ep128×tp1");
  EXPECT_EQ(back->chosen.layout.dispatcher, spec.chosen.layout.dispatcher);
  EXPECT_EQ(back->chosen.layout.mapping, spec.chosen.layout.mapping);
  EXPECT_NEAR(back->chosen.step_seconds, spec.chosen.step_seconds,
              1e-11 * spec.chosen.step_seconds);
  EXPECT_EQ(back->model_fingerprint, spec.model_fingerprint);
  EXPECT_EQ(back->cluster_fingerprint, spec.cluster_fingerprint);
  EXPECT_EQ(back->moe_layer_ids, spec.moe_layer_ids);
  ASSERT_TRUE(back->placement.has_value());
  EXPECT_EQ(back->placement->num_slots, 384);
  EXPECT_EQ(back->placement->physical_to_logical, placement.result.placement.physical_to_logical);
  // Writing the read-back spec again gives the same bytes.
  auto again = export_layout(*back, ExportFormat::kJson);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->files[0].content, out->files[0].content);
}

TEST(Export, JsonRoundTripIsStableForEveryLayoutOfAPlan) {
  const Fixture f = make("qwen3-30b-a3b", "2x-hgx-h200", 16);
  ASSERT_GT(f.plan.layouts.size(), 10U);
  for (const auto& l : f.plan.layouts) {
    SCOPED_TRACE(l.describe());
    auto out = export_layout(spec_for(f, std::to_string(l.rank)), ExportFormat::kJson);
    ASSERT_TRUE(out.ok());
    auto back = parse_layout_file(out->files[0].content, "layout.json");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->chosen.rank, l.rank);
    EXPECT_EQ(back->chosen.layout.shape_name(), l.layout.shape_name());
    EXPECT_EQ(back->chosen.layout.dispatcher, l.layout.dispatcher);
    EXPECT_EQ(back->chosen.layout.mapping, l.layout.mapping);
    EXPECT_EQ(back->chosen.feasible, l.feasible);
    EXPECT_FALSE(back->placement.has_value());
    auto again = export_layout(*back, ExportFormat::kJson);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->files[0].content, out->files[0].content);
  }
}

TEST(Export, LayoutFileErrorsNameTheKey) {
  const Fixture f = make("qwen2-57b-a14b", "1x-hgx-h200", 8);
  const ExportSpec spec = spec_for(f, "");
  auto out = export_layout(spec, ExportFormat::kJson);
  ASSERT_TRUE(out.ok());
  auto j = nlohmann::json::parse(out->files[0].content);
  j["layout"]["ep_size"] = 3;
  auto bad = parse_layout_file(j.dump(), "l.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(
      bad.error().message.find("l.json: key 'layout.tp_size': expected dp_size·ep_size·tp_size"),
      std::string::npos)
      << bad.error().message;
  auto wrong = parse_layout_file(R"({"format": "moeplan-placement", "version": 1})", "l.json");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().message,
            "l.json: key 'format': expected \"moeplan-layout\", got \"moeplan-placement\"");
}

TEST(Export, LayoutFileIsATypedStruct) {
  const Fixture f = make("deepseek-v3", "16x-hgx-h200", 128);
  const PlacementFile placement = rotated_placement(f.model, 128, 0);
  const ExportSpec spec = spec_for(f, "128x1", &placement);
  const LayoutFile file = layout_file_of(spec);
  EXPECT_EQ(file.model.moe_layer_ids.front(), 3);
  EXPECT_EQ(file.cluster.gpus_per_node, 8);
  EXPECT_EQ(file.layout.ep_size, 128);
  EXPECT_EQ(file.plan.rank, spec.chosen.rank);
  const std::string text = layout_file_text(file);
  EXPECT_EQ(text, exported(spec, ExportFormat::kJson).files.at(0).content);
  auto back = read_layout_file(text, "layout.json");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->model.fingerprint, file.model.fingerprint);
  EXPECT_EQ(back->workload.tokens_per_gpu, file.workload.tokens_per_gpu);
  ASSERT_TRUE(back->placement.has_value());
  EXPECT_EQ(back->placement->physical_to_logical, file.placement->physical_to_logical);
  EXPECT_EQ(layout_file_text(*back), text);
  auto no_map = nlohmann::json::parse(text);
  no_map["placement"]["physical_to_logical_map"] = nlohmann::json::array();
  auto bad = read_layout_file(no_map.dump(), "l.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            "l.json: key 'placement.physical_to_logical_map': expected one row of num_slots "
            "experts per MoE layer (58)");
}

}  // namespace
}  // namespace test_export_layout_file
}  // namespace moeplan::planner
