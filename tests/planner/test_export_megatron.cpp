// Megatron-Core: the argument array, the attention-head rule of TransformerConfig, sequence
// parallelism and CUDA_DEVICE_MAX_CONNECTIONS with tensor parallelism.
#include <gtest/gtest.h>

#include "tests/planner/export_fixture.hpp"

namespace moeplan::planner {
namespace test_export_megatron {
namespace {

using export_test::exported;
using export_test::file_named;
using export_test::Fixture;
using export_test::make;
using export_test::rotated_placement;
using export_test::spec_for;

TEST(Export, MegatronRefusesTpThatDoesNotSplitTheHeads) {
  // Qwen2-57B-A14B: 28 attention heads, 4 query groups.
  const Fixture f = make("qwen2-57b-a14b", "2x-hgx-h200", 16);
  for (const char* shape : {"2x8", "1x16"}) {
    SCOPED_TRACE(shape);
    auto out = export_layout(spec_for(f, shape), ExportFormat::kMegatron);
    ASSERT_FALSE(out.ok());
    const std::string& m = out.error().message;
    EXPECT_NE(m.find("Megatron-Core splits the attention heads over "), std::string::npos) << m;
    EXPECT_NE(m.find("(TransformerConfig.__post_init__) and qwen2-57b-a14b's "
                     "num_attention_heads 28 is not a multiple of "),
              std::string::npos)
        << m;
    const auto pos = m.find("nearest expressible layout in the plan: rank ");
    ASSERT_NE(pos, std::string::npos) << m;
    const std::string rank = m.substr(m.find("({layout} ") + 10);
    EXPECT_TRUE(
        export_layout(spec_for(f, rank.substr(0, rank.find(')'))), ExportFormat::kMegatron).ok());
  }
  EXPECT_TRUE(export_layout(spec_for(f, "4x4"), ExportFormat::kMegatron).ok());
}

TEST(Export, MegatronTensorParallelNeedsSequenceParallelAndOneConnection) {
  const Fixture f = make("qwen2-57b-a14b", "2x-hgx-h200", 16);
  const std::string tp = exported(spec_for(f, "4x4"), ExportFormat::kMegatron).files[0].content;
  EXPECT_NE(tp.find("\nexport CUDA_DEVICE_MAX_CONNECTIONS=1\n"), std::string::npos) << tp;
  EXPECT_NE(tp.find("  --sequence-parallel\n"), std::string::npos);
  const std::string ep = exported(spec_for(f, "16x1"), ExportFormat::kMegatron).files[0].content;
  EXPECT_EQ(ep.find("CUDA_DEVICE_MAX_CONNECTIONS"), std::string::npos) << ep;
  EXPECT_EQ(ep.find("--sequence-parallel"), std::string::npos);
}

}  // namespace
}  // namespace test_export_megatron
}  // namespace moeplan::planner
