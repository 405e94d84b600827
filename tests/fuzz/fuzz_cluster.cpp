// libFuzzer target: a cluster JSON, compact and explicit forms (--cluster PATH, clusters show).
#include "models/json_reader.hpp"
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace moeplan;
  auto j = parse_json(fuzz::as_string(data, size), "fuzz.json");
  if (!j) return 0;
  // Compact clusters past 1024 GPUs (the largest bundled one) take seconds to route under the
  // sanitizers: they are left to the unit tests and the measurements in docs/RELIABILITY.md, so
  // that slow-but-correct inputs are not reported as hangs. Clusters past the 8192-GPU limit
  // still run: their refusal is immediate.
  if (j->is_object() && j->contains("nodes") && j->contains("gpus_per_node")) {
    const auto& nodes = j->at("nodes");
    const auto& gpn = j->at("gpus_per_node");
    if (nodes.is_number_integer() && gpn.is_number_integer()) {
      const double n = nodes.get<double>() * gpn.get<double>();
      if (n > 1024 && n <= planner::kMaxClusterGpus) return 0;
    }
  }
  auto c = planner::parse_cluster(*j, "fuzz.json");
  if (!c) return 0;
  // Route one all-to-all between the first and last GPU pairs, as the cost model does.
  const int n = c->num_gpus();
  std::vector<planner::Flow> flows{{0, n - 1, 1e6}, {n - 1, 0, 1e6}, {n / 2, 0, 1.0}};
  (void)c->route(flows);
  (void)c->path_latency(0, n - 1);
  return 0;
}
