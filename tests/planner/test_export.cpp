// Exports across formats: format and framework-version choice, plan reading and layout
// selection, the nearest runnable layout, dispatcher substitutes, placements, the staged write,
// and `bash -n` of every generated script. Each format's own file: test_export_<format>.cpp.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/planner/export_fixture.hpp"

namespace moeplan::planner {
namespace test_export {
namespace {

using export_test::bash_syntax_error;
using export_test::exported;
using export_test::Fixture;
using export_test::make;
using export_test::rotated_placement;
using export_test::spec_for;

TEST(Export, FormatNamesRoundTrip) {
  for (const ExportFormat f : kAllExportFormats) {
    auto back = parse_export_format(export_format_name(f));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, f);
  }
  auto bad = parse_export_format("deepspeed");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            "format: expected sglang, vllm, trtllm, megatron, paddle or json, got 'deepspeed'");
  EXPECT_EQ(bad.error().input, "format");
}

TEST(Export, FrameworkVersionsDefaultToTheCurrentRelease) {
  EXPECT_EQ(framework_versions(ExportFormat::kSglang),
            (std::vector<std::string>{"0.5.23", "0.5.22", "0.5.21"}));
  EXPECT_EQ(framework_versions(ExportFormat::kPaddle),
            (std::vector<std::string>{"3.0.0b4", "2.8.1"}));
  for (const ExportFormat f : kAllExportFormats) {
    EXPECT_FALSE(framework_versions(f).empty()) << export_format_name(f);
  }
  const Fixture f = make("qwen2-57b-a14b", "1x-hgx-h200", 8);
  const ExportSpec spec = spec_for(f, "");
  EXPECT_EQ(exported(spec, ExportFormat::kSglang).framework_version, "0.5.23");
  EXPECT_EQ(exported(spec, ExportFormat::kSglang, "0.5.21").framework_version, "0.5.21");
  auto unknown = export_layout(spec, ExportFormat::kSglang, {"0.4.0", ""});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().input, "framework_version");
  EXPECT_EQ(unknown.error().message,
            "framework_version 0.4.0: the sglang export (SGLang) is written for 0.5.23, 0.5.22, "
            "0.5.21 (default 0.5.23)");
}

TEST(Export, SelectsByRankAndShape) {
  const Fixture f = make("qwen2-57b-a14b", "2x-hgx-h200", 16);
  auto best = select_layout(f.plan, "");
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(best->rank, f.plan.recommended + 1);
  auto third = select_layout(f.plan, "3");
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->rank, 3);
  auto shape = select_layout(f.plan, "8x2");
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(shape->layout.ep_size, 8);
  EXPECT_EQ(shape->layout.tp_size, 2);
  // The best-ranked of that shape: no layout of it ranks higher.
  for (const auto& l : f.plan.layouts) {
    if (l.layout.ep_size == 8 && l.layout.tp_size == 2) {
      EXPECT_GE(l.rank, shape->rank);
    }
  }
  auto missing = select_layout(f.plan, "999");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("expected a rank the plan lists (1.."), std::string::npos);
  auto no_shape = select_layout(f.plan, "5x3");
  ASSERT_FALSE(no_shape.ok());
  EXPECT_NE(no_shape.error().message.find("no legal layout of that shape"), std::string::npos);
  EXPECT_FALSE(select_layout(f.plan, "eight").ok());
  EXPECT_FALSE(select_layout(f.plan, "8x").ok());
}

