// libFuzzer target: a Hugging Face config.json (moeplan models show PATH, --model PATH).
#include "models/model_json.hpp"
#include "models/moe_model.hpp"
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace moeplan;
  auto m = models::parse_model_config(fuzz::as_string(data, size), "fuzz.json", "fuzz");
  if (!m) return 0;
  // Every derived figure a command prints must be computable without overflow.
  (void)m->total_parameters();
  (void)m->active_parameters();
  (void)models::model_to_json(*m).dump();
  return 0;
}
