// `moeplan plan --load --placement`: skew and placement show in the plan, per layer.
#include <nlohmann/json.hpp>

#include <filesystem>

#include "tests/cli/cli_runner.hpp"

namespace moeplan::cli_test {
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
}

}  // namespace
}  // namespace moeplan::cli_test
