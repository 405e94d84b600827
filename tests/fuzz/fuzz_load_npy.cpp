// libFuzzer target: the binary NumPy .npy reader (--load FILE.npy, place --trace FILE.npy):
// the header grammar, the shape arithmetic and the data length.
#include "planner/placement/load_io.hpp"
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace moeplan;
  const std::string bytes = fuzz::as_string(data, size);
  (void)planner::parse_load_npy(bytes, "fuzz.npy", nullptr);
  (void)planner::parse_load_npy(bytes, "fuzz.npy", &fuzz::bundled_model("qwen1.5-moe-a2.7b"));
  (void)planner::parse_trace_npy(bytes, "fuzz.npy", nullptr);
  return 0;
}
