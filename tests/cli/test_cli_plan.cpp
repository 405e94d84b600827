// `moeplan plan` and `moeplan clusters` as a user runs them: golden outputs, JSON, exit codes.
#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.hpp"

namespace moeplan::cli_test {
namespace test_cli_plan {
namespace {

TEST(CliPlan, DefaultGolden) {
  const auto r = run_cli("plan");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("plan: qwen2-57b-a14b on 2x-hgx-h200 (16 of 16 × h200), prefill"),
            std::string::npos);
  EXPECT_NE(r.out.find("cost source: roofline"), std::string::npos);
  expect_golden("plan_default.txt", r.out);
}

TEST(CliPlan, DecodeExplainGolden) {
  const auto r = run_cli(
      "plan --model qwen1.5-moe-a2.7b --cluster 1x-hgx-h200 --phase decode --tokens 64 "
      "--top 5 --explain");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("excluded (illegal for every dispatcher and mapping):"), std::string::npos);
  expect_golden("plan_qwen1.5_decode_explain.txt", r.out);
}

// With --isl/--osl the KV cache is counted: DeepSeek-V3's MLA latent (512 + 64 bf16 elements per
// token per layer, 61 layers) of 128 sequences of 4096 + 1024 tokens per GPU is 42.89 GiB on
// ep16×tp1; on ep8×tp2 every TP rank holds the whole latent of its group's 256 sequences.
TEST(CliPlan, KvCacheGolden) {
  const auto r = run_cli(
      "plan --model deepseek-v3 --cluster 2x-hgx-h200 --phase decode --tokens 128 --isl 4096 "
      "--osl 1024 --top 6");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("memory includes the KV cache"), std::string::npos);
  EXPECT_NE(r.out.find("42.89 GiB of it KV cache for 128 sequences of 4096 + 1024 tokens per GPU"),
            std::string::npos);
  expect_golden("plan_dsv3_decode_kv.txt", r.out);
  // A batch whose KV cache fits nowhere: no recommendation, and what to change, with flags.
  const auto none = run_cli(
      "plan --model qwen3-30b-a3b --cluster 1x-hgx-h200 --phase decode --tokens 4096 --isl "
      "32000 --osl 8000");
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_NE(none.out.find("recommended: none"), std::string::npos);
  EXPECT_NE(none.out.find("no layout holds the batch's KV cache in 0.90 of the h200's"),
            std::string::npos);
  EXPECT_NE(none.out.find("lower the batch (--tokens), the context (--isl, --osl), raise "
                          "--mem-fraction, or use more GPUs (--gpus)"),
            std::string::npos);
  // JSON carries the context and each layout's KV cache, limit and sequences.
  const auto j = nlohmann::json::parse(
      run_cli("plan --model qwen3-30b-a3b --cluster 1x-hgx-h200 --phase decode --tokens 64 "
              "--isl 1024 --osl 256 --mem-fraction 0.8 --json")
          .out);
  EXPECT_EQ(j.at("workload").at("isl"), 1024);
  EXPECT_EQ(j.at("workload").at("osl"), 256);
  EXPECT_DOUBLE_EQ(j.at("workload").at("mem_fraction").get<double>(), 0.8);
  for (const auto& l : j.at("layouts")) {
    const auto& mem = l.at("memory_gib");
    EXPECT_DOUBLE_EQ(mem.at("limit").get<double>(), 0.8 * mem.at("capacity").get<double>());
    EXPECT_GT(mem.at("kv_cache").get<double>(), 0.0);
    EXPECT_GT(l.at("max_sequences_per_gpu").get<double>(), 0.0);
  }
  // Without a context nothing about the KV cache is printed or written.
  EXPECT_FALSE(nlohmann::json::parse(run_cli("plan --json").out).at("workload").contains("isl"));
}

