// Exports: one chosen layout of a plan (shape, dispatcher, rank mapping, placement, predicted
// costs, model and cluster fingerprints) written as the launch configuration of SGLang, vLLM,
// TensorRT-LLM, Megatron-Core or PaddleNLP, or as moeplan's own layout file (docs/EXPORT.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/moe_model.hpp"
#include "planner/costs/cost_model.hpp"
#include "planner/placement/placement_file.hpp"
#include "planner/plan.hpp"
#include "planner/topology/cluster.hpp"

namespace moeplan::planner {

enum class ExportFormat : std::uint8_t { kSglang, kVllm, kTrtllm, kMegatron, kPaddle, kJson };

inline constexpr ExportFormat kAllExportFormats[] = {ExportFormat::kSglang, ExportFormat::kVllm,
                                                     ExportFormat::kTrtllm, ExportFormat::kMegatron,
                                                     ExportFormat::kPaddle, ExportFormat::kJson};

/// "sglang", "vllm", "trtllm", "megatron", "paddle", "json".
std::string export_format_name(ExportFormat format);
/// The format of that name; the error lists the six.
Result<ExportFormat> parse_export_format(const std::string& name);

/// One legal layout of a plan with its predicted costs.
struct PlannedLayout {
  int rank = 0;  ///< 1-based rank in the plan
  Layout layout;
  bool feasible = true;
  LayerCost per_layer;  ///< mean per MoE layer, seconds, with each part's cost source
  double step_seconds = 0.0;
  double tokens_per_s_per_gpu = 0.0;
  double memory_gib = 0.0;    ///< per GPU, KV cache excluded
  double capacity_gib = 0.0;  ///< device HBM

  /// "rank 3: ep8×tp2 a2av tp_innermost, 1.234 ms per step".
  std::string describe() const;
};

/// The parts of a plan (docs/PLAN_SCHEMA.md) an export needs.
struct PlanSummary {
  std::string source;  ///< the plan file, or "" for a plan made in this process
  std::string model;
  std::string model_source;
  std::string cluster;
  std::string cluster_source;
  std::string device;
  std::string cost_source;
  std::string load_source;
  std::string placement_policy;  ///< the placement the costs were computed with
  int num_gpus = 0;
  Workload workload;
  std::vector<PlannedLayout> layouts;  ///< legal layouts in rank order
  int recommended = -1;                ///< index into layouts; -1 when none fits
};

/// The summary of a plan made in this process.
PlanSummary summarize_plan(const Plan& plan);
/// Reads a plan JSON (`moeplan plan --json`); errors name `source`, the key and what was expected.
Result<PlanSummary> parse_plan_json(const nlohmann::json& j, const std::string& source);
Result<PlanSummary> load_plan_file(const std::filesystem::path& path);

/// Picks a layout: "" gives the recommended one (rank 1 when none fits), "N" rank N, "EPxTP" or
/// "DPxEPxTP" the best-ranked layout of that shape. Errors say what the plan holds.
Result<PlannedLayout> select_layout(const PlanSummary& plan, const std::string& selector);

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

/// One output file.
struct ExportFile {
  std::string name;  ///< file name inside the output folder
  std::string content;
};

/// A format's files and what it could not express exactly (each warning names the nearest
/// expressible choice).
struct ExportResult {
  ExportFormat format = ExportFormat::kJson;
  std::vector<ExportFile> files;
  std::vector<std::string> warnings;
};

/// Writes `spec` in `format`. Errors: the layout's structure cannot be expressed in that
/// framework; the message names the nearest layout of the plan that can be.
Result<ExportResult> export_layout(const ExportSpec& spec, ExportFormat format);

/// All files as one text for stdout: each preceded by "# ==> NAME <==".
std::string export_to_text(const ExportResult& result);

/// Writes every file into `dir` (created if missing): all are staged first, then renamed, so
/// an error leaves none of them behind.
Status write_export(const ExportResult& result, const std::filesystem::path& dir);

inline constexpr const char* kLayoutFormat = "moeplan-layout";
inline constexpr int kLayoutVersion = 1;

/// Reads moeplan's own layout file (the `json` format) back into a spec (no alternatives).
Result<ExportSpec> parse_layout_file(const std::string& text, const std::string& source);
Result<ExportSpec> load_layout_file(const std::filesystem::path& path);

}  // namespace moeplan::planner
