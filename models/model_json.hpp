// MoeModel as JSON: every parsed field and the derived figures, for `models show --json`,
// plan files and the GUI.
#pragma once

#include <nlohmann/json.hpp>

#include "models/moe_model.hpp"

namespace moeplan::models {

/// The parsed fields and derived figures (bytes in the model's dtype).
nlohmann::json model_to_json(const MoeModel& m);

}  // namespace moeplan::models
