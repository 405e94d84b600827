// `moeplan export` and `moeplan plan --export / --layout-file` as a user runs them: golden files
// per format from plans of bundled models, the json round trip, and bad input (exit 2, one line,
// no files written).
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.hpp"

namespace moeplan::cli_test {
namespace test_cli_export {
namespace {

namespace fs = std::filesystem;

/// A scratch folder per test, removed afterwards; its path reads "<tmp>" in golden files.
class CliExport : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("moeplan_cli_export_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string local(std::string text) const {
    const std::string d = dir_.string();
    for (std::size_t pos = 0; (pos = text.find(d, pos)) != std::string::npos;) {
      text.replace(pos, d.size(), "<tmp>");
    }
    return text;
  }
  /// Writes the plan of `model` on `cluster` to DIR/plan.json.
  void make_plan(const std::string& model, const std::string& cluster) {
    const auto r = run_cli("plan --model " + model + " --cluster " + cluster + " --json -o " +
                           path("plan.json"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  /// Writes a DeepSeek-V3 EPLB placement with 128 redundant slots for 128 GPUs to DIR/place.json.
  void make_placement(int gpus, int slots) {
    const auto r = run_cli("place --synthetic powerlaw:alpha=1.2 --model deepseek-v3 --gpus " +
                           std::to_string(gpus) + " --nodes 16 --slots " + std::to_string(slots) +
                           " --policy eplb --out " + path("place.json"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  fs::path dir_;
};

TEST_F(CliExport, Qwen2EveryFormatGolden) {
  make_plan("qwen2-57b-a14b", "2x-hgx-h200");
  // rank 1 is ep16×tp1 a2av; 8x2 is the best ep8×tp2 (tp_innermost); rank 6 ep8×tp2
  // padded_a2a ep_innermost, which TensorRT-LLM reproduces (with warnings).
  const std::pair<const char*, const char*> cases[] = {
      {"sglang", ""}, {"vllm", ""}, {"trtllm", "--layout 6"}, {"megatron", "--layout 8x2"},
      {"paddle", ""}, {"json", ""}};
  for (const auto& [format, layout] : cases) {
    const auto r =
        run_cli("export --plan " + path("plan.json") + " --format " + format + " " + layout);
    ASSERT_EQ(r.exit_code, 0) << format << ": " << r.err;
    expect_golden(std::string("export_qwen2_") + format + ".txt", local(r.out));
    const bool warns = std::string(format) == "trtllm" || std::string(format) == "paddle";
    EXPECT_EQ(r.err.find("moeplan: warning: ") == 0, warns) << format << ": " << r.err;
  }
}

TEST_F(CliExport, PlanExportMatchesExportOfTheSavedPlan) {
  make_plan("qwen2-57b-a14b", "2x-hgx-h200");
  const auto a = run_cli("plan --model qwen2-57b-a14b --cluster 2x-hgx-h200 --export sglang");
  const auto b = run_cli("export --plan " + path("plan.json") + " --format sglang");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  const auto c = run_cli(
      "plan --model qwen2-57b-a14b --cluster 2x-hgx-h200 --export megatron "
      "--layout 4x4 --out " +
      path("m"));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const std::string args = slurp(path("m/megatron_args.sh"));
  EXPECT_NE(args.find("--expert-model-parallel-size 4\n"), std::string::npos);
  EXPECT_NE(args.find("--expert-tensor-parallel-size 4\n"), std::string::npos);
}

TEST_F(CliExport, DeepSeekV3WithRedundantExperts) {
  make_plan("deepseek-v3", "16x-hgx-h200");
  make_placement(128, 384);
  const std::string base =
      "export --plan " + path("plan.json") + " --layout 128x1 --placement " + path("place.json");
  const auto sg = run_cli(base + " --format sglang --out " + path("sg"));
  ASSERT_EQ(sg.exit_code, 0) << sg.err;
  EXPECT_EQ(local(sg.out),
            "wrote <tmp>/sg/sglang_launch.sh\nwrote <tmp>/sg/sglang_expert_location.json\n");
  expect_golden("export_dsv3_sglang_launch.sh", slurp(path("sg/sglang_launch.sh")));
  const auto map = nlohmann::json::parse(slurp(path("sg/sglang_expert_location.json")));
  const auto place = nlohmann::json::parse(slurp(path("place.json")));
  ASSERT_EQ(map.at("physical_to_logical_map").size(), 61U);  // every hidden layer
  EXPECT_EQ(map.at("physical_to_logical_map")[3], place.at("physical_to_logical_map")[0]);
  EXPECT_EQ(map.at("physical_to_logical_map")[60], place.at("physical_to_logical_map")[57]);

  // The static balancer inline: nothing for trtllm-serve to resolve against its working folder.
  const auto trt = run_cli(base + " --format trtllm --out " + path("trt"));
  ASSERT_EQ(trt.exit_code, 0) << trt.err;
  EXPECT_EQ(local(trt.out), "wrote <tmp>/trt/trtllm_extra_llm_api_options.yaml\n");
  const std::string opts = slurp(path("trt/trtllm_extra_llm_api_options.yaml"));
  expect_golden("export_dsv3_trtllm_options.yaml", opts);
  EXPECT_NE(opts.find("    num_slots: 384\n    layer_updates_per_iter: 0\n"), std::string::npos);
  EXPECT_EQ(std::count(opts.begin(), opts.end(), '['), 58);  // one row per MoE layer
  // A release that only opens a path: the balancer's own file, named by its absolute path.
  const auto trt13 =
      run_cli(base + " --format trtllm --framework-version 1.3 --out " + path("trt13"));
  ASSERT_EQ(trt13.exit_code, 0) << trt13.err;
  EXPECT_NE(slurp(path("trt13/trtllm_extra_llm_api_options.yaml"))
                .find("  load_balancer: \"" + path("trt13/moe_load_balancer.yaml") + "\"\n"),
            std::string::npos);
  const std::string lb = slurp(path("trt13/moe_load_balancer.yaml"));
  EXPECT_NE(lb.find("num_slots: 384\nlayer_updates_per_iter: 0\n"), std::string::npos);

  const auto vllm = run_cli(base + " --format vllm");
  ASSERT_EQ(vllm.exit_code, 0) << vllm.err;
  expect_golden("export_dsv3_vllm.txt", vllm.out);
  EXPECT_NE(vllm.err.find("vLLM cannot load an explicit expert placement"), std::string::npos);

  const auto meg = run_cli(base + " --format megatron");
  ASSERT_EQ(meg.exit_code, 0) << meg.err;
  EXPECT_NE(meg.err.find("has no redundant experts; placement 'eplb' (384 slots) is not "
                         "exported"),
            std::string::npos)
      << meg.err;
}

TEST_F(CliExport, JsonRoundTripThroughPlanLayoutFile) {
  make_plan("deepseek-v3", "16x-hgx-h200");
  make_placement(128, 384);
  const auto r = run_cli("export --plan " + path("plan.json") + " --layout 128x1 --placement " +
                         path("place.json") + " --format json --out " + path("j"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto layout = nlohmann::json::parse(slurp(path("j/moeplan_layout.json")));
  const auto plan = nlohmann::json::parse(slurp(path("plan.json")));
  const auto place = nlohmann::json::parse(slurp(path("place.json")));
  EXPECT_EQ(layout.at("layout").at("ep_size").get<int>(), 128);
  EXPECT_EQ(layout.at("placement").at("physical_to_logical_map"),
            place.at("physical_to_logical_map"));
  const int rank = layout.at("plan").at("rank").get<int>();
  const auto& planned = plan.at("layouts")[static_cast<std::size_t>(rank - 1)];
  const double step = planned.at("step_ms").get<double>();
  EXPECT_NEAR(layout.at("predicted").at("step_ms").get<double>(), step, 1e-11 * step);
  EXPECT_EQ(layout.at("layout").at("dispatcher"), planned.at("dispatcher"));

  const auto back = run_cli("plan --layout-file " + path("j/moeplan_layout.json"));
  ASSERT_EQ(back.exit_code, 0) << back.err;
  EXPECT_TRUE(back.err.empty()) << back.err;
  expect_golden("export_dsv3_layout_file.txt", back.out);

  // A layout file whose model changed since: the costs still print, with a warning.
  auto edited = layout;
  edited["model"]["fingerprint"] = "fnv1a64:0000000000000000";
  std::ofstream(path("edited.json")) << edited.dump();
  const auto warned = run_cli("plan --layout-file " + path("edited.json"));
  ASSERT_EQ(warned.exit_code, 0) << warned.err;
  // Only the first line (model and its recorded fingerprint) differs.
  EXPECT_EQ(warned.out.substr(warned.out.find('\n')), back.out.substr(back.out.find('\n')));
  EXPECT_NE(warned.err.find("moeplan: warning: model file "), std::string::npos) << warned.err;
  EXPECT_NE(warned.err.find("changed since the export"), std::string::npos) << warned.err;
}

TEST_F(CliExport, BadInputExitsTwoWithOneLineAndNoFiles) {
  make_plan("qwen2-57b-a14b", "2x-hgx-h200");
  make_placement(64, 256);
  const std::string plan = " --plan " + path("plan.json");
  const std::string out = " --out " + path("out");
  std::ofstream(path("broken.json")) << "{\"schema_version\": 1, \"model\": ";
  std::ofstream(path("empty_layouts.json"))
      << R"({"schema_version": 1, "model": {"name": "m", "source": "m.json"},
             "cluster": {"name": "c", "source": "c.json"}, "num_gpus": 4,
             "workload": {"phase": "prefill", "tokens_per_gpu": 8}, "cost_source": "roofline",
             "layouts": []})";
  const std::pair<std::string, std::string> cases[] = {
      {"export --format sglang" + out, "export: expected --plan PLAN.json"},
      {"export --plan " + path("missing.json") + " --format sglang" + out,
       "missing.json: file not found"},
      {"export --plan " + path("broken.json") + " --format sglang" + out, "invalid JSON at byte"},
      {"export --plan " + path("empty_layouts.json") + " --format json" + out,
       "key 'layouts': expected at least one legal layout"},
      {"export" + plan + " --format deepspeed" + out,
       "--format: expected sglang, vllm, trtllm, megatron, paddle or json, got 'deepspeed'"},
      {"export" + plan + " --format sglang --layout 99" + out,
       "--layout 99: expected a rank the plan lists (1.."},
      {"export" + plan + " --format sglang --layout 3x5" + out,
       "--layout 3x5: the plan has no legal layout of that shape"},
      {"export" + plan + " --format vllm --layout 8x2" + out,
       "never TP inside EP, so ep8×tp2 cannot be expressed; nearest expressible layout"},
      {"export" + plan + " --format sglang --placement " + path("place.json") + out,
       "key 'num_experts': expected 64 (the routed experts of qwen2-57b-a14b), got 256"},
      {"export" + plan + " --format sglang --placement " + path("plan.json") + out,
       "key 'format': missing, expected a string"},
      {"plan --export yaml", "--export: expected sglang, vllm, trtllm, megatron, paddle or json"},
      {"plan --out " + path("out"),
       "plan: --out, --layout and --framework-version go with --export FORMAT"},
      {"export" + plan + " --format sglang --framework-version 0.4.0" + out,
       "--framework-version 0.4.0: the sglang export (SGLang) is written for 0.5.23, 0.5.22, "
       "0.5.21 (default 0.5.23)"},
      {"plan --export vllm --framework-version 0.1 --out " + path("out"),
       "--framework-version 0.1: the vllm export (vLLM) is written for 0.34.0"},
      {"export" + plan + " --format paddle --framework-version 2.8.1" + out,
       "PaddleNLP 2.8.1 has no expert parallelism (its TrainingArguments has no "
       "expert_parallel_degree; --framework-version 3.0.0b4 has), so ep16×tp1 cannot run; "
       "no layout of the plan can be expressed in paddle 2.8.1"},
      {"export" + plan + " --format megatron --layout 2x8" + out,
       "qwen2-57b-a14b's num_attention_heads 28 is not a multiple of 8, so ep2×tp8 cannot run; "
       "nearest expressible layout in the plan: rank "},
      {"plan --export json --json --out " + path("out"),
       "plan: --export writes the layout's files"},
      {"plan --layout-file " + path("plan.json"), "key 'format': missing, expected a string"},
  };
  for (const auto& [args, part] : cases) {
    SCOPED_TRACE(args);
    expect_one_line_error(run_cli(args), part);
    EXPECT_FALSE(fs::exists(path("out")));
  }
}

}  // namespace
}  // namespace test_cli_export
}  // namespace moeplan::cli_test
