// Exports: plan reading, layout selection, what each framework can express, the SGLang and
// TensorRT-LLM placement maps, the staged write, and the json layout file's round trip.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "models/registry.hpp"
#include "planner/costs/roofline_costs.hpp"
#include "planner/export.hpp"

namespace moeplan::planner {
namespace {

struct Fixture {
  models::MoeModel model;
  Cluster cluster;
  PlanSummary plan;
};

Fixture make(const std::string& model_name, const std::string& cluster_name, int gpus) {
  auto model = models::load_model(model_name);
  EXPECT_TRUE(model.ok()) << model.error().message;
  auto cluster = load_cluster(cluster_name);
  EXPECT_TRUE(cluster.ok()) << cluster.error().message;
  const RooflineCosts costs(*cluster);
  PlanRequest req;
  req.num_gpus = gpus;
  auto plan = make_plan(*model, *cluster, costs, req);
  EXPECT_TRUE(plan.ok()) << plan.error().message;
  return {*model, *cluster, summarize_plan(*plan)};
}

ExportSpec spec_for(const Fixture& f, const std::string& selector,
                    const PlacementFile* placement = nullptr) {
  auto chosen = select_layout(f.plan, selector);
  EXPECT_TRUE(chosen.ok()) << chosen.error().message;
  auto spec = make_export_spec(f.plan, *chosen, f.model, f.cluster, placement, "place.json");
  EXPECT_TRUE(spec.ok()) << spec.error().message;
  return *spec;
}

/// A placement for `ep` ranks with `redundant` extra slots: slot s holds expert s mod E, so
/// the first experts get a second replica; every MoE layer of the model is rotated by its
/// index so the layers differ.
PlacementFile rotated_placement(const models::MoeModel& m, int ep, int redundant) {
  PlacementFile f;
  Placement& p = f.result.placement;
  p.policy = "test-rotated";
  p.num_experts = m.num_experts;
  p.ep_size = ep;
  p.num_slots = m.num_experts + redundant;
  for (int h = 0, l = 0; h < m.num_hidden_layers; ++h) {
    if (!m.moe_layers[static_cast<std::size_t>(h)]) continue;
    std::vector<int> row;
    for (int s = 0; s < p.num_slots; ++s) row.push_back((s + l) % m.num_experts);
    p.physical_to_logical.push_back(row);
    f.layer_ids.push_back(h);
    ++l;
  }
  f.config.num_gpus = ep;
  f.config.num_slots = p.num_slots;
  fill_logical_maps(f.result);
  return f;
}

const ExportFile* file_named(const ExportResult& r, const std::string& name) {
  for (const auto& f : r.files) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

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
  EXPECT_NE(bad.error().message.find("l.json: key 'tp_size': expected dp_size·ep_size·tp_size"),
            std::string::npos)
      << bad.error().message;
  auto wrong = parse_layout_file(R"({"format": "moeplan-placement", "version": 1})", "l.json");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().message,
            "l.json: key 'format': expected \"moeplan-layout\", got \"moeplan-placement\"");
}

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
       {"--tp-size 128", "--ep-size 128", "--enable-dp-attention", "--dp-size 128",
        "--ep-num-redundant-experts 128", "--init-expert-location", "--nnodes 16"}) {
    EXPECT_NE(script.find(arg), std::string::npos) << arg;
  }
}

TEST(Export, TrtllmLoadBalancerKeysAreHiddenLayers) {
  const Fixture f = make("deepseek-v3", "16x-hgx-h200", 128);
  const PlacementFile placement = rotated_placement(f.model, 128, 128);
  auto out = export_layout(spec_for(f, "128x1", &placement), ExportFormat::kTrtllm);
  ASSERT_TRUE(out.ok()) << out.error().message;
  const std::string& lb = file_named(*out, "moe_load_balancer.yaml")->content;
  EXPECT_NE(lb.find("num_slots: 384\n"), std::string::npos);
  EXPECT_NE(lb.find("\n  3: [0, 1, 2,"), std::string::npos);
  EXPECT_NE(lb.find("\n  60: [57, 58,"), std::string::npos);
  EXPECT_EQ(lb.find("\n  2: ["), std::string::npos) << "dense layer 2 has no slots";
  const std::string& opts = file_named(*out, "trtllm_extra_llm_api_options.yaml")->content;
  EXPECT_NE(opts.find("moe_expert_parallel_size: 128\n"), std::string::npos);
  EXPECT_NE(opts.find("enable_attention_dp: true\n"), std::string::npos);
  EXPECT_NE(opts.find("load_balancer: ./moe_load_balancer.yaml"), std::string::npos);
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
  // The nearest one really is expressible.
  const auto pos = vllm.error().message.find("(--layout ");
  ASSERT_NE(pos, std::string::npos);
  const std::string rank = vllm.error().message.substr(pos + 10);
  auto nearest = export_layout(spec_for(f, rank.substr(0, rank.find(')'))), ExportFormat::kVllm);
  EXPECT_TRUE(nearest.ok()) << nearest.error().message;
  // The nearest layout keeps the shape and dispatcher when the plan has them: TensorRT-LLM
  // runs the same ep8×tp2 a2av with the other rank mapping.
  auto trt = export_layout(spec, ExportFormat::kTrtllm);
  ASSERT_FALSE(trt.ok());
  EXPECT_NE(trt.error().message.find("nearest expressible layout in the plan: rank 5: ep8×tp2 "
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

TEST(Export, AttentionDpReplicasFoldIntoMegatronOnly) {
  auto model = models::load_model("mixtral-8x7b");
  ASSERT_TRUE(model.ok());
  auto cluster = load_cluster("2x-hgx-h200");
  ASSERT_TRUE(cluster.ok());
  const RooflineCosts costs(*cluster);
  PlanRequest req;
  req.attention_dp = true;
  auto plan = make_plan(*model, *cluster, costs, req);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const Fixture f{*model, *cluster, summarize_plan(*plan)};
  const ExportSpec spec = spec_for(f, "2x8x1");
  auto sg = export_layout(spec, ExportFormat::kSglang);
  ASSERT_FALSE(sg.ok());
  EXPECT_NE(sg.error().message.find("2 independent MoE replicas (dp2) cannot be expressed"),
            std::string::npos);
  const std::string nearest = sg.error().message.substr(sg.error().message.find("nearest"));
  EXPECT_EQ(nearest.find("dp2×"), std::string::npos) << "a dp1 layout: " << nearest;
  EXPECT_NE(nearest.find("(--layout "), std::string::npos) << nearest;
  EXPECT_FALSE(export_layout(spec, ExportFormat::kVllm).ok());
  EXPECT_FALSE(export_layout(spec, ExportFormat::kTrtllm).ok());
  EXPECT_FALSE(export_layout(spec, ExportFormat::kPaddle).ok());
  auto meg = export_layout(spec, ExportFormat::kMegatron);
  ASSERT_TRUE(meg.ok()) << meg.error().message;
  EXPECT_NE(meg->files[0].content.find("world = TP·CP·DP·PP = 1·1·16·1 = ETP·EP·EDP·PP = "
                                       "1·8·2·1 = 16"),
            std::string::npos)
      << meg->files[0].content;
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
  // Without expert parallelism no token is dispatched: nothing to warn about.
  ExportSpec tp_only = spec_for(f, "1x16");
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

}  // namespace
}  // namespace moeplan::planner
