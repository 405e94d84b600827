// libFuzzer target: plan JSON (export --plan FILE) and layout selection on it.
#include "models/json_reader.hpp"
#include "planner/export.hpp"
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace moeplan;
  auto j = parse_json(fuzz::as_string(data, size), "fuzz.json");
  if (!j) return 0;
  auto plan = planner::parse_plan_json(*j, "fuzz.json");
  if (!plan) return 0;
  for (const char* selector : {"", "1", "2", "8x2", "1x8x2", "x", "99999999"}) {
    auto l = planner::select_layout(*plan, selector);
    if (l) (void)l->describe();
  }
  return 0;
}
