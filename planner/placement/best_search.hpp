// `best`, the placement policy that refines DeepSeek's EPLB map of one layer by local search
// (fitted maximum, then sampled steps with a significance check, then optional locality).
#pragma once

#include <vector>

#include "planner/placement/placement.hpp"

namespace moeplan::planner {

/// The `best` map of layer `l` (slot → expert, num_slots entries) from EPLB's `map` for the
/// layer's expert `counts`, with `best`'s samples and co-activation of that layer.
std::vector<int> best_layer_map(const std::vector<double>& counts, const std::vector<int>& map,
                                const PlacementConfig& config, int num_slots,
                                const BestOptions& best, int l);

}  // namespace moeplan::planner