TEST(CliPlan, LoadAndPlacement) {
  const auto r = run_cli(
      "plan --load powerlaw:alpha=1.2,shuffle=1 --placement eplb --redundant 1 --json --top 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("expert_load").get<std::string>(), "powerlaw:alpha=1.2,shuffle=1");
  EXPECT_EQ(j.at("placement").get<std::string>(), "eplb");
  expect_one_line_error(run_cli("plan --placement eplb"), "need an expert load");
  // The traffic of the recommended layout (ep16×tp1 a2av here): every pair exchanges data, the
  // diagonal is zero.
  const auto t = run_cli("plan --top 1 --json --traffic 0");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  const auto tj = nlohmann::json::parse(t.out).at("traffic");
  EXPECT_EQ(tj.at("layer").get<int>(), 0);
  const auto bytes = tj.at("bytes").get<std::vector<std::vector<double>>>();
  ASSERT_EQ(bytes.size(), 16U);
  EXPECT_EQ(bytes[3][3], 0.0);
  EXPECT_GT(bytes[0][15], 0.0);
  expect_one_line_error(run_cli("plan --traffic 99"), "--traffic");
  expect_one_line_error(run_cli("plan --load uniform --placement nope"), "nope");
  expect_one_line_error(run_cli("plan --load /nonexistent/load.csv"), "/nonexistent/load.csv");
}

TEST(CliPlan, WeightFormatsAndTheirWhatIf) {
  // DeepSeek-V3 as published: fp8 with 128×128 block scales, on 8 H200s it fits.
  const auto r = run_cli("plan --model deepseek-v3 --cluster 1x-hgx-h200 --top 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& w = j.at("model").at("weights");
  EXPECT_EQ(w.at("name").get<std::string>(), "fp8-block");
  EXPECT_EQ(w.at("source").get<std::string>(), "quantization_config (fp8)");
  EXPECT_EQ(w.at("weight_block_size"), nlohmann::json({128, 128}));
  EXPECT_EQ(w.at("activations").get<std::string>(), "fp8 e4m3 dynamic, 1×128 groups, fp32 scales");
  EXPECT_TRUE(j.at("layouts").at(0).at("feasible").get<bool>());
  const double fp8_gib = j.at("layouts").at(0).at("memory_gib").at("experts").get<double>();
  // The same plan in bf16: twice the expert bytes, and nothing fits on 8 GPUs.
  const auto b =
      run_cli("plan --model deepseek-v3 --cluster 1x-hgx-h200 --top 1 --json --weights bf16");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto bj = nlohmann::json::parse(b.out);
  EXPECT_EQ(bj.at("model").at("weights").at("source").get<std::string>(), "--weights bf16");
  EXPECT_FALSE(bj.at("layouts").at(0).at("feasible").get<bool>());
  EXPECT_NEAR(bj.at("layouts").at(0).at("memory_gib").at("experts").get<double>() / fp8_gib, 2.0,
              0.002);
  // The table says which format it costed.
  const auto t = run_cli("plan --model deepseek-v3 --cluster 1x-hgx-h200 --top 1");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("weights: fp8 e4m3, 128×128 blocks, fp32 scales [fp8-block, "
                       "quantization_config (fp8)]; activations: fp8 e4m3 dynamic"),
            std::string::npos)
      << t.out;
  expect_one_line_error(run_cli("plan --weights int3"),
                        "--weights: expected one of fp8-block, fp8-channel, fp8-tensor, bf16");
  const auto show = run_cli("models show qwen3-30b-a3b --weights nvfp4");
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("Weights              nvfp4 (e2m1, e4m3 scale per 16, fp32 per "
                          "tensor) [nvfp4, --weights nvfp4]"),
            std::string::npos)
      << show.out;
  expect_one_line_error(run_cli("models show deepseek-v3 --weights fp4"), "--weights");
}

