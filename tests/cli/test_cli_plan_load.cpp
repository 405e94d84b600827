// `moeplan plan --load --placement`: skew and placement show in the plan, per layer.
#include <nlohmann/json.hpp>

#include <filesystem>

#include "tests/cli/cli_runner.hpp"

namespace moeplan::cli_test {
namespace test_cli_plan_load {
namespace {

const std::string kLoad = "--model qwen3-30b-a3b --load " +
                          (moeplan::resource_dir() / "loads" / "qwen3_30b_a3b_mbolt.json").string();

nlohmann::json plan_json(const std::string& args) {
  const auto r = run_cli("plan " + args + " --json --top 1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json{};
}

TEST(CliPlanLoad, SkewRaisesCostAndEplbRecoversIt) {
  const auto uniform = plan_json("--model qwen3-30b-a3b --dispatcher a2av");
  const auto skewed = plan_json(kLoad + " --dispatcher a2av");
  const auto placed = plan_json(kLoad + " --dispatcher a2av --placement eplb --redundant 1");
  ASSERT_FALSE(uniform.empty());
  ASSERT_FALSE(skewed.empty());
  ASSERT_FALSE(placed.empty());
  const auto step = [](const nlohmann::json& j) {
    return j.at("layouts")[0].at("step_ms").get<double>();
  };
  const auto imb = [](const nlohmann::json& j) {
    return j.at("layouts")[0].at("balance").at("imbalance").get<double>();
  };
  EXPECT_DOUBLE_EQ(imb(uniform), 1.0);
  EXPECT_GT(imb(skewed), 1.3);  // the measured Qwen3 load is skewed (max/mean 5.6 per expert)
  EXPECT_GT(step(skewed), step(uniform));
  EXPECT_LT(imb(placed), imb(skewed));
  EXPECT_LT(step(placed), step(skewed));
  EXPECT_EQ(placed.at("placement").get<std::string>(), "eplb");
  // Per-layer figures for a load that differs between layers: one entry per MoE layer.
  ASSERT_TRUE(skewed.at("layouts")[0].contains("per_layer"));
  EXPECT_EQ(skewed.at("layouts")[0].at("per_layer").size(), 48U);
  EXPECT_FALSE(uniform.at("layouts")[0].contains("per_layer"));
}

TEST(CliPlanLoad, PerLayerTableAndSyntheticLoad) {
  const auto r = run_cli(
      "plan --model qwen3-30b-a3b --load powerlaw:alpha=1.2,shuffle=1,seed=3 "
      "--placement best --per-layer --top 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("placement: best"), std::string::npos);
  EXPECT_NE(r.out.find("per MoE layer of the recommended layout"), std::string::npos);
  EXPECT_NE(r.out.find("\n   47 "), std::string::npos) << r.out;  // the last of 48 layers
}

TEST(CliPlanLoad, PlacementFileRestrictsToItsEpSize) {
  const auto file = std::filesystem::temp_directory_path() / "moeplan_plan_placement.json";
  const auto place =
      run_cli("place " + kLoad + " --gpus 16 --slots 144 --policy eplb --out " + file.string());
  ASSERT_EQ(place.exit_code, 0) << place.err;
  const auto from_file = plan_json(kLoad + " --placement " + file.string() + " --dispatcher a2av");
  const auto fit = plan_json(kLoad + " --placement eplb --redundant 1 --dispatcher a2av");
  std::filesystem::remove(file);
  ASSERT_FALSE(from_file.empty());
  EXPECT_EQ(from_file.at("layouts")[0].at("ep_size").get<int>(), 16);
  // The same EPLB placement, read back from the file, costs exactly the same.
  EXPECT_DOUBLE_EQ(from_file.at("layouts")[0].at("step_ms").get<double>(),
                   fit.at("layouts")[0].at("step_ms").get<double>());
}

TEST(CliPlanLoad, BadInput) {
  auto bad = [](const std::string& args, const std::string& part) {
    expect_one_line_error(run_cli("plan " + args), part);
  };
  bad("--placement worst", "unknown placement policy 'worst'");
  bad("--placement eplb", "need an expert load");
  bad("--load uniform --redundant 2", "contiguous placement has no replicas");
  bad("--load /nonexistent/load.json", "/nonexistent/load.json");
  bad("--load powerlaw:alpha=-1", "alpha");
  bad("--model qwen3-30b-a3b --load " +
          (moeplan::resource_dir() / "loads" / "dsv2lite_esft.json").string(),
      "has 26 layer rows, expected 48");  // DeepSeek-V2-Lite's load for Qwen3's 48 layers
  bad("--redundant -3 --placement eplb --load uniform", "--redundant");
  bad("--redundant total:x --placement eplb --load uniform",
      "--redundant 'total:x': expected N (0..1024 redundant slots per EP rank), total:R");
  bad("--load uniform --placement round_robin --redundant auto",
      "--redundant auto: round_robin placement has no replicas");
  // More redundancy than memory allows: one error naming the most that fits.
  bad("--gpus 2 --redundant 1000 --placement eplb --load uniform", "expected at most ");
  // Slots that cannot divide: no EP size of 144 GPUs is legal with 256 + 30 slots.
  bad("--model deepseek-v3 --cluster 128x-hgx-h200 --gpus 144 --load uniform --placement eplb "
      "--redundant total:30",
      "(num_experts + redundant) % ep_size == 0: (256 + 30) % 3 = 1");
}

// DeepSeek's published decode deployment of DeepSeek-V3: EP144 over 18 nodes, 256 + 32 slots.
const std::string kDsv3Ep144 =
    "--model deepseek-v3 --cluster 128x-hgx-h200 --gpus 144 --phase decode --dispatcher a2av "
    "--load powerlaw:alpha=1.2,shuffle=1,layers=1 --placement eplb --redundant total:32";

TEST(CliPlanLoad, DeepSeekV3Ep144PlansWithRedundantSlots) {
  const auto r = run_cli("plan " + kDsv3Ep144 + " --top 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("redundant slots: 32 in all"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("slots (/GPU)"), std::string::npos);
  EXPECT_NE(r.out.find("ep144×tp1"), std::string::npos);
  EXPECT_NE(r.out.find("288 (2)"), std::string::npos);      // EP144: 2 slots per GPU
  EXPECT_NE(r.out.find("288 (32)"), std::string::npos);     // EP9 × TP16: 32 per GPU
  EXPECT_EQ(r.out.find(" left out: "), std::string::npos);  // 288 divides every EP size of 144
  // On 128 GPUs the same count leaves EP64 and EP128 out, and the reasons say so in flags.
  std::string on128 = kDsv3Ep144;
  on128.replace(on128.find("--gpus 144"), 10, "--gpus 128");
  const auto r128 = run_cli("plan " + on128);
  ASSERT_EQ(r128.exit_code, 0) << r128.err;
  EXPECT_NE(r128.out.find("  - ep64×tp2, ep128×tp1 left out: 256 experts + 32 redundant slots "
                          "(288) do not divide evenly over 64 or 128 EP ranks (--redundant "
                          "total:32); they are legal without redundant slots, and a count per "
                          "EP rank (--redundant N) or --redundant auto keeps them"),
            std::string::npos)
      << r128.out;
  const auto js = run_cli("plan " + kDsv3Ep144 + " --json");
  ASSERT_EQ(js.exit_code, 0) << js.err;
  const auto j = nlohmann::json::parse(js.out);
  EXPECT_EQ(j.at("redundant").get<std::string>(), "total:32");
  bool ep144 = false;
  for (const auto& l : j.at("layouts")) {
    EXPECT_EQ(l.at("num_slots").get<int>(), 288);
    if (l.at("ep_size").get<int>() == 144) {
      ep144 = true;
      EXPECT_GT(l.at("memory_gib").at("experts").get<double>(), 0.0);
      EXPECT_TRUE(l.at("feasible").get<bool>());
    }
  }
  EXPECT_TRUE(ep144);
}

TEST(CliPlanLoad, DeepSeekV3Ep144Exports) {
  const auto sg = run_cli("plan " + kDsv3Ep144 + " --export sglang --layout 144x1");
  ASSERT_EQ(sg.exit_code, 0) << sg.err;
  EXPECT_NE(sg.out.find("--ep-size 144"), std::string::npos) << sg.out;
  EXPECT_NE(sg.out.find("--ep-num-redundant-experts 32"), std::string::npos) << sg.out;
  EXPECT_NE(sg.out.find("288 slots per MoE layer (32 redundant)"), std::string::npos);
  const auto trt = run_cli("plan " + kDsv3Ep144 + " --export trtllm --layout 144x1");
  ASSERT_EQ(trt.exit_code, 0) << trt.err;
  EXPECT_NE(trt.out.find("num_slots: 288"), std::string::npos) << trt.out;
  const auto vl = run_cli("plan " + kDsv3Ep144 + " --export vllm --layout 144x1");
  ASSERT_EQ(vl.exit_code, 0) << vl.err;
  EXPECT_NE(vl.out.find("\"num_redundant_experts\":32"), std::string::npos) << vl.out;
  // From a saved plan the layout needs its placement file: one clear error without it.
  const auto dir = std::filesystem::temp_directory_path() / "moeplan_cli_ep144";
  std::filesystem::create_directories(dir);
  const auto plan = (dir / "plan.json").string();
  ASSERT_EQ(run_cli("plan " + kDsv3Ep144 + " --json -o " + plan).exit_code, 0);
  expect_one_line_error(run_cli("export --plan " + plan + " --layout 144x1 --format sglang"),
                        "was planned with 288 expert slots (32 redundant); expected its "
                        "placement file (moeplan place --gpus 144 --slots 288 --out FILE)");
  const auto place = (dir / "place.json").string();
  const auto placed = run_cli(
      "place --synthetic powerlaw:alpha=1.2,shuffle=1 --model deepseek-v3 --gpus 144 --nodes 18 "
      "--slots 288 --policy eplb --out " +
      place);
  ASSERT_EQ(placed.exit_code, 0) << placed.err;
  const auto ex = run_cli("export --plan " + plan + " --layout 144x1 --placement " + place +
                          " --format sglang");
  EXPECT_EQ(ex.exit_code, 0) << ex.err;
  EXPECT_NE(ex.out.find("--ep-num-redundant-experts 32"), std::string::npos) << ex.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace test_cli_plan_load
}  // namespace moeplan::cli_test