TEST(Export, PlanJsonRoundTripKeepsEveryLayout) {
  auto model = models::load_model("qwen2-57b-a14b");
  ASSERT_TRUE(model.ok());
  auto cluster = load_cluster("2x-hgx-h200");
  ASSERT_TRUE(cluster.ok());
  const RooflineCosts costs(*cluster);
  auto plan = make_plan(*model, *cluster, costs, PlanRequest{});
  ASSERT_TRUE(plan.ok());
  auto back = parse_plan_json(plan_to_json(*plan, 0, true), "plan.json");
  ASSERT_TRUE(back.ok()) << back.error().message;
  const PlanSummary direct = summarize_plan(*plan);
  ASSERT_EQ(back->layouts.size(), direct.layouts.size());
  EXPECT_EQ(back->recommended, direct.recommended);
  for (std::size_t i = 0; i < direct.layouts.size(); ++i) {
    const auto& a = direct.layouts[i];
    const auto& b = back->layouts[i];
    EXPECT_EQ(a.rank, b.rank);
    EXPECT_EQ(a.layout.shape_name(), b.layout.shape_name());
    EXPECT_EQ(a.layout.dispatcher, b.layout.dispatcher);
    EXPECT_EQ(a.layout.mapping, b.layout.mapping);
    EXPECT_DOUBLE_EQ(a.step_seconds, b.step_seconds);
    EXPECT_DOUBLE_EQ(a.per_layer.experts.seconds, b.per_layer.experts.seconds);
    EXPECT_EQ(a.per_layer.dispatch.source, b.per_layer.dispatch.source);
  }
}

TEST(Export, PlanJsonErrorsNameTheKey) {
  auto no_layouts = parse_plan_json(nlohmann::json::parse(R"({"schema_version": 1,
      "model": {"name": "m", "source": "m.json"}, "cluster": {"name": "c", "source": "c.json"},
      "num_gpus": 4, "workload": {"phase": "prefill", "tokens_per_gpu": 16},
      "cost_source": "roofline"})"),
                                    "p.json");
  ASSERT_FALSE(no_layouts.ok());
  EXPECT_EQ(no_layouts.error().message,
            "p.json: key 'layouts': expected an array of ranked layouts");
  auto bad_shape = parse_plan_json(nlohmann::json::parse(R"({"schema_version": 1,
      "model": {"name": "m", "source": "m.json"}, "cluster": {"name": "c", "source": "c.json"},
      "num_gpus": 4, "workload": {"phase": "prefill", "tokens_per_gpu": 16},
      "cost_source": "roofline", "layouts": [{"rank": 1, "ep_size": 2, "tp_size": 1,
      "dispatcher": "a2av", "mapping": "tp_innermost", "step_ms": 1, "layer_ms": {}}]})"),
                                   "p.json");
  ASSERT_FALSE(bad_shape.ok());
  EXPECT_EQ(bad_shape.error().message,
            "p.json: key 'layouts[0].tp_size': expected dp_size·ep_size·tp_size = num_gpus (4), "
            "got 1·2·1");
  auto not_plan = parse_plan_json(nlohmann::json::array(), "p.json");
  ASSERT_FALSE(not_plan.ok());
  EXPECT_EQ(not_plan.error().message,
            "p.json: expected a plan (moeplan plan --json), got array []");
}

TEST(Export, InexpressibleLayoutsNameTheNearestOne) {
  const Fixture f = make("qwen2-57b-a14b", "2x-hgx-h200", 16);
  auto chosen = select_layout(f.plan, "8x2");
  ASSERT_TRUE(chosen.ok());
  ExportSpec spec = spec_for(f, std::to_string(chosen->rank));
  auto vllm = export_layout(spec, ExportFormat::kVllm);
  ASSERT_FALSE(vllm.ok());
  EXPECT_NE(vllm.error().message.find("never TP inside EP"), std::string::npos);
  EXPECT_NE(vllm.error().message.find("nearest expressible layout in the plan: rank "),
            std::string::npos);
  // The nearest one really is expressible; the error names the layout input as "{layout}" (the
  // CLI shows --layout, the GUI its label).
  const auto pos = vllm.error().message.find("({layout} ");
  ASSERT_NE(pos, std::string::npos);
  const std::string rank = vllm.error().message.substr(pos + 10);
  auto nearest = export_layout(spec_for(f, rank.substr(0, rank.find(')'))), ExportFormat::kVllm);
  EXPECT_TRUE(nearest.ok()) << nearest.error().message;
  // The nearest layout keeps the shape and dispatcher when the plan has them: TensorRT-LLM
  // runs the same ep8×tp2 a2av with the other rank mapping.
  auto trt = export_layout(spec, ExportFormat::kTrtllm);
  ASSERT_FALSE(trt.ok());
  EXPECT_NE(trt.error().message.find("nearest expressible layout in the plan: rank 6: ep8×tp2 "
                                     "a2av ep_innermost"),
            std::string::npos)
      << trt.error().message;
  // TensorRT-LLM numbers MoE ranks EP-innermost; SGLang and Megatron TP-innermost.
  for (const RankMapping m : {RankMapping::kTpInnermost, RankMapping::kEpInnermost}) {
    spec.chosen.layout.mapping = m;
    const bool tp_inner = m == RankMapping::kTpInnermost;
    EXPECT_EQ(export_layout(spec, ExportFormat::kTrtllm).ok(), !tp_inner);
    EXPECT_EQ(export_layout(spec, ExportFormat::kSglang).ok(), tp_inner);
    EXPECT_EQ(export_layout(spec, ExportFormat::kMegatron).ok(), tp_inner);
    EXPECT_EQ(export_layout(spec, ExportFormat::kPaddle).ok(), tp_inner);
    EXPECT_TRUE(export_layout(spec, ExportFormat::kJson).ok());
  }
}

