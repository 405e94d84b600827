// libFuzzer target: a cluster JSON, compact and explicit forms (--cluster PATH, clusters show).
#include "models/json_reader.hpp"
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace moeplan;
  auto j = parse_json(fuzz::as_string(data, size), "fuzz.json");
  if (!j) return 0;
  auto c = planner::parse_cluster(*j, "fuzz.json");
  if (!c) return 0;
  // Route one all-to-all between the first and last GPU pairs, as the cost model does.
  const int n = c->num_gpus();
  std::vector<planner::Flow> flows{{0, n - 1, 1e6}, {n - 1, 0, 1e6}, {n / 2, 0, 1.0}};
  (void)c->route(flows);
  (void)c->path_latency(0, n - 1);
  return 0;
}
