// Bundled model configs (resources/models/NAME.json) and name-or-path resolution.
#pragma once

#include <string>
#include <vector>

#include "models/moe_model.hpp"

namespace moeplan::models {

/// The model used when none is named.
inline constexpr const char* kDefaultModel = "qwen2-57b-a14b";

/// Names of the bundled models, sorted.
std::vector<std::string> bundled_model_names();

/// Loads a bundled model by name, or a config.json by path (anything containing '/' or ending
/// in ".json"). An unknown name lists the bundled ones in its error.
Result<MoeModel> load_model(const std::string& name_or_path);

}  // namespace moeplan::models
