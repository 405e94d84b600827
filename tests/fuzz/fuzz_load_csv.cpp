// libFuzzer target: expert loads as CSV (--load FILE.csv), without a model and against a bundled
// one.
#include "planner/placement/load_io.hpp"
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace moeplan;
  const std::string text = fuzz::as_string(data, size);
  (void)planner::parse_load_csv(text, "fuzz.csv", nullptr);
  (void)planner::parse_load_csv(text, "fuzz.csv", &fuzz::bundled_model("qwen1.5-moe-a2.7b"));
  return 0;
}