TEST(Export, AttentionHeadsMustSplitOverTheTensorParallelRanks) {
  // Qwen2-57B-A14B: 28 attention heads, 4 key/value heads. TensorRT-LLM's rule was not checked.
  const Fixture f = make("qwen2-57b-a14b", "2x-hgx-h200", 16);
  const ExportSpec tp16 = spec_for(f, "1x16");
  for (const ExportFormat fmt : {ExportFormat::kSglang, ExportFormat::kVllm,
                                 ExportFormat::kMegatron, ExportFormat::kPaddle}) {
    SCOPED_TRACE(export_format_name(fmt));
    auto out = export_layout(tp16, fmt);
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.error().message.find("splits the attention heads over 16 tensor-parallel ranks"),
              std::string::npos)
        << out.error().message;
    EXPECT_NE(out.error().message.find("qwen2-57b-a14b's num_attention_heads 28 is not a multiple "
                                       "of 16, so ep1×tp16 cannot run"),
              std::string::npos)
        << out.error().message;
  }
  // tp 4: 28 and 4 split; PaddleNLP also needs the key/value heads to split (4 over 8 do not).
  EXPECT_TRUE(export_layout(spec_for(f, "4x4"), ExportFormat::kPaddle).ok());
  const Fixture one_node = make("qwen3-30b-a3b", "1x-hgx-h200", 8);
  auto pd = export_layout(spec_for(one_node, "1x8"), ExportFormat::kPaddle);
  ASSERT_FALSE(pd.ok());
  EXPECT_NE(pd.error().message.find("num_key_value_heads 4 is not a multiple of 8"),
            std::string::npos)
      << pd.error().message;
  EXPECT_TRUE(export_layout(spec_for(one_node, "1x8"), ExportFormat::kMegatron).ok())
      << "Megatron-Core takes a divisor too";
}

TEST(Export, AttentionDpReplicasFoldIntoMegatronAndPaddle) {
  const Fixture f = make("mixtral-8x7b", "2x-hgx-h200", 16, /*attention_dp=*/true);
  const ExportSpec spec = spec_for(f, "2x8x1");
  auto sg = export_layout(spec, ExportFormat::kSglang);
  ASSERT_FALSE(sg.ok());
  EXPECT_NE(sg.error().message.find("2 independent MoE replicas (dp2) cannot be expressed"),
            std::string::npos);
  const std::string nearest = sg.error().message.substr(sg.error().message.find("nearest"));
  EXPECT_EQ(nearest.find("dp2×"), std::string::npos) << "a dp1 layout: " << nearest;
  EXPECT_NE(nearest.find("({layout} "), std::string::npos) << nearest;
  EXPECT_FALSE(export_layout(spec, ExportFormat::kVllm).ok());
  EXPECT_FALSE(export_layout(spec, ExportFormat::kTrtllm).ok());
  auto meg = export_layout(spec, ExportFormat::kMegatron);
  ASSERT_TRUE(meg.ok()) << meg.error().message;
  EXPECT_NE(meg->files[0].content.find("world = TP·CP·DP·PP = 1·1·16·1 = ETP·EP·EDP·PP = "
                                       "1·8·2·1 = 16"),
            std::string::npos)
      << meg->files[0].content;
  // PaddleNLP builds EP groups as consecutive blocks of ep ranks inside its sharding group: the
  // replicas are the sharding group's two EP blocks.
  auto pd = export_layout(spec, ExportFormat::kPaddle);
  ASSERT_TRUE(pd.ok()) << pd.error().message;
  const auto args = nlohmann::json::parse(pd->files[0].content);
  EXPECT_EQ(args.at("sharding_parallel_degree").get<int>(), 16);
  EXPECT_EQ(args.at("expert_parallel_degree").get<int>(), 8);
}

