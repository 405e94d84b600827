// libFuzzer target: expert loads and top-k traces as JSON (--load FILE.json, place --trace),
// without a model and against a bundled one.
#include "planner/placement/load_io.hpp"
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace moeplan;
  const std::string text = fuzz::as_string(data, size);
  const auto& model = fuzz::bundled_model("qwen1.5-moe-a2.7b");
  (void)planner::parse_load_json(text, "fuzz.json", nullptr);
  (void)planner::parse_load_json(text, "fuzz.json", &model);
  (void)planner::parse_trace_json(text, "fuzz.json", nullptr);
  (void)planner::parse_trace_json(text, "fuzz.json", &model);
  return 0;
}
