// `moeplan place` as a user runs it: golden outputs, every input format, the placement file,
// and bad inputs (exit 2, one line, no output file).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "planner/placement/placement_file.hpp"
#include "tests/cli/cli_runner.hpp"

namespace moeplan::cli_test {
namespace test_cli_place {
namespace {

std::string loads() { return (moeplan::resource_dir() / "loads").string(); }

std::filesystem::path temp(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("moeplan_place_" + name);
}

// The placement's own compute time varies from run to run.
std::string without_seconds(const std::string& text) {
  return std::regex_replace(text, std::regex("seconds( +)[0-9.]+"), "seconds$1<t>");
}

nlohmann::json run_json(const std::string& args) {
  const auto r = run_cli(args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return nlohmann::json::object();
  return nlohmann::json::parse(r.out);
}

// With --model the slots' expert weights per GPU in the model's format (or --weights): DeepSeek's
// published decode deployment, 288 slots on 144 GPUs — 2 per GPU of 3 fp8 [2048 × 7168]
// matrices with their 16 × 56 fp32 block scales each, over 58 MoE layers.
TEST(CliPlace, ExpertWeightBytesPerGpuInTheFormat) {
  const double fp8_expert = 3.0 * (2048.0 * 7168.0 + 16.0 * 56.0 * 4.0);  // 44,050,944
  const auto j =
      run_json("place --synthetic uniform --model deepseek-v3 --gpus 144 --nodes 18 --slots 288");
  const auto& m = j.at("expert_weights_per_gpu");
  EXPECT_EQ(m.at("format"), "fp8-block");
  EXPECT_EQ(m.at("slots"), 2);
  EXPECT_DOUBLE_EQ(m.at("bytes_per_expert").get<double>(), fp8_expert);
  EXPECT_EQ(m.at("moe_layers"), 58);
  EXPECT_DOUBLE_EQ(m.at("bytes").get<double>(), 2.0 * fp8_expert * 58.0);
  EXPECT_DOUBLE_EQ(m.at("redundant_bytes").get<double>(), 32.0 / 144.0 * fp8_expert * 58.0);
  const auto b = run_json(
      "place --synthetic uniform --model deepseek-v3 --gpus 144 --slots 288 --weights bf16");
  EXPECT_DOUBLE_EQ(b.at("expert_weights_per_gpu").at("bytes_per_expert").get<double>(),
                   3.0 * 2048.0 * 7168.0 * 2.0);
  EXPECT_EQ(b.at("expert_weights_per_gpu").at("source"), "--weights bf16");
  const auto text = run_cli("place --synthetic uniform --model deepseek-v3 --gpus 144 --slots 288");
  EXPECT_NE(text.out.find("expert weights  2 slots per GPU × 42.01 MiB = 84.02 MiB per MoE "
                          "layer, 4.76 GiB per GPU over 58 MoE layers"),
            std::string::npos)
      << text.out;
  // Without a model there are no bytes; --weights alone is an error naming it.
  EXPECT_FALSE(run_json("place --synthetic uniform:experts=64,layers=2 --gpus 8")
                   .contains("expert_weights_per_gpu"));
  expect_one_line_error(run_cli("place --synthetic uniform --gpus 8 --weights bf16"),
                        "--weights: expected --model too");
  expect_one_line_error(
      run_cli("place --synthetic uniform --model deepseek-v3 --gpus 8 --weights fp7"),
      "--weights: expected one of");
}

TEST(CliPlace, TextGolden) {
  const auto r = run_cli("place --load " + loads() +
                         "/olmoe_layers0_7_15_allenai.json --gpus 8 --slots 72 --policy eplb "
                         "--eval-steps 50 --step-tokens 512");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("place_olmoe_eplb.txt", without_seconds(r.out));
}

TEST(CliPlace, JsonGolden) {
  auto j = run_json("place --load " + loads() +
                    "/mistral_layers0_7_15_allenai.json --gpus 4 --slots 8 --policy round_robin");
  for (const char* key : {"policy", "balancedness", "imbalance", "upper_bound", "seconds",
                          "physical_to_logical_map", "logical_to_physical_map", "logical_count"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j.at("physical_to_logical_map")[0], (std::vector<int>{0, 4, 1, 5, 2, 6, 3, 7}));
  j["seconds"] = 0;
  expect_golden("place_mistral_round_robin.json", j.dump(2) + "\n");
}

TEST(CliPlace, BestNotBelowEplbOnBundledLoads) {
  // Fitted figures are exact: best ≥ eplb and ≤ the bound. (Scores on unseen steps are noisy;
  // the planner tests compare them with a derived tolerance.)
  const std::vector<std::string> cases{
      "--load " + loads() + "/dsv2lite_esft.json --model deepseek-v2-lite --gpus 8 --slots 72",
      "--load " + loads() + "/dsv2lite_esft_steps16.npy --gpus 16 --slots 80",
      "--load " + loads() + "/synthetic_hot4_qwen3_30b.csv --gpus 16 --nodes 2 --slots 144"};
  for (const auto& c : cases) {
    const auto e = run_json("place " + c + " --policy eplb --eval-steps 20");
    const auto b = run_json("place " + c + " --policy best --eval-steps 20");
    ASSERT_FALSE(e.empty() || b.empty()) << c;
    EXPECT_GE(b.at("balancedness").get<double>(), e.at("balancedness").get<double>()) << c;
    EXPECT_LE(b.at("balancedness").get<double>(), b.at("upper_bound").get<double>()) << c;
    EXPECT_EQ(b.at("sampled_steps").at("steps"), 20) << c;
  }
}

TEST(CliPlace, EveryInputFormat) {
  const auto csv = run_json("place --load " + loads() + "/synthetic_hot4_qwen3_30b.csv --gpus 8");
  EXPECT_EQ(csv.at("load_format"), "csv");
  const auto npy = run_json("place --load " + loads() +
                            "/synthetic_powerlaw1.2_dsv3_hidden.npy --model deepseek-v3 --gpus 64 "
                            "--slots 320 --policy eplb");
  EXPECT_EQ(npy.at("load_format"), "npy");
  EXPECT_EQ(npy.at("num_layers"), 58);   // the 3 dense rows dropped
  EXPECT_EQ(npy.at("layer_ids")[0], 3);  // first MoE hidden layer
  EXPECT_EQ(npy.at("num_groups"), 8);    // DeepSeek-V3's n_group by default
  const auto steps = run_json("place --load " + loads() +
                              "/dsv2lite_esft_steps16.npy --gpus 8 --fit-steps 12 --policy eplb");
  EXPECT_EQ(steps.at("fit_steps"), 12);
  EXPECT_EQ(steps.at("held_out").at("steps"), 4);
  const auto trace = run_json("place --trace " + loads() +
                              "/synthetic_topic_trace_olmoe_shape.json --gpus 8 --nodes 2 "
                              "--slots 72");
  EXPECT_EQ(trace.at("load_format"), "trace-json");
  EXPECT_GE(trace.at("trace").at("nodes_per_token").get<double>(), 1.0);
  const auto syn = run_json(
      "place --synthetic hot:n=2,share=0.5 --model qwen3-30b-a3b --gpus 8 "
      "--slots 136 --policy eplb");
  EXPECT_EQ(syn.at("load_format"), "synthetic");
  EXPECT_EQ(syn.at("num_layers"), 48);
}

// --load takes what plan --load takes: a file, or a synthetic spec (the same load as --synthetic
// gives, so the same placement and figures).
TEST(CliPlace, LoadTakesASyntheticSpecAsPlanDoes) {
  for (const std::string spec : {"powerlaw:alpha=1.2", "hot:n=2,share=0.5"}) {
    const std::string rest = " --model qwen3-30b-a3b --gpus 8 --slots 136 --policy best";
    auto by_load = run_json("place --load " + spec + rest);
    auto by_synthetic = run_json("place --synthetic " + spec + rest);
    ASSERT_TRUE(by_load.contains("load_format")) << spec;
    EXPECT_EQ(by_load.at("load_format"), "synthetic") << spec;
    by_load.erase("seconds");
    by_synthetic.erase("seconds");
    EXPECT_EQ(by_load, by_synthetic) << spec;
  }
}

TEST(CliPlace, OutWritesTheFileThePlannerReads) {
  const auto out = temp("out.json");
  std::filesystem::remove(out);
  const auto r = run_cli("place --load " + loads() +
                         "/dsv2lite_esft.json --model deepseek-v2-lite --gpus 8 --slots 72 "
                         "--policy eplb --json --out " +
                         out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto f = planner::load_placement_file(out);
  std::filesystem::remove(out);
  ASSERT_TRUE(f.ok()) << f.error().message;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(nlohmann::json(f->result.placement.physical_to_logical),
            j.at("physical_to_logical_map"));
  EXPECT_EQ(f->layer_ids.size(), 26U);
  EXPECT_EQ(f->layer_ids[0], 1);
  EXPECT_EQ(f->config.num_gpus, 8);
  EXPECT_EQ(f->result.placement.num_slots, 72);
}

// With --cluster a placement is timed by the cost model on the steps it did not see. On the
// hot-expert load, contiguous (the four hot experts on one GPU, no replicas) is slower than
// EPLB's replicated map; prefill costs more than decode; the JSON names what was timed.
TEST(CliPlace, PredictedMoeTimeOnUnseenSteps) {
  const std::string base = "place --load " + loads() +
                           "/synthetic_hot4_qwen3_30b.csv --model qwen3-30b-a3b --gpus 16 "
                           "--cluster 2x-hgx-h200 --eval-steps 16 --step-tokens 2048";
  const auto eplb = run_json(base + " --slots 144 --policy eplb --phase decode");
  const auto contiguous = run_json(base + " --policy contiguous --phase decode");
  const auto prefill = run_json(base + " --slots 144 --policy eplb");
  ASSERT_TRUE(eplb.contains("predicted_moe_ms"));
  const auto& t = eplb.at("predicted_moe_ms");
  EXPECT_EQ(t.at("steps"), 16);
  EXPECT_EQ(t.at("layout"), "ep16×tp1 a2av tp_innermost");
  EXPECT_EQ(t.at("phase"), "decode");
  EXPECT_EQ(t.at("tokens_per_gpu"), 128);
  EXPECT_EQ(t.at("cluster"), "2x-hgx-h200");
  EXPECT_GT(t.at("mean_per_step").get<double>(), 0.0);
  EXPECT_GT(contiguous.at("predicted_moe_ms").at("mean_per_step").get<double>(),
            t.at("mean_per_step").get<double>());
  EXPECT_EQ(prefill.at("predicted_moe_ms").at("phase"), "prefill");
  // The text names the time, the steps and the cost source.
  const auto text = run_cli(base + " --slots 144 --policy eplb --phase decode");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("ms per step, mean of 16 unseen steps (ep16×tp1 a2av tp_innermost on "
                          "2x-hgx-h200, decode, 128 tokens per GPU; roofline"),
            std::string::npos)
      << text.out;
  // Without --cluster nothing is timed.
  EXPECT_FALSE(run_json("place --load " + loads() + "/synthetic_hot4_qwen3_30b.csv --gpus 16")
                   .contains("predicted_moe_ms"));
  const std::string hot = "place --load " + loads() + "/synthetic_hot4_qwen3_30b.csv ";
  expect_one_line_error(run_cli(hot + "--gpus 16 --phase decode"),
                        "--phase: expected --cluster too");
  expect_one_line_error(run_cli(hot + "--gpus 16 --cluster 2x-hgx-h200 --eval-steps 4"),
                        "--cluster: expected --model too");
  expect_one_line_error(run_cli(hot + "--model qwen3-30b-a3b --gpus 16 --cluster 2x-hgx-h200"),
                        "--cluster: the predicted MoE time is scored on unseen steps");
  expect_one_line_error(
      run_cli(hot + "--model qwen3-30b-a3b --gpus 12 --cluster 2x-hgx-h200 --eval-steps 4"),
      "--gpus 12: expected whole nodes of 8 GPUs on cluster '2x-hgx-h200'");
  expect_one_line_error(
      run_cli(hot + "--model qwen3-30b-a3b --gpus 32 --cluster 2x-hgx-h200 --eval-steps 4"),
      "--gpus 32: cluster '2x-hgx-h200' has 16 GPUs");
  expect_one_line_error(run_cli(hot + "--model qwen3-30b-a3b --gpus 16 --cluster 2x-hgx-h200 "
                                      "--eval-steps 4 --dispatcher nccl"),
                        "--dispatcher: expected padded_a2a");
}

// The balanced reference: the same unseen steps with every layer's tokens spread evenly over
// the experts, one slot each. It depends on the steps, not on the policy; in prefill no
// placement comes in below it (every rank's rows are at least the mean); a model whose experts
// do not divide over the GPUs has none, and says why.
TEST(CliPlace, BalancedReferenceIsTheFloorOfPrefillTime) {
  const std::string base = "place --load " + loads() +
                           "/synthetic_hot4_qwen3_30b.csv --model qwen3-30b-a3b --gpus 16 "
                           "--cluster 2x-hgx-h200 --eval-steps 8 --step-tokens 65536";
  const auto eplb = run_json(base + " --slots 144 --policy eplb").at("predicted_moe_ms");
  const auto best = run_json(base + " --slots 144 --policy best").at("predicted_moe_ms");
  const auto contiguous = run_json(base + " --policy contiguous").at("predicted_moe_ms");
  const double reference = eplb.at("balanced_reference_per_step").get<double>();
  EXPECT_GT(reference, 0.0);
  EXPECT_EQ(best.at("balanced_reference_per_step").get<double>(), reference);
  EXPECT_EQ(contiguous.at("balanced_reference_per_step").get<double>(), reference);
  for (const auto* t : {&eplb, &best, &contiguous}) {
    EXPECT_GE(t->at("mean_per_step").get<double>(), reference) << t->dump();
  }
  // Contiguous puts the four hot experts on one GPU: far above the reference.
  EXPECT_GT(contiguous.at("mean_per_step").get<double>(), 1.5 * reference);
  const auto text = run_cli(base + " --slots 144 --policy eplb");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("(the same tokens spread evenly over the experts, one slot each; this "
                          "placement "),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("% above it)"), std::string::npos) << text.out;
  // Qwen1.5-MoE-A2.7B's 60 experts on 8 GPUs: no one-slot-per-expert placement exists.
  const std::string odd =
      "place --synthetic hot:n=4,share=0.3 --model qwen1.5-moe-a2.7b --gpus 8 --slots 64 "
      "--cluster 1x-hgx-h200 --eval-steps 2 --policy eplb --step-tokens 2048";
  const auto none = run_json(odd).at("predicted_moe_ms");
  EXPECT_FALSE(none.contains("balanced_reference_per_step"));
  EXPECT_EQ(none.at("balanced_reference_absent"), "60 experts do not divide evenly over ep_size 8");
  const auto odd_text = run_cli(odd);
  ASSERT_EQ(odd_text.exit_code, 0) << odd_text.err;
  EXPECT_NE(odd_text.out.find("balanced reference  none (60 experts do not divide evenly over "
                              "ep_size 8)"),
            std::string::npos)
      << odd_text.out;
}

// --objective time: best's and EPLB's maps refined on the cost model's predicted MoE time.
// The JSON and the text say so; on its check steps the result is never slower than either map;
// without it the objective is tokens. Bad combinations are one clear error each.
TEST(CliPlace, ObjectiveTimeSearchesOnPredictedTime) {
  const std::string base = "place --load " + loads() +
                           "/dsv2lite_esft.json --model deepseek-v2-lite --gpus 8 --slots 64 "
                           "--cluster 1x-hgx-h200 --eval-steps 8 --step-tokens 128 --phase decode";
  const auto tokens = run_json(base + " --policy best");
  EXPECT_EQ(tokens.at("objective"), "tokens");
  EXPECT_FALSE(tokens.contains("time_search"));
  EXPECT_FALSE(run_json(base + " --policy eplb").contains("objective"));  // EPLB's own rule
  const auto out = temp("time.json");
  std::filesystem::remove(out);
  const auto timed = run_json(base + " --policy best --objective time --out " + out.string());
  ASSERT_TRUE(timed.contains("time_search")) << timed.dump();
  EXPECT_EQ(timed.at("objective"), "time");
  EXPECT_EQ(timed.at("policy"), "best-time");
  const auto& ts = timed.at("time_search");
  EXPECT_EQ(ts.at("search_steps"), 32);
  EXPECT_EQ(ts.at("check_steps"), 32);
  EXPECT_EQ(ts.at("layers"), 26);
  EXPECT_LE(ts.at("result_check_ms_per_step").get<double>(),
            ts.at("eplb_check_ms_per_step").get<double>());
  EXPECT_LE(ts.at("result_check_ms_per_step").get<double>(),
            ts.at("best_check_ms_per_step").get<double>());
  EXPECT_LE(ts.at("refined_search_ms_per_step").get<double>(),
            ts.at("start_search_ms_per_step").get<double>());
  EXPECT_EQ(ts.at("layers_refined").get<int>() + ts.at("layers_best").get<int>() <= 26, true);
  // Balance is still reported beside the time, and the map is a legal one of 64 slots.
  EXPECT_GT(timed.at("balancedness").get<double>(), 0.0);
  EXPECT_EQ(timed.at("physical_to_logical_map").size(), 26U);
  EXPECT_EQ(timed.at("physical_to_logical_map")[0].size(), 64U);
  // The placement file holds that map and reads back.
  auto file = planner::load_placement_file(out.string());
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ(file->result.placement.policy, "best-time");
  EXPECT_EQ(nlohmann::json(file->result.placement.physical_to_logical),
            timed.at("physical_to_logical_map"));
  const auto text = run_cli(base + " --policy best --objective time");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("objective           predicted MoE time: best and eplb refined on 32 "
                          "search steps ("),
            std::string::npos)
      << text.out;
  EXPECT_NE(
      text.out.find("check steps a layer leaves eplb's map only for a significant gain: refined "),
      std::string::npos)
      << text.out;
  const std::string hot = "place --load " + loads() + "/synthetic_hot4_qwen3_30b.csv ";
  expect_one_line_error(run_cli(hot + "--gpus 16 --objective time"),
                        "--objective time: expected --cluster too");
  expect_one_line_error(run_cli(base + " --policy eplb --objective time"),
                        "--objective time: refines best's map, expected --policy best, got 'eplb'");
  expect_one_line_error(run_cli(base + " --objective seconds"),
                        "--objective: expected tokens or time, got 'seconds'");
}

TEST(CliPlace, BadInputsAreOneLineAndWriteNothing) {
  const auto out = temp("never.json");
  std::filesystem::remove(out);
  const std::string o = " --out " + out.string();
  const auto ragged = temp("ragged.csv");
  std::ofstream(ragged) << "1,2,3\n4,5\n";
  const auto npy = temp("bad.npy");
  std::ofstream(npy, std::ios::binary)
      << std::string("\x93NUMPY\x01\x00\x10\x00{'descr': 'x'}\n", 26);
  const auto empty = temp("empty.json");
  std::ofstream(empty) << "";
  const auto negative = temp("neg.json");
  std::ofstream(negative) << R"({"logical_count": [[1, -3, 2, 2]]})";

  expect_one_line_error(run_cli("place --load /nonexistent.json --gpus 8" + o),
                        "/nonexistent.json: file not found");
  expect_one_line_error(run_cli("place --load " + ragged.string() + " --gpus 1" + o),
                        "row 1 has 2 values, expected 3");
  expect_one_line_error(run_cli("place --load " + npy.string() + " --gpus 1" + o),
                        "bad.npy: npy header:");
  expect_one_line_error(run_cli("place --load " + empty.string() + " --gpus 1" + o), "empty file");
  expect_one_line_error(run_cli("place --load " + negative.string() + " --gpus 2" + o),
                        "row 0, expert 1: expected a finite count ≥ 0, got -3");
  expect_one_line_error(
      run_cli("place --load " + loads() + "/dsv2lite_esft.json --model qwen3-30b-a3b --gpus 8" + o),
      "has 26 layer rows, expected 48 (MoE layers of qwen3-30b-a3b)");
  expect_one_line_error(run_cli("place --synthetic uniform:experts=8 --gpus 0" + o),
                        "expected --gpus N with N ≥ 1");
  expect_one_line_error(run_cli("place --synthetic uniform:experts=8 --load x.json --gpus 2" + o),
                        "expected exactly one of --load, --trace or --synthetic");
  expect_one_line_error(run_cli("place --synthetic uniform:experts=8 --gpus 3 --slots 10" + o),
                        "slot count (10) to be a multiple of the GPU count (3)");
  expect_one_line_error(run_cli("place --synthetic powerlaw:experts=8 --gpus 2" + o),
                        "key 'alpha' missing");
  expect_one_line_error(run_cli("place --load powerlaw:alpha=abc,experts=8 --gpus 2" + o),
                        "key 'alpha': expected a number in [0, 10], got 'abc'");
  expect_one_line_error(run_cli("place --synthetic uniform:experts=8 --gpus 2 --policy linear" + o),
                        "unknown placement policy 'linear'");
  expect_one_line_error(
      run_cli("place --synthetic uniform:experts=8 --gpus 2 --slots 10 --policy contiguous" + o),
      "policy contiguous places no redundant experts");
  expect_one_line_error(run_cli("place --synthetic uniform:experts=8 --gpus 2 --fit-steps 3" + o),
                        "--fit-steps needs a load with steps");
  expect_one_line_error(run_cli("place --synthetic uniform:experts=8 --gpus 2 --out /nonexistent/"
                                "dir/p.json"),
                        "/nonexistent/dir/p.json: cannot create a temporary file");
  EXPECT_FALSE(std::filesystem::exists(out));
  for (const auto& p : {ragged, npy, empty, negative}) std::filesystem::remove(p);
}

}  // namespace
}  // namespace test_cli_place
}  // namespace moeplan::cli_test
