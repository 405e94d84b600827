// Planner sweep speed (issue 4): DeepSeek-V3 on a 128-node HGX H200 cluster, every GPU count
// 8..1024 (powers of two), every legal layout, dispatcher and rank mapping, both phases.
#include <benchmark/benchmark.h>

#include "models/registry.hpp"
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

}  // namespace

BENCHMARK_MAIN();
