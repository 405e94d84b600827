// libFuzzer target: placement files (plan --placement FILE, export --placement FILE).
#include "planner/placement/placement_file.hpp"
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace moeplan;
  auto p = planner::parse_placement_file(fuzz::as_string(data, size), "fuzz.json");
  if (!p) return 0;
  // What the reader accepts it must be able to write back.
  (void)planner::placement_to_json(*p).dump();
  return 0;
}