TEST(CliPlan, JsonHasTheDocumentedFields) {
  const auto r = run_cli("plan --model mixtral-8x7b --cluster 2x-hgx-h200 --json --explain");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("schema_version").get<int>(), 1);
  EXPECT_EQ(j.at("model").at("name").get<std::string>(), "mixtral-8x7b");
  EXPECT_EQ(j.at("cluster").at("name").get<std::string>(), "2x-hgx-h200");
  EXPECT_EQ(j.at("workload").at("phase").get<std::string>(), "prefill");
  EXPECT_EQ(j.at("workload").at("tokens_per_gpu").get<int>(), 4096);
  // Mixtral on 16 GPUs: ep ∈ {1, 2, 4, 8} legal; ep16 breaks 8 % 16. Legal layouts: 3
  // dispatchers × (2 shapes with two mappings + ep1×tp16 with one) = 21, plus 1 excluded.
  const auto& layouts = j.at("layouts");
  ASSERT_EQ(layouts.size(), 22U);
  double prev = 0.0;
  for (std::size_t i = 0; i + 1 < layouts.size(); ++i) {
    const auto& l = layouts[i];
    EXPECT_TRUE(l.at("legal").get<bool>());
    EXPECT_EQ(l.at("ep_size").get<int>() * l.at("tp_size").get<int>(), 16);
    const double step = l.at("step_ms").get<double>();
    if (l.at("feasible").get<bool>()) {
      EXPECT_GE(step, prev);
      prev = step;
    }
    double sum = 0.0;
    for (const char* part : {"router", "dispatch", "experts", "combine", "tp", "shared"}) {
      sum += l.at("layer_ms").at(part).get<double>();
      // h200 has a calibration: calibrated parts, the plain roofline where it has no fit
      // (collectives across the two nodes), and a part without work names the source itself.
      const std::string src = l.at("sources").at(part).get<std::string>();
      for (std::size_t at = 0; at <= src.size();) {
        std::size_t end = src.find('+', at);
        if (end == std::string::npos) end = src.size();
        const std::string one = src.substr(at, end - at);
        EXPECT_TRUE(one == "roofline" || one.rfind("roofline-calibrated", 0) == 0)
            << part << ": " << src;
        at = end + 1;
      }
    }
    EXPECT_NEAR(sum, l.at("layer_ms").at("total").get<double>(), 1e-9 * sum);
    // The step is the whole model: Mixtral's 32 MoE blocks, 32 attention blocks and the head
    // (no dense MLP layer); in prefill it is the time to first token.
    const double attention = l.at("attention_ms").at("ms").get<double>();
    EXPECT_GT(attention, 0.0);
    EXPECT_EQ(l.at("dense_mlp_ms").at("ms").get<double>(), 0.0);
    EXPECT_NEAR(
        step,
        l.at("moe_ms").get<double>() + 32 * attention + l.at("head_ms").at("ms").get<double>(),
        1e-9 * step);
    EXPECT_DOUBLE_EQ(l.at("ttft_ms").get<double>(), step);
    EXPECT_FALSE(l.contains("tokens_per_s_per_user"));
  }
  EXPECT_DOUBLE_EQ(j.at("workload").at("attention_context").get<double>(), 4096.0);
  const auto& excluded = layouts.back();
  EXPECT_FALSE(excluded.at("legal").get<bool>());
  EXPECT_EQ(excluded.at("ep_size").get<int>(), 16);
  EXPECT_EQ(excluded.at("rule").get<std::string>(), "num_experts % ep_size == 0: 8 % 16 = 8");
  EXPECT_EQ(j.at("recommendation").at("rank").get<int>(), 1);
  EXPECT_FALSE(j.at("recommendation").at("reasons").empty());
}

