// The export spec: the one layout model every export format is written from (a plan's layout
// with its model, cluster, placement and predicted costs), and the fingerprints that tie it to
// the model and cluster files it was planned from.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "models/moe_model.hpp"
#include "planner/placement/placement_file.hpp"
#include "planner/plan.hpp"
#include "planner/topology/cluster.hpp"

namespace moeplan::planner {

/// "fnv1a64:<16 hex digits>" of a file's bytes: identifies the model config or cluster file the
/// plan was made from.
Result<std::string> file_fingerprint(const std::filesystem::path& path);

/// The one layout model every format is written from.
struct ExportSpec {
  std::string model;
  std::string model_source;
  std::string model_fingerprint;
  int num_hidden_layers = 0;
  std::vector<int> moe_layer_ids;  ///< hidden-layer index of each MoE layer
  int num_experts = 0;
  int top_k = 0;
  int num_attention_heads = 0;  ///< 0: unknown (a spec read from a layout file)
  int num_kv_heads = 0;         ///< 0: unknown
  /// The weight format the plan was costed at, and the checkpoint's own (its config.json's
  /// quantization_config, else torch_dtype): a framework loads the latter and can produce some
  /// formats from a plain checkpoint online (planner/export/quantization.cpp).
  WeightFormat weights;
  WeightFormat checkpoint_weights;
  std::string cluster;
  std::string cluster_source;
  std::string cluster_fingerprint;
  std::string device;
  int gpus_per_node = 1;
  std::string plan_source;
  std::string cost_source;
  std::string load_source;
  std::string cost_placement;  ///< the placement the predicted costs were computed with
  Workload workload;
  PlannedLayout chosen;
  /// Every MoE layer's slots ([moe_layer_ids.size()][num_slots]); absent: contiguous, E slots.
  std::optional<Placement> placement;
  /// The plan's other layouts in rank order, for naming the nearest expressible one.
  std::vector<PlannedLayout> alternatives;

  int num_nodes() const;  ///< nodes the layout's GPUs span
};

/// Builds the spec: checks that the model and cluster are the plan's and that a placement fits
/// the model and the layout (expert count, EP size, one layer or every MoE layer).
Result<ExportSpec> make_export_spec(const PlanSummary& plan, const PlannedLayout& chosen,
                                    const models::MoeModel& model, const Cluster& cluster,
                                    const PlacementFile* placement,
                                    const std::string& placement_source);

/// The spec of a plan's layout (`selector` as in select_layout), loading the plan's model and
/// cluster (from their recorded paths, else by name) and a placement file when
/// `placement_path` is not empty.
Result<ExportSpec> export_spec_from_plan(const PlanSummary& plan, const std::string& selector,
                                         const std::string& placement_path);

}  // namespace moeplan::planner
