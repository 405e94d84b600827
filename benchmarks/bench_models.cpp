// Parsing speed of model configs (the GUI reparses on every selection).
#include <benchmark/benchmark.h>

#include "models/file_io.hpp"
#include "models/moe_model.hpp"
#include "models/resources.hpp"

static void BM_ParseDeepSeekV3Config(benchmark::State& state) {
  const auto text =
      moeplan::read_text_file(moeplan::resource_dir() / "models" / "deepseek-v3.json");
  if (!text) {
    state.SkipWithError(text.error().message.c_str());
    return;
  }
  for (auto _ : state) {
    auto m = moeplan::models::parse_model_config(*text, "deepseek-v3.json", "deepseek-v3");
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK(BM_ParseDeepSeekV3Config);

BENCHMARK_MAIN();
