// The placement file `moeplan place --out` writes and the planner and exporters read: JSON with
// SGLang's key names (physical_to_logical_map, logical_to_physical_map, logical_count) plus the
// machine the placement was fit to.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/result.hpp"
#include "planner/placement/placement.hpp"

namespace moeplan::planner {

inline constexpr const char* kPlacementFormat = "moeplan-placement";
inline constexpr int kPlacementVersion = 1;

/// A placement with the machine it was fit to.
struct PlacementFile {
  PlacementResult result;      ///< maps; result.placement.ep_size is the GPU count
  PlacementConfig config;      ///< GPUs, nodes, slots, groups
  std::vector<int> layer_ids;  ///< hidden-layer index of each placement layer
  std::string load_source;     ///< the load it was fit to
};

/// The file of a placement made in this process (a plan's policy for one EP size): EP rank r on
/// node r / gpus_per_node when the ranks fill whole nodes (else one node), layers numbered from 0.
PlacementFile placement_file_of(const Placement& placement, int gpus_per_node,
                                const std::string& load_source);

/// The file's JSON: {"format", "version", "policy", "load", "num_experts", "num_gpus",
/// "num_nodes", "num_slots", "num_groups", "layer_ids", "physical_to_logical_map",
/// "logical_to_physical_map", "logical_count"}.
nlohmann::json placement_to_json(const PlacementFile& file);

/// Writes the file atomically.
Status write_placement_file(const std::filesystem::path& path, const PlacementFile& file);

/// Reads and validates a placement file: shapes, ranges, every expert placed, logical_count
/// and logical_to_physical_map consistent with physical_to_logical_map.
Result<PlacementFile> load_placement_file(const std::filesystem::path& path);

/// The same on JSON text (`source` names it in errors).
Result<PlacementFile> parse_placement_file(const std::string& text, const std::string& source);

}  // namespace moeplan::planner
