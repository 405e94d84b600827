// Expert loads from files (SGLang's JSON, CSV, NumPy .npy; per-token top-k traces) and from
// synthetic specs (uniform, power-law, hot experts). Every error is one line naming the file
// (or spec) and what was expected.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/moe_model.hpp"
#include "models/result.hpp"
#include "planner/placement/expert_load.hpp"
#include "planner/placement/npy.hpp"
#include "planner/placement/placement_metrics.hpp"

namespace moeplan::planner {

/// A load as read: the counts summed over steps, the steps themselves when the file has them,
/// and the per-token trace when it is one.
struct LoadData {
  ExpertLoad load;             ///< [L][E], MoE layers only
  std::vector<int> layer_ids;  ///< hidden-layer index (with a model) or file row of each layer
  std::vector<std::vector<std::vector<double>>> steps;  ///< [S][L][E]; empty for [L, E] files
  std::optional<TokenTrace> trace;                      ///< per-token top-k, when given
  std::string format;  ///< "json", "csv", "npy", "trace-json", "trace-npy", "synthetic"
};

/// Reads expert counts: `.json` (SGLang's {"logical_count": [L][E] or [S][L][E]}, or a trace
/// {"topk_ids": [L][T][k]}), `.csv` (a row per layer; '#' lines are comments) or `.npy`
/// ([L, E] or [S, L, E]). With a model, rows may be one per MoE layer or one per hidden layer
/// (dense layers' rows empty or zero) and every MoE row must have the model's expert count.
Result<LoadData> read_load_file(const std::filesystem::path& path,
                                const models::MoeModel* model = nullptr);

/// Reads a per-token trace: JSON {"topk_ids": [L][T][k], "num_experts"?} or .npy [L, T, k]
/// of integers. The expert count is the model's, else "num_experts", else the largest id + 1.
Result<LoadData> read_trace_file(const std::filesystem::path& path,
                                 const models::MoeModel* model = nullptr);

/// Parsers on text already read (`source` names it in errors).
Result<LoadData> parse_load_json(const std::string& text, const std::string& source,
                                 const models::MoeModel* model = nullptr);
Result<LoadData> parse_load_csv(const std::string& text, const std::string& source,
                                const models::MoeModel* model = nullptr);
Result<LoadData> parse_load_npy(const std::string& bytes, const std::string& source,
                                const models::MoeModel* model = nullptr);
/// Trace parsers on bytes already read: JSON {"topk_ids", "num_experts"?} and .npy [L, T, k].
Result<LoadData> parse_trace_json(const std::string& text, const std::string& source,
                                  const models::MoeModel* model = nullptr);
Result<LoadData> parse_trace_npy(const std::string& bytes, const std::string& source,
                                 const models::MoeModel* model = nullptr);

/// A synthetic load from a spec `KIND[:key=value,...]`:
///   uniform                       every expert equal
///   powerlaw:alpha=A[,shuffle=1]  expert of rank r (0-based) ∝ (r + 1)^−A
///   hot:n=N,share=S[,shuffle=1]   N hot experts share S of the load, the rest split 1 − S
/// common keys: layers= (default: the model's MoE layers, else 1), experts= (default: the
/// model's), tokens= routed pairs per layer (default 65536), seed= (shuffles; default 0).
/// With shuffle=1 each layer gets its own random expert order; otherwise expert 0 is hottest.
Result<LoadData> synthetic_load(const std::string& spec, const models::MoeModel* model = nullptr);

/// A synthetic spec split into its kind and its key=value pairs (each key once).
struct SyntheticSpec {
  std::string kind;
  std::map<std::string, std::string> keys;
};
Result<SyntheticSpec> parse_synthetic_spec(const std::string& spec);

/// A load file when `file_or_spec` contains '/' or ends in .json, .csv or .npy (read_load_file),
/// else a synthetic spec (synthetic_load). What `plan --load` and moeplan-gui's load field take.
Result<LoadData> load_file_or_spec(const std::string& file_or_spec,
                                   const models::MoeModel* model = nullptr);

}  // namespace moeplan::planner
