// A model's figures as labelled text rows with units, for the CLI and the GUI.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "models/moe_model.hpp"

namespace moeplan::models {

/// (label, value) rows: architecture, sizes, router semantics, bytes and FLOPs with units.
std::vector<std::pair<std::string, std::string>> model_summary(const MoeModel& m);

}  // namespace moeplan::models
