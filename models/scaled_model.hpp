// A model with its hidden and expert widths divided by a scale (expert count, top-k and routing
// kept): what `verify --scale`, `profile --scale` and `validate --scale` run, as a MoeModel the
// planner can cost.
#pragma once

#include "models/moe_model.hpp"
#include "models/result.hpp"

namespace moeplan::models {

/// Divides hidden_size, moe_intermediate_size, shared_expert_intermediate_size and
/// dense_intermediate_size by `scale`; the name gets "/S". Errors when `scale` < 1 or does not
/// divide the hidden or an expert width (the message names the model file and the width).
Result<MoeModel> scale_model(const MoeModel& model, int scale);

}  // namespace moeplan::models
