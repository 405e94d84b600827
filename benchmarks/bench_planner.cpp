// Planner sweep speed (issue 4): DeepSeek-V3 on a 128-node HGX H200 cluster, every GPU count
// 8..1024 (powers of two), every legal layout, dispatcher and rank mapping, both phases.
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "models/registry.hpp"
#include "planner/costs/cost_setup.hpp"
#include "planner/costs/roofline_costs.hpp"
#include "planner/plan.hpp"
#include "planner/serving.hpp"

namespace {

using namespace moeplan;

// The full sweep, including routing every collective over the 1024-GPU graph: each iteration
// starts with an empty collective cache.
void BM_PlannerSweepDeepSeekV3On128Nodes(benchmark::State& state) {
  const auto model = models::load_model("deepseek-v3");
  const auto cluster = planner::load_cluster("128x-hgx-h200");
  if (!model || !cluster) {
    state.SkipWithError("cannot load deepseek-v3 or 128x-hgx-h200");
    return;
  }
  std::int64_t layouts = 0;
  for (auto _ : state) {
    const planner::RooflineCosts costs(*cluster);
    layouts = 0;
    for (int gpus = 8; gpus <= 1024; gpus *= 2) {
      for (const auto phase : {planner::Phase::kPrefill, planner::Phase::kDecode}) {
        planner::PlanRequest req;
        req.num_gpus = gpus;
        req.workload = {phase, phase == planner::Phase::kPrefill
                                   ? planner::kDefaultPrefillTokensPerGpu
                                   : planner::kDefaultDecodeBatchPerGpu};
        auto plan = planner::make_plan(*model, *cluster, costs, req);
        if (!plan) {
          state.SkipWithError(plan.error().message.c_str());
          return;
        }
        layouts += static_cast<std::int64_t>(plan->layouts.size());
        benchmark::DoNotOptimize(plan);
      }
    }
  }
  state.counters["layouts"] = static_cast<double>(layouts);
}
BENCHMARK(BM_PlannerSweepDeepSeekV3On128Nodes)->Unit(benchmark::kMillisecond);

// The serving plan of issue 20 on all 1024 GPUs: DeepSeek-V3, 4096 + 1024 tokens, TTFT ≤ 2 s,
// TPOT ≤ 50 ms; every instance size 1..1024 in both phases (every legal layout of each), the
// disaggregated splits with their KV transfers routed on the cluster, and aggregated serving.
void BM_ServingPlanDeepSeekV3On1024Gpus(benchmark::State& state) {
  const auto model = models::load_model("deepseek-v3");
  const auto cluster = planner::load_cluster("128x-hgx-h200");
  if (!model || !cluster) {
    state.SkipWithError("cannot load deepseek-v3 or 128x-hgx-h200");
    return;
  }
  int plans = 0;
  for (auto _ : state) {
    const planner::RooflineCosts costs(*cluster);
    planner::ServingRequest req;
    req.base.workload.phase = planner::Phase::kDecode;
    req.base.workload.isl = 4096;
    req.base.workload.osl = 1024;
    req.ttft_target_s = 2.0;
    req.tpot_target_s = 0.05;
    auto s = planner::plan_serving(*model, *cluster, costs, req);
    if (!s || !s->disaggregated) {
      state.SkipWithError(s ? "no disaggregated deployment" : s.error().message.c_str());
      return;
    }
    plans = s->plans_costed;
    benchmark::DoNotOptimize(s);
  }
  state.counters["instance_plans"] = plans;
}
BENCHMARK(BM_ServingPlanDeepSeekV3On1024Gpus)->Unit(benchmark::kMillisecond);

// Loading the 1024-GPU cluster: JSON, graph expansion, and one BFS routing tree per GPU.
void BM_LoadCluster128Nodes(benchmark::State& state) {
  for (auto _ : state) {
    auto c = planner::load_cluster("128x-hgx-h200");
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_LoadCluster128Nodes)->Unit(benchmark::kMillisecond);

// `moeplan plan --costs DB` for DeepSeek-V3 on all 1024 GPUs (issue 16): opening the database,
// reading its points into curves, and planning with them. DB = $MOEPLAN_COSTS_DB (an imported
// GPU table, e.g. `moeplan costs import aiconfigurator --system h200_sxm --framework trtllm`);
// skipped without it.
void BM_PlanWithCostDbDeepSeekV3On1024Gpus(benchmark::State& state) {
  const char* db = std::getenv("MOEPLAN_COSTS_DB");
  if (db == nullptr || db[0] == '\0') {
    state.SkipWithError("set MOEPLAN_COSTS_DB to an imported h200 cost database");
    return;
  }
  const auto model = models::load_model("deepseek-v3");
  if (!model) {
    state.SkipWithError(model.error().message.c_str());
    return;
  }
  for (auto _ : state) {
    auto setup = planner::make_cost_setup("128x-hgx-h200", db);
    if (!setup) {
      state.SkipWithError(setup.error().message.c_str());
      return;
    }
    planner::PlanRequest req;
    auto plan = planner::make_plan(*model, *setup->cluster, setup->costs(), req);
    if (!plan) {
      state.SkipWithError(plan.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(plan);
  }
}
BENCHMARK(BM_PlanWithCostDbDeepSeekV3On1024Gpus)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