TEST(CliPlan, RunsOnEveryBundledModelAndCluster) {
  const char* models[] = {"deepseek-v2-lite",  "deepseek-v3",    "mixtral-8x7b",
                          "qwen1.5-moe-a2.7b", "qwen2-57b-a14b", "qwen3-235b-a22b",
                          "qwen3-30b-a3b"};
  const char* clusters[] = {"1x-hgx-h200", "2x-hgx-h200", "4x-hgx-h100", "16x-hgx-h200",
                            "gb200-nvl72"};
  for (const char* m : models) {
    for (const char* c : clusters) {
      // 72 GPUs (8 · 9) admit no legal ep×tp for any bundled model: the error names the GPU
      // count to use instead, and that count works.
      const std::string gpus = std::string(c) == "gb200-nvl72" ? " --gpus 64" : "";
      const auto r = run_cli(std::string("plan --top 1 --model ") + m + " --cluster " + c + gpus);
      EXPECT_EQ(r.exit_code, 0) << m << " on " << c << ": " << r.err;
      EXPECT_NE(r.out.find("\nrecommended: "), std::string::npos) << m << " on " << c;
    }
  }
  expect_one_line_error(run_cli("plan --cluster gb200-nvl72"),
                        "has no legal layout on 72 GPUs: ep1×tp72 breaks "
                        "moe_intermediate_size % tp_size == 0: 2560 % 72 = 40");
  EXPECT_NE(run_cli("plan --cluster gb200-nvl72").err.find("--gpus 64"), std::string::npos);
}

