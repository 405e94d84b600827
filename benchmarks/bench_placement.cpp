// Placement speed: DeepSeek-V3's shape (61 layers × 256 experts) onto 64 GPUs (8 nodes) with
// 64 redundant slots, EPLB hierarchical and global, and moeplan's best (fitted only, and with
// 512 sampled steps). DeepSeek's Python EPLB needs about 0.25 s for this.
#include <benchmark/benchmark.h>

#include "planner/placement/load_io.hpp"
#include "planner/placement/placement.hpp"
#include "planner/placement/placement_metrics.hpp"

namespace {

using moeplan::planner::BestOptions;
using moeplan::planner::ExpertLoad;
using moeplan::planner::PlacementConfig;
using moeplan::planner::PlacementPolicy;

const ExpertLoad& dsv3_shaped_load() {
  static const ExpertLoad load = [] {
    auto d = moeplan::planner::synthetic_load(
        "powerlaw:alpha=1.2,shuffle=1,seed=1,layers=61,experts=256,tokens=65536");
    return d.ok() ? d->load : ExpertLoad{};
  }();
  return load;
}

// groups = 8 on 8 nodes: hierarchical; groups = 1: global (EPLB's two modes).
PlacementConfig config(int groups) {
  return PlacementConfig{.num_gpus = 64, .num_nodes = 8, .num_slots = 320, .num_groups = groups};
}

void run(benchmark::State& state, PlacementPolicy policy, const BestOptions& best) {
  const auto& load = dsv3_shaped_load();
  if (load.num_layers() != 61) {
    state.SkipWithError("synthetic load failed");
    return;
  }
  const auto c = config(static_cast<int>(state.range(0)));
  double balance = 0.0;
  for (auto _ : state) {
    auto r = moeplan::planner::place_experts(load, policy, c, best);
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(r->placement.physical_to_logical.data());
    state.PauseTiming();
    auto f = moeplan::planner::balance_figures(load, r->placement);
    balance = f.ok() ? f->balancedness : 0.0;
    state.ResumeTiming();
  }
  state.counters["balancedness"] = balance;
}

void BM_Eplb_61x256_64gpus_320slots(benchmark::State& state) {
  run(state, PlacementPolicy::kEplb, {});
}
BENCHMARK(BM_Eplb_61x256_64gpus_320slots)->Arg(8)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_BestFitted_61x256_64gpus_320slots(benchmark::State& state) {
  run(state, PlacementPolicy::kBest, {});
}
BENCHMARK(BM_BestFitted_61x256_64gpus_320slots)->Arg(8)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_BestSampled_61x256_64gpus_320slots(benchmark::State& state) {
  static const BestOptions best = [] {
    BestOptions b;
    // 512 steps of 4096 tokens × top-8, as `moeplan place` draws them.
    b.samples = moeplan::planner::samples_by_layer(
        moeplan::planner::sample_steps(dsv3_shaped_load(), 512, 4096 * 8, 0));
    return b;
  }();
  run(state, PlacementPolicy::kBest, best);
}
BENCHMARK(BM_BestSampled_61x256_64gpus_320slots)
    ->Arg(8)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
