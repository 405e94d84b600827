// moeplan's own layout file (moeplan_layout.json, the `json` export format): a typed struct,
// written with one row of the placement map per line and read back with JsonReader; writing
// what was read gives the same bytes (docs/EXPORT.md).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "planner/export/spec.hpp"

namespace moeplan::planner {

inline constexpr const char* kLayoutFormat = "moeplan-layout";
inline constexpr int kLayoutVersion = 1;

/// The sections of moeplan_layout.json, in file order.
struct LayoutFile {
  struct Model {
    std::string name;
    std::string source;
    std::string fingerprint;
    int num_hidden_layers = 0;
    std::vector<int> moe_layer_ids;
    int num_experts = 0;
    int top_k = 0;
  };
  struct ClusterRef {
    std::string name;
    std::string source;
    std::string fingerprint;
    std::string device;
    int gpus_per_node = 1;
  };
  struct PlanRef {
    std::string source;
    int rank = 0;  ///< 0: not from a ranked plan
    std::string cost_source;
    std::string expert_load;
    std::string placement;  ///< the placement the costs were computed with
  };
  struct Predicted {
    bool feasible = true;
    LayerCost layer;  ///< written as `layer_ms` and `sources`
    double step_seconds = 0.0;
    double tokens_per_s_per_gpu = 0.0;
    double memory_gib = 0.0;
    double capacity_gib = 0.0;
  };

  Model model;
  ClusterRef cluster;
  PlanRef plan;
  Workload workload;
  Layout layout;
  Predicted predicted;
  std::optional<Placement> placement;  ///< every MoE layer's slots; absent: `null`
};

/// The file of a spec, and the spec (without alternatives) of a file.
LayoutFile layout_file_of(const ExportSpec& spec);
ExportSpec spec_of(const LayoutFile& file);

/// The file's text (version 1).
std::string layout_file_text(const LayoutFile& file);
/// Reads the text; errors name `source`, the key and what was expected.
Result<LayoutFile> read_layout_file(const std::string& text, const std::string& source);

/// Reads moeplan's own layout file back into a spec (no alternatives).
Result<ExportSpec> parse_layout_file(const std::string& text, const std::string& source);
Result<ExportSpec> load_layout_file(const std::filesystem::path& path);

}  // namespace moeplan::planner