// Latency targets: the phase's own, a positive time; a layout above it does not fit, and with
// none left the plan says what to change.
// The reasons and a layout's "cannot run" name the inputs to change; the JSON spells them as
// the flags, as the text does (the library's "{ll_max_tokens}" never reaches a user).
TEST(CliPlan, JsonReasonsNameTheFlagsAsTheTextDoes) {
  const auto r = run_cli("plan --model deepseek-v3 --cluster 1x-hgx-h200 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  int cannot_run = 0;
  for (const auto& l : j.at("layouts")) {
    if (!l.contains("infeasible_reason")) continue;
    ++cannot_run;
    EXPECT_EQ(l.at("dispatcher").get<std::string>(), "deepep_ll");
    EXPECT_EQ(l.at("infeasible_reason").get<std::string>(),
              "deepep_ll: 4096 tokens per rank exceed its buffer of 128 tokens per rank (raise "
              "--ll-max-tokens)");
  }
  EXPECT_EQ(cannot_run, 1);
  const auto& reasons = j.at("recommendation").at("reasons");
  ASSERT_FALSE(reasons.empty());
  for (const auto& reason : reasons) {
    EXPECT_EQ(reason.get<std::string>().find('{'), std::string::npos) << reason;
  }
  EXPECT_NE(reasons.back().get<std::string>().find("--ll-max-tokens"), std::string::npos)
      << reasons.back();
  // The flag it names lifts the limit: the layout is no longer refused for its buffer.
  const auto raised = run_cli(
      "plan --model deepseek-v3 --cluster 1x-hgx-h200 --json "
      "--ll-max-tokens 4096");
  ASSERT_EQ(raised.exit_code, 0) << raised.err;
  const auto rj = nlohmann::json::parse(raised.out);
  for (const auto& l : rj.at("layouts")) {
    EXPECT_FALSE(l.contains("infeasible_reason")) << l.dump();
  }
  // A plan with no layout: the reason's "use more GPUs" names --gpus.
  const auto none =
      run_cli("plan --model mixtral-8x7b --cluster 1x-hgx-h200 --gpus 1 --tokens 1000000 --json");
  ASSERT_EQ(none.exit_code, 0) << none.err;
  const auto nr = nlohmann::json::parse(none.out).at("recommendation").at("reasons");
  ASSERT_EQ(nr.size(), 1U);
  EXPECT_NE(nr[0].get<std::string>().find("use more GPUs (--gpus)"), std::string::npos) << nr;
}

TEST(CliPlan, LatencyTargets) {
  expect_one_line_error(run_cli("plan --phase decode --ttft-ms 100"),
                        "--ttft-ms: a prefill target (time to first token); expected --phase "
                        "prefill, or --tpot-ms for decode");
  expect_one_line_error(run_cli("plan --tpot-ms 50"), "--tpot-ms: a decode target");
  expect_one_line_error(run_cli("plan --phase decode --tpot-ms 0"),
                        "--tpot-ms: expected a latency target in (0, 10000000] ms, got 0.000");
  const auto r = run_cli(
      "plan --model mixtral-8x7b --cluster 2x-hgx-h200 --phase decode "
      "--tokens 32 --isl 2000 --osl 500 --tpot-ms 0.01 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j.at("workload").at("tpot_target_ms").get<double>(), 0.01);
  EXPECT_DOUBLE_EQ(j.at("workload").at("attention_context").get<double>(), 2250.0);
  for (const auto& l : j.at("layouts")) {
    EXPECT_FALSE(l.at("meets_target").get<bool>());
    EXPECT_GT(l.at("tokens_per_s_per_user").get<double>(), 0.0);
    EXPECT_NEAR(l.at("tokens_per_s_per_user").get<double>() * l.at("tpot_ms").get<double>(), 1e3,
                1e-6);
  }
  EXPECT_TRUE(j.at("recommendation").at("rank").is_null());
  const auto reason = j.at("recommendation").at("reasons").at(0).get<std::string>();
  EXPECT_EQ(reason.rfind("no layout meets the time-per-output-token target of 0.010 ms: the "
                         "fastest that fits, ",
                         0),
            0U)
      << reason;
  // The table names the flags.
  const auto t = run_cli(
      "plan --model mixtral-8x7b --cluster 2x-hgx-h200 --phase decode "
      "--tokens 32 --isl 2000 --osl 500 --tpot-ms 0.01");
  EXPECT_NE(t.out.find("; raise --tpot-ms, lower the batch (--tokens), or use more GPUs (--gpus)"),
            std::string::npos)
      << t.out;
}

// --pareto: each decode batch's best layout, in the table and the JSON; decode only, not with
// --export.
TEST(CliPlan, ParetoSweep) {
  const std::string base =
      "plan --model mixtral-8x7b --cluster 1x-hgx-h200 --phase decode --isl 2000 --osl 500 ";
  const auto r = run_cli(base + "--pareto --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& pts = j.at("pareto");
  ASSERT_FALSE(pts.empty());
  EXPECT_EQ(pts[0].at("batch_per_gpu").get<int>(), 1);
  EXPECT_TRUE(pts[0].at("on_front").get<bool>());
  for (const auto& p : pts) {
    EXPECT_NEAR(p.at("tokens_per_s_per_gpu").get<double>(),
                p.at("batch_per_gpu").get<int>() * p.at("tokens_per_s_per_user").get<double>(),
                1e-9 * p.at("tokens_per_s_per_gpu").get<double>());
  }
  // --batches: those batches, ascending, each once.
  const auto given = run_cli(base + "--pareto --batches 24,3,24 --json");
  ASSERT_EQ(given.exit_code, 0) << given.err;
  const auto gj = nlohmann::json::parse(given.out);
  const auto& gp = gj.at("pareto");
  ASSERT_EQ(gp.size(), 2U);
  EXPECT_EQ(gp[0].at("batch_per_gpu").get<int>(), 3);
  EXPECT_EQ(gp[1].at("batch_per_gpu").get<int>(), 24);
  const auto t = run_cli(base + "--pareto --top 1");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("Pareto sweep over the decode batch per GPU"), std::string::npos);
  EXPECT_NE(t.out.find("batch/GPU  layout"), std::string::npos) << t.out;
  expect_one_line_error(run_cli("plan --pareto"),
                        "--pareto: the front of tokens/s/user against "
                        "tokens/s/GPU is over decode batches; expected "
                        "--phase decode");
  expect_one_line_error(run_cli(base + "--pareto --export sglang"), "drop --pareto");
}

// plan --disagg: a serving plan of the budget, golden text and JSON, and its own bad inputs.
TEST(CliPlan, DisaggregatedServing) {
  const std::string base =
      "plan --disagg --model qwen3-30b-a3b --cluster 1x-hgx-h200 --isl 1024 --osl 256 ";
  const auto r = run_cli(base);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("plan_disagg_qwen3_30b.txt", r.out);
  const auto js = run_cli(base + "--tpot-ms 20 --json");
  ASSERT_EQ(js.exit_code, 0) << js.err;
  const auto j = nlohmann::json::parse(js.out);
  EXPECT_EQ(j.at("gpu_budget"), 8);
  EXPECT_DOUBLE_EQ(j.at("tpot_target_ms").get<double>(), 20.0);
  for (const char* d : {"disaggregated", "aggregated"}) {
    if (j.at(d).is_null()) continue;
    EXPECT_LE(j.at(d).at("tpot_ms").get<double>(), 20.0) << d;
    EXPECT_LE(j.at(d).at("gpus_used").get<int>(), 8) << d;
  }
  ASSERT_FALSE(j.at("recommended").is_null());
  // Targets nothing meets: exit 0, no recommendation, the reason says what to change.
  const auto none = run_cli(base + "--tpot-ms 0.001");
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_NE(none.out.find("recommended: none"), std::string::npos) << none.out;
  EXPECT_NE(none.out.find("relax --ttft-ms/--tpot-ms"), std::string::npos) << none.out;
  expect_one_line_error(run_cli("plan --disagg --model qwen3-30b-a3b --cluster 1x-hgx-h200"),
                        "--isl: --disagg needs the request's input and output lengths");
  expect_one_line_error(run_cli(base + "--phase decode"), "drop --phase");
  expect_one_line_error(run_cli(base + "--tokens 64"), "drop --tokens");
  expect_one_line_error(run_cli(base + "--tpot-ms -1"), "--tpot-ms: expected a positive time");
  expect_one_line_error(run_cli(base + "--gpus 1"), "--gpus: a disaggregated deployment needs 2");
  // An offered rate: the fewest GPUs that serve it, at that rate, the queue stable.
  const auto offered = run_cli(base + "--rate 40 --ttft-ms 300 --json");
  ASSERT_EQ(offered.exit_code, 0) << offered.err;
  const auto o = nlohmann::json::parse(offered.out);
  EXPECT_DOUBLE_EQ(o.at("arrival_rate").get<double>(), 40.0);
  ASSERT_FALSE(o.at("recommended").is_null()) << o.at("reasons");
  const auto& rec = o.at(o.at("recommended").get<std::string>());
  EXPECT_NEAR(rec.at("requests_per_s").get<double>(), 40.0, 40.0 * 1e-12);
  EXPECT_LT(rec.at("gpus_used").get<int>(), 8);
  EXPECT_LE(rec.at("ttft_ms").get<double>(), 300.0 * (1.0 + 1e-12));
  // The decode slots below their capacity, their wait counted in the TTFT.
  if (!o.at("disaggregated").is_null()) {
    const auto& d = o.at("disaggregated");
    EXPECT_LT(d.at("decode_utilization").get<double>(), 1.0);
    EXPECT_GE(d.at("decode_slot_wait_ms").get<double>(), 0.0);
    EXPECT_LE(d.at("decode_slot_wait_ms").get<double>() + d.at("ttft_wait_ms").get<double>() +
                  d.at("prefill").at("step_ms").get<double>() +
                  d.at("kv_transfer_ms").get<double>(),
              d.at("ttft_ms").get<double>() * (1.0 + 1e-12));
  }
  const auto text = run_cli(base + "--rate 40");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("40.00 requests/s offered"), std::string::npos) << text.out;
  const auto too_many = run_cli(base + "--rate 100000");
  ASSERT_EQ(too_many.exit_code, 0) << too_many.err;
  EXPECT_NE(too_many.out.find("lower --rate"), std::string::npos) << too_many.out;
  // Long prompts, short answers: the prefill pool is the bottleneck and, at its capacity, its
  // queue is unbounded — said so (null in JSON), with what to set.
  const std::string long_prompts =
      "plan --disagg --model qwen3-30b-a3b --cluster 1x-hgx-h200 --isl 8192 --osl 16 ";
  const auto sat = run_cli(long_prompts + "--json");
  ASSERT_EQ(sat.exit_code, 0) << sat.err;
  const auto sj = nlohmann::json::parse(sat.out).at("disaggregated");
  ASSERT_FALSE(sj.is_null());
  EXPECT_DOUBLE_EQ(sj.at("prefill_utilization").get<double>(), 1.0);
  EXPECT_TRUE(sj.at("ttft_ms").is_null());
  EXPECT_TRUE(sj.at("ttft_wait_ms").is_null());
  // Short prompts, long answers: the decode pool is the bottleneck; at its capacity the wait
  // for a free slot is unbounded — said so, with what to set.
  const auto dec_sat = nlohmann::json::parse(run_cli(base + "--json").out).at("disaggregated");
  EXPECT_DOUBLE_EQ(dec_sat.at("decode_utilization").get<double>(), 1.0);
  EXPECT_TRUE(dec_sat.at("decode_slot_wait_ms").is_null());
  EXPECT_TRUE(dec_sat.at("ttft_ms").is_null());
  EXPECT_NE(r.out.find("unbounded — the decode pool's slots run at their capacity"),
            std::string::npos)
      << r.out;
  const auto sat_text = run_cli(long_prompts);
  EXPECT_NE(sat_text.out.find("unbounded — the prefill pool runs at its capacity"),
            std::string::npos)
      << sat_text.out;
  expect_one_line_error(run_cli(base + "--rate 0"),
                        "--rate: expected a positive number of requests per second, got 0.000");
  // --batches: the decode batches the serving plan sweeps (the aggregated and decode pools'
  // batch is one of them).
  const auto finer = run_cli(base + "--ttft-ms 1000 --tpot-ms 50 --batches 384,64,384 --json");
  ASSERT_EQ(finer.exit_code, 0) << finer.err;
  const auto fj = nlohmann::json::parse(finer.out);
  for (const char* d : {"aggregated"}) {
    ASSERT_FALSE(fj.at(d).is_null()) << d;
    const int b = fj.at(d).at("instance").at("sequences_per_gpu").get<int>();
    EXPECT_TRUE(b == 64 || b == 384) << b;
  }
  const int db = fj.at("disaggregated").at("decode").at("sequences_per_gpu").get<int>();
  EXPECT_TRUE(db == 64 || db == 384) << db;
  // --ttft-percentile: the target and the table's column are that percentile.
  const auto p99 = run_cli(base + "--ttft-ms 300 --ttft-percentile 99");
  ASSERT_EQ(p99.exit_code, 0) << p99.err;
  EXPECT_NE(p99.out.find("TTFT ≤ 300.0 ms at p99"), std::string::npos) << p99.out;
  EXPECT_NE(p99.out.find("TTFT p99 ms"), std::string::npos) << p99.out;
  expect_one_line_error(run_cli(base + "--ttft-percentile 100"),
                        "--ttft-percentile: expected a percentile between 0 and 100");
  expect_one_line_error(run_cli("plan --ttft-percentile 99"),
                        "--ttft-percentile: the TTFT's percentile is for serving plans");
  expect_one_line_error(run_cli(base + "--batches 0"),
                        "--batches: expected sequences per GPU from 1 to 1048576, got 0");
  expect_one_line_error(run_cli("plan --batches 8"),
                        "--batches: the decode batches to sweep are for --pareto or --disagg");
  expect_one_line_error(run_cli("plan --rate 5"),
                        "--rate: an offered request rate is for serving plans; expected --disagg");
}

TEST(CliPlan, BadInputIsOneLineAndExit2) {
  expect_one_line_error(run_cli("plan --model no-such-model"), "unknown model 'no-such-model'");
  expect_one_line_error(run_cli("plan --cluster no-such-cluster"),
                        "unknown cluster 'no-such-cluster'");
  expect_one_line_error(run_cli("plan --tokens 0"),
                        "--tokens: expected a positive number of tokens per GPU, got 0");
  expect_one_line_error(run_cli("plan --model mixtral-8x7b --cluster 4x-hgx-h100 --gpus 24"),
                        "model 'mixtral-8x7b' has no legal layout on 24 GPUs");
  expect_one_line_error(run_cli("plan --gpus 17"), "--gpus: expected 1..16");
  expect_one_line_error(run_cli("plan --phase train"),
                        "--phase: expected prefill or decode, got 'train'");
  expect_one_line_error(run_cli("plan --dispatcher deepep"),
                        "--dispatcher: expected padded_a2a, allgather, a2av, deepep_normal or "
                        "deepep_ll, got 'deepep'");
  expect_one_line_error(run_cli("plan --tbo maybe"),
                        "--tbo: expected off, on or both, got 'maybe'");
  expect_one_line_error(run_cli("plan --ll-max-tokens 0"),
                        "--ll-max-tokens: expected 1..65536 tokens per rank, got 0");
  expect_one_line_error(run_cli("plan --cluster /nonexistent/cluster.json"),
                        "/nonexistent/cluster.json: file not found");
  expect_one_line_error(run_cli("plan --osl 100"), "--osl: needs --isl");
  expect_one_line_error(run_cli("plan --phase decode --isl 100"),
                        "--osl: expected a positive number of output tokens per sequence for "
                        "decode, got 0");
  expect_one_line_error(run_cli("plan --isl 0"),
                        "--isl: expected a positive number of input tokens per sequence, got 0");
  expect_one_line_error(run_cli("plan --model qwen3-30b-a3b --isl 40000 --osl 1000"),
                        "--isl: a context of 40000 + 1000 = 41000 tokens exceeds the 40960 of "
                        "model 'qwen3-30b-a3b' (max_position_embeddings in ");
  expect_one_line_error(run_cli("plan --isl 100 --mem-fraction 0"),
                        "--mem-fraction: expected a share of the GPU's memory in (0, 1], got "
                        "0.000");
}

TEST(CliPlan, BadClusterFileNamesTheKey) {
  const auto path = std::filesystem::temp_directory_path() / "moeplan_cli_bad_cluster.json";
  std::ofstream(path) << R"({"name": "bad", "device": "h200", "nodes": 2, "gpus_per_node": 8,
    "intra_node": {"kind": "nvswitch", "bandwidth_gb_per_s": 0, "latency_us": 2}})";
  const auto r = run_cli("plan --cluster " + path.string());
  std::filesystem::remove(path);
  expect_one_line_error(r, "key 'intra_node.bandwidth_gb_per_s': expected a bandwidth > 0 GB/s");
}

