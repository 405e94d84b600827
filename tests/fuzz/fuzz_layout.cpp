// libFuzzer target: moeplan's own layout file (plan --layout-file FILE, export --format json).
#include "planner/export.hpp"
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace moeplan;
  auto spec = planner::parse_layout_file(fuzz::as_string(data, size), "fuzz.json");
  if (!spec) return 0;
  (void)spec->num_nodes();
  (void)spec->chosen.describe();
  return 0;
}
