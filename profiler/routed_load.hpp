// "routed" synthetic expert loads: random hidden states through the model's own router (the
// kernels' router op with its real semantics: softmax or sigmoid scoring, group-limited and
// bias-corrected top-k), so group limits show their effect on the load.
#pragma once

#include <string>

#include "models/moe_model.hpp"
#include "planner/placement/load_io.hpp"

namespace moeplan::profiler {

/// Spec `routed[:tokens=T,seed=S,layers=L]`: T hidden states uniform in [-1, 1) (default 1024,
/// drawn from seed, default 0) through each MoE layer's router, whose weights are drawn from
/// seed + layer (layers default to the model's MoE layers). Counts are the (token, expert)
/// selections.
Result<planner::LoadData> routed_load(const std::string& spec, const models::MoeModel& model);

/// True when `spec` names a routed load (its kind is "routed").
bool is_routed_spec(const std::string& spec);

/// Any load a user can name, for every front end (`plan --load`, moeplan-gui's load field): a
/// routed spec (needs `model`), else planner::load_file_or_spec (a file or a synthetic spec).
Result<planner::LoadData> load_any(const std::string& file_or_spec, const models::MoeModel* model);

/// A synthetic spec (`place --synthetic`): routed (needs `model`), else planner::synthetic_load.
Result<planner::LoadData> synthetic_any(const std::string& spec, const models::MoeModel* model);

}  // namespace moeplan::profiler