TEST(CliPlan, DispatcherFilterAndOutputFile) {
  const auto path = std::filesystem::temp_directory_path() / "moeplan_cli_plan.json";
  std::filesystem::remove(path);
  const auto r = run_cli("plan --dispatcher padded_a2a --dispatcher allgather --gpus 8 --json -o " +
                         path.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.empty());
  const auto j = nlohmann::json::parse(slurp(path));
  std::filesystem::remove(path);
  EXPECT_EQ(j.at("num_gpus").get<int>(), 8);
  for (const auto& l : j.at("layouts")) {
    EXPECT_NE(l.at("dispatcher").get<std::string>(), "a2av");
  }
}

TEST(CliPlan, AttentionDpOnlyWhenAsked) {
  const auto plain = nlohmann::json::parse(run_cli("plan --gpus 8 --json").out);
  for (const auto& l : plain.at("layouts")) EXPECT_EQ(l.at("dp_size").get<int>(), 1);
  const auto r = run_cli("plan --gpus 8 --json --attention-dp --dispatcher a2av");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("attention_dp").get<bool>());
  int replicated = 0;
  for (const auto& l : j.at("layouts")) {
    const int dp = l.at("dp_size").get<int>();
    EXPECT_EQ(dp * l.at("ep_size").get<int>() * l.at("tp_size").get<int>(), 8);
    replicated += dp > 1 ? 1 : 0;
  }
  EXPECT_GT(replicated, 0);
}

TEST(CliClusters, ListAndShowGolden) {
  const auto list = run_cli("clusters list");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  expect_golden("clusters_list.txt", list.out);
  const auto show = run_cli("clusters show");
  ASSERT_EQ(show.exit_code, 0) << show.err;
  expect_golden("clusters_show_2x-hgx-h200.txt", show.out);
  expect_one_line_error(run_cli("clusters show nope"), "unknown cluster 'nope'");
}

}  // namespace
}  // namespace test_cli_plan
}  // namespace moeplan::cli_test
