// Placement speed: DeepSeek-V3's shape (61 layers × 256 experts) onto 64 GPUs (8 nodes) with
// 64 redundant slots, EPLB hierarchical and global, and moeplan's best (fitted only, and with
// 512 sampled steps). DeepSeek's Python EPLB needs about 0.25 s for this. And the bundled
// topic trace (OLMoE's shape, 3 layers × 64 experts) on 8 GPUs in 2 nodes with 72 slots, as
// `moeplan place --trace` searches it (512 sampled steps of 1,024 tokens, the locality phase):
// the scenario of the placement benchmark furthest from issue 19's speed target.
#include <benchmark/benchmark.h>

#include "models/resources.hpp"
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

// The bundled topic trace with what `place --policy best --step-tokens 1024` gives the search.
struct TraceCase {
  ExpertLoad load;
  BestOptions best;
};

const TraceCase& topic_trace() {
  static const TraceCase c = [] {
    TraceCase t;
    auto d = moeplan::planner::read_trace_file(moeplan::resource_dir() / "loads" /
                                               "synthetic_topic_trace_olmoe_shape.json");
    if (!d.ok() || !d->trace) return t;
    t.load = d->load;
    t.best.samples = moeplan::planner::samples_by_layer(
        moeplan::planner::sample_steps(t.load, 512, 1024LL * d->trace->top_k, 0));
    t.best.coactivation = d->trace->coactivation();
    return t;
  }();
  return c;
}

// The topic trace placed on 8 GPUs in `nodes` nodes (one machine: no groups).
void best_topic_trace(benchmark::State& state, int nodes) {
  const auto& c = topic_trace();
  if (c.load.num_layers() != 3) {
    state.SkipWithError("topic trace not read");
    return;
  }
  const PlacementConfig config{.num_gpus = 8, .num_nodes = nodes, .num_slots = 72, .num_groups = 1};
  for (auto _ : state) {
    auto r = moeplan::planner::place_experts(c.load, PlacementPolicy::kBest, config, c.best);
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(r->placement.physical_to_logical.data());
  }
}
void BM_BestTopicTrace_3x64_8gpus_2nodes_72slots(benchmark::State& state) {
  best_topic_trace(state, 2);
}
BENCHMARK(BM_BestTopicTrace_3x64_8gpus_2nodes_72slots)->Unit(benchmark::kMillisecond);

// One GPU per node: the locality phase's split tables at 2^8 node sets per expert.
void BM_BestTopicTrace_3x64_8gpus_8nodes_72slots(benchmark::State& state) {
  best_topic_trace(state, 8);
}
BENCHMARK(BM_BestTopicTrace_3x64_8gpus_8nodes_72slots)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
