// Planner sweep speed (issue 4): DeepSeek-V3 on a 128-node HGX H200 cluster, every GPU count
// 8..1024 (powers of two), every legal layout, dispatcher and rank mapping, both phases.
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "models/registry.hpp"
#include "planner/costs/cost_setup.hpp"
#include "planner/costs/roofline_costs.hpp"
#include "planner/plan.hpp"

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
