// SGLang: the launch script (attention DP spelled per release, multi-node variables) and the
// expert-location file.
#include <gtest/gtest.h>

#include "tests/planner/export_fixture.hpp"

namespace moeplan::planner {
namespace test_export_sglang {
namespace {

using export_test::exported;
using export_test::file_named;
using export_test::Fixture;
using export_test::make;
using export_test::rotated_placement;
using export_test::spec_for;

TEST(Export, SglangMapCoversEveryHiddenLayer) {
  const Fixture f = make("deepseek-v3", "16x-hgx-h200", 128);
  const PlacementFile placement = rotated_placement(f.model, 128, 128);
  const ExportSpec spec = spec_for(f, "128x1", &placement);
  auto out = export_layout(spec, ExportFormat::kSglang);
  ASSERT_TRUE(out.ok()) << out.error().message;
  const ExportFile* map = file_named(*out, "sglang_expert_location.json");
  ASSERT_NE(map, nullptr);
  const auto j = nlohmann::json::parse(map->content);
  ASSERT_EQ(j.size(), 1U) << "SGLang passes every key to init_by_mapping";
  const auto& rows = j.at("physical_to_logical_map");
  ASSERT_EQ(rows.size(), 61U);
  for (int h = 0; h < 61; ++h) ASSERT_EQ(rows[static_cast<std::size_t>(h)].size(), 384U);
  // Dense layers 0..2: the trivial map; MoE layers: the placement's rows.
  EXPECT_EQ(rows[0][300].get<int>(), 300 % 256);
  EXPECT_EQ(rows[3].get<std::vector<int>>(), placement.result.placement.physical_to_logical[0]);
  EXPECT_EQ(rows[60].get<std::vector<int>>(), placement.result.placement.physical_to_logical[57]);
  const std::string& script = file_named(*out, "sglang_launch.sh")->content;
  for (const char* arg :
       {"--tp-size 128", "--ep-size 128", "--attn-dp-size 128", "--ep-num-redundant-experts 128",
        "--init-expert-location", "--nnodes 16"}) {
    EXPECT_NE(script.find(arg), std::string::npos) << arg;
  }
  EXPECT_EQ(script.find("--enable-dp-attention"), std::string::npos)
      << "deprecated since 0.5.22 (removal announced after 2026-12-31)";
  EXPECT_EQ(script.find("--dp-size"), std::string::npos) << "--dp-size counts replicas now";
}

TEST(Export, SglangBefore0522SpellsAttentionDpTheOldWay) {
  const Fixture f = make("qwen2-57b-a14b", "2x-hgx-h200", 16);
  const ExportSpec spec = spec_for(f, "16x1");
  const std::string old = exported(spec, ExportFormat::kSglang, "0.5.21").files.at(0).content;
  EXPECT_NE(old.find("--enable-dp-attention \\\n  --dp-size 16"), std::string::npos) << old;
  EXPECT_EQ(old.find("--attn-dp-size"), std::string::npos);
  EXPECT_NE(old.find("# moeplan export (sglang 0.5.21): "), std::string::npos);
  const std::string now = exported(spec, ExportFormat::kSglang, "0.5.22").files.at(0).content;
  EXPECT_NE(now.find("--attn-dp-size 16"), std::string::npos) << now;
  // Without expert parallelism there is no attention DP to ask for.
  const Fixture mixtral = make("mixtral-8x7b", "1x-hgx-h200", 8);
  const std::string tp_only =
      exported(spec_for(mixtral, "1x8"), ExportFormat::kSglang).files[0].content;
  EXPECT_EQ(tp_only.find("dp"), tp_only.find("dp-")) << tp_only;
  EXPECT_EQ(tp_only.find("--attn-dp-size"), std::string::npos);
}

TEST(Export, SglangMultiNodeVariablesAreRequired) {
  const Fixture f = make("qwen2-57b-a14b", "2x-hgx-h200", 16);
  const std::string script =
      exported(spec_for(f, "16x1"), ExportFormat::kSglang).files.at(0).content;
  EXPECT_NE(script.find("NODE_RANK=\"${NODE_RANK:?set NODE_RANK to the index of this node, "
                        "0..1}\"\n"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("--nnodes 2 \\\n  --node-rank \"$NODE_RANK\""), std::string::npos);
}

}  // namespace
}  // namespace test_export_sglang
}  // namespace moeplan::planner