TEST(Export, MissingDispatchersAreWarningsWithASubstitute) {
  const Fixture f = make("qwen2-57b-a14b", "2x-hgx-h200", 16);
  ExportSpec spec = spec_for(f, "16x1");
  spec.chosen.layout.dispatcher = Dispatcher::kPaddedA2a;
  auto sg = export_layout(spec, ExportFormat::kSglang);
  ASSERT_TRUE(sg.ok());
  ASSERT_EQ(sg->warnings.size(), 1U);
  EXPECT_NE(sg->warnings[0].find("no padded equal-split all-to-all; exported as "
                                 "--moe-a2a-backend deepep"),
            std::string::npos);
  EXPECT_NE(sg->files[0].content.find("# warning: SGLang has no padded"), std::string::npos);
  auto pd = export_layout(spec, ExportFormat::kPaddle);
  ASSERT_TRUE(pd.ok());
  EXPECT_TRUE(pd->warnings.empty()) << "padded_a2a is PaddleNLP #9368's own dispatcher";
  spec.chosen.layout.dispatcher = Dispatcher::kAllGather;
  auto pd2 = export_layout(spec, ExportFormat::kPaddle);
  ASSERT_TRUE(pd2.ok());
  ASSERT_EQ(pd2->warnings.size(), 1U);
  const auto args = nlohmann::json::parse(pd2->files[0].content);
  EXPECT_EQ(args.at("expert_parallel_degree").get<int>(), 16);
  EXPECT_EQ(args.at("tensor_parallel_degree").get<int>(), 1);
  // Without expert parallelism no token is dispatched: nothing to warn about. (Mixtral: its 32
  // attention and 8 key/value heads split over tp 8 in every framework; Qwen2's 28 do not.)
  const Fixture mixtral = make("mixtral-8x7b", "1x-hgx-h200", 8);
  ExportSpec tp_only = spec_for(mixtral, "1x8");
  tp_only.chosen.layout.dispatcher = Dispatcher::kPaddedA2a;
  for (const ExportFormat fmt : kAllExportFormats) {
    auto out = export_layout(tp_only, fmt);
    ASSERT_TRUE(out.ok()) << export_format_name(fmt) << ": " << out.error().message;
    EXPECT_TRUE(out->warnings.empty()) << export_format_name(fmt) << ": " << out->warnings[0];
  }
}

TEST(Export, PlacementMustFitTheModelAndLayout) {
  const Fixture f = make("deepseek-v3", "16x-hgx-h200", 128);
  auto chosen = select_layout(f.plan, "128x1");
  ASSERT_TRUE(chosen.ok());
  const PlacementFile for64 = rotated_placement(f.model, 64, 0);
  auto wrong_ep = make_export_spec(f.plan, *chosen, f.model, f.cluster, &for64, "p.json");
  ASSERT_FALSE(wrong_ep.ok());
  EXPECT_EQ(wrong_ep.error().message,
            "p.json: key 'num_gpus': the placement is for 64 EP ranks, expected 128 (the EP size "
            "of layout ep128×tp1)");
  auto qwen = models::load_model("qwen2-57b-a14b");
  ASSERT_TRUE(qwen.ok());
  const PlacementFile other_model = rotated_placement(*qwen, 128, 0);
  auto wrong_model = make_export_spec(f.plan, *chosen, f.model, f.cluster, &other_model, "q.json");
  ASSERT_FALSE(wrong_model.ok());
  EXPECT_EQ(wrong_model.error().message,
            "q.json: key 'num_experts': expected 256 (the routed experts of deepseek-v3), got 64");
}

