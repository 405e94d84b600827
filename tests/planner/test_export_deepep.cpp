// The DeepEP dispatchers and two-batch overlap in the exports: SGLang's DeepEP mode and
// --enable-two-batch-overlap, vLLM's all2all backends and --enable-dbo, Megatron-Core's flex
// dispatcher (the frameworks' own parsers check the same flags in tests/exports).
#include <gtest/gtest.h>

#include "tests/planner/export_fixture.hpp"

namespace moeplan::planner {
namespace test_export_deepep {
namespace {

using export_test::exported;
using export_test::Fixture;
using export_test::spec_for;

/// A plan of qwen2-57b-a14b on 2 × HGX H200 with only `d` and two-batch overlap `tbo`.
Fixture deepep_plan(Dispatcher d, bool tbo, Phase phase = Phase::kPrefill) {
  auto model = models::load_model("qwen2-57b-a14b");
  auto cluster = load_cluster("2x-hgx-h200");
  EXPECT_TRUE(model.ok() && cluster.ok());
  const RooflineCosts costs(*cluster);
  PlanRequest req;
  req.dispatchers = {d};
  req.tbo = {tbo};
  req.workload.phase = phase;
  req.workload.tokens_per_gpu = phase == Phase::kDecode ? 64 : 4096;
  auto plan = make_plan(*model, *cluster, costs, req);
  EXPECT_TRUE(plan.ok()) << plan.error().message;
  return {*model, *cluster, summarize_plan(*plan)};
}

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

TEST(ExportDeepEp, SglangModesAndTwoBatchOverlap) {
  const Fixture normal = deepep_plan(Dispatcher::kDeepEpNormal, true);
  ASSERT_EQ(normal.plan.layouts.size(), 1u);  // ep16×tp1: the only whole-node shape with tp 1
  const std::string s = exported(spec_for(normal, ""), ExportFormat::kSglang).files.at(0).content;
  EXPECT_TRUE(has(s, "--moe-a2a-backend deepep \\\n  --deepep-mode normal")) << s;
  EXPECT_TRUE(has(s, "--enable-two-batch-overlap")) << s;
  // deepep_ll is low_latency even in a prefill plan.
  const Fixture ll = deepep_plan(Dispatcher::kDeepEpLl, false, Phase::kDecode);
  const std::string l = exported(spec_for(ll, ""), ExportFormat::kSglang).files.at(0).content;
  EXPECT_TRUE(has(l, "--deepep-mode low_latency")) << l;
  EXPECT_FALSE(has(l, "--enable-two-batch-overlap")) << l;
}

TEST(ExportDeepEp, VllmBackendsAndDualBatchOverlap) {
  const Fixture normal = deepep_plan(Dispatcher::kDeepEpNormal, true);
  const std::string v = exported(spec_for(normal, ""), ExportFormat::kVllm).files.at(0).content;
  EXPECT_TRUE(has(v, "--all2all-backend deepep_high_throughput")) << v;
  EXPECT_TRUE(has(v, "--enable-dbo")) << v;
  const Fixture ll = deepep_plan(Dispatcher::kDeepEpLl, false, Phase::kDecode);
  const std::string w = exported(spec_for(ll, ""), ExportFormat::kVllm).files.at(0).content;
  EXPECT_TRUE(has(w, "--all2all-backend deepep_low_latency")) << w;
  EXPECT_FALSE(has(w, "--enable-dbo")) << w;
}

TEST(ExportDeepEp, MegatronFlexDispatcher) {
  const Fixture normal = deepep_plan(Dispatcher::kDeepEpNormal, false);
  const auto out = exported(spec_for(normal, ""), ExportFormat::kMegatron);
  const std::string m = out.files.at(0).content;
  EXPECT_TRUE(has(m, "--moe-token-dispatcher-type flex")) << m;
  EXPECT_TRUE(has(m, "--moe-flex-dispatcher-backend deepep")) << m;
  EXPECT_TRUE(out.warnings.empty());
  // Low latency and overlap are not Megatron options: said, not dropped silently.
  const Fixture ll = deepep_plan(Dispatcher::kDeepEpLl, true, Phase::kDecode);
  const auto o = exported(spec_for(ll, ""), ExportFormat::kMegatron);
  EXPECT_TRUE(has(o.files.at(0).content, "--moe-token-dispatcher-type flex"));
  ASSERT_EQ(o.warnings.size(), 2u);
  EXPECT_TRUE(has(o.warnings[0], "not its low-latency ones")) << o.warnings[0];
  EXPECT_TRUE(has(o.warnings[1], "two-batch overlap")) << o.warnings[1];
}

TEST(ExportDeepEp, LayoutFileKeepsDispatcherAndOverlap) {
  const Fixture normal = deepep_plan(Dispatcher::kDeepEpNormal, true);
  const auto out = exported(spec_for(normal, ""), ExportFormat::kJson);
  const auto j = nlohmann::json::parse(out.files.at(0).content);
  EXPECT_EQ(j.at("layout").at("dispatcher"), "deepep_normal");
  EXPECT_EQ(j.at("layout").at("two_batch_overlap"), true);
  EXPECT_GT(j.at("predicted").at("layer_ms").at("overlap_hidden").get<double>(), 0.0);
}

}  // namespace
}  // namespace test_export_deepep
}  // namespace moeplan::planner
