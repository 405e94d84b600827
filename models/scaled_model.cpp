// Width-scaled models.
#include "models/scaled_model.hpp"

#include <algorithm>
#include <string>

namespace moeplan::models {

Result<MoeModel> scale_model(const MoeModel& m, int scale) {
  if (scale < 1)
    return input_error("scale", ": expected a positive integer, got " + std::to_string(scale));
  if (scale == 1) return m;
  struct Dim {
    const char* key;
    std::int64_t value;
  };
  const Dim dims[] = {{"hidden_size", m.hidden_size},
                      {"moe_intermediate_size", m.moe_intermediate_size},
                      {"shared_expert_intermediate_size", m.shared_expert_intermediate_size}};
  for (const auto& d : dims) {
    if (d.value % scale != 0) {
      return Error{m.source_path + ": {scale} " + std::to_string(scale) + " does not divide " +
                       d.key + "=" + std::to_string(d.value) + "; expected a divisor",
                   "scale"};
    }
  }
  MoeModel s = m;
  s.name = m.name + "/" + std::to_string(scale);
  s.hidden_size = m.hidden_size / scale;
  s.moe_intermediate_size = m.moe_intermediate_size / scale;
  s.shared_expert_intermediate_size = m.shared_expert_intermediate_size / scale;
  s.dense_intermediate_size = std::max<std::int64_t>(1, m.dense_intermediate_size / scale);
  return s;
}

}  // namespace moeplan::models