TEST(Export, OneLayerPlacementAppliesToEveryMoeLayer) {
  const Fixture f = make("deepseek-v3", "16x-hgx-h200", 128);
  PlacementFile one = rotated_placement(f.model, 128, 128);
  one.result.placement.physical_to_logical.resize(1);
  one.layer_ids = {3};
  fill_logical_maps(one.result);
  const ExportSpec spec = spec_for(f, "128x1", &one);
  ASSERT_TRUE(spec.placement.has_value());
  ASSERT_EQ(spec.placement->num_layers(), 58);
  for (const auto& row : spec.placement->physical_to_logical) {
    EXPECT_EQ(row, one.result.placement.physical_to_logical[0]);
  }
}

TEST(Export, WriteIsAllOrNothing) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("moeplan_export_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ExportResult r;
  r.files = {{"a.txt", "one\n"}, {"b.txt", "two\n"}};
  ASSERT_TRUE(write_export(r, dir).ok());
  EXPECT_TRUE(std::filesystem::exists(dir / "a.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir / "b.txt"));
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++count;
  EXPECT_EQ(count, 2U) << "no staged files left behind";
  // A folder where the second file should go: the first is not left behind either.
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "b.txt");
  const Status s = write_export(r, dir);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "a.txt"));
  count = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++count;
  EXPECT_EQ(count, 1U);
  std::filesystem::remove_all(dir);
}

TEST(Export, EveryGeneratedScriptIsValidBash) {
  // One node and two nodes (the multi-node scripts read NODE_RANK and friends), every layout of
  // each plan, every release of each format that writes a script. Mixtral runs tp 16 (one TP
  // group across nodes), Qwen2 does not.
  int checked = 0;
  for (const auto& [model, cluster, gpus] : {std::tuple{"qwen2-57b-a14b", "1x-hgx-h200", 8},
                                             std::tuple{"qwen2-57b-a14b", "2x-hgx-h200", 16},
                                             std::tuple{"mixtral-8x7b", "2x-hgx-h200", 16}}) {
    const Fixture f = make(model, cluster, gpus);
    for (const auto& l : f.plan.layouts) {
      const ExportSpec spec = spec_for(f, std::to_string(l.rank));
      for (const ExportFormat fmt : kAllExportFormats) {
        for (const auto& version : framework_versions(fmt)) {
          auto out = export_layout(spec, fmt, {version, ""});
          if (!out) continue;  // a layout the framework cannot run: its own tests
          for (const auto& file : out->files) {
            if (!file.name.ends_with(".sh")) continue;
            SCOPED_TRACE(export_format_name(fmt) + " " + version + " " + l.describe() + " " +
                         file.name);
            EXPECT_EQ(bash_syntax_error(file.content), "");
            ++checked;
          }
        }
      }
    }
  }
  const Fixture dsv3 = make("deepseek-v3", "16x-hgx-h200", 128);
  const PlacementFile placement = rotated_placement(dsv3.model, 128, 128);
  const ExportSpec spec = spec_for(dsv3, "128x1", &placement);
  for (const ExportFormat fmt :
       {ExportFormat::kSglang, ExportFormat::kVllm, ExportFormat::kMegatron}) {
    for (const auto& version : framework_versions(fmt)) {
      for (const auto& file : exported(spec, fmt, version).files) {
        if (!file.name.ends_with(".sh")) continue;
        EXPECT_EQ(bash_syntax_error(file.content), "") << file.name;
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 100);
}

}  // namespace
}  // namespace test_export
}  // namespace moeplan::planner
