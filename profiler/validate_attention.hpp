// `validate --attention`: the attention core run by the backend at shapes the cost database
// did not measure (contexts and batches between its points), timed as profile times it, and
// compared with the planner's prediction from the database and from the roofline — the check of
// the attention figures of a plan, as `validate` checks the MoE layer's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/layer_spec.hpp"
#include "models/moe_model.hpp"
#include "planner/costs/cost_setup.hpp"
#include "profiler/harness.hpp"
#include "profiler/validate.hpp"

namespace moeplan::profiler {

struct AttentionValidateOptions {
  std::string model;
  std::string costs;
  std::string dtype;  ///< "" = the model's
  std::string phases = "prefill,decode";
  /// Off the profile's grid: contexts between its 256, 1024, 4096; decode batches whose
  /// sequences × context (what decode is costed by) fall between its pair counts.
  std::string contexts = "512,2048";
  std::string batches = "3,12";
  std::string tp = "1";  ///< attention TP sizes whose per-rank heads run
  std::uint64_t seed = 20241120;
  double max_seconds = 3.0;
  std::string statistic = "median";
  std::string backend = "cpu";
  /// core: the attention core alone; block: the whole attention block (norms, projections,
  /// RoPE, core; decoder_block.hpp); layer: the block and the model's MoE layer after it, the
  /// whole decoder layer. block and layer run tp 1 on one rank.
  std::string scope = "core";
  std::string weights;  ///< layer: the MoE layer's weight format ("" = the model's)
  /// false: the cases without a cost database (`verify --attention` compares with the
  /// references only; costs is then not read).
  bool need_costs = true;
};

enum class AttentionScope : std::uint8_t { kCore, kBlock, kLayer };
std::string scope_name(AttentionScope s);  ///< "core", "block", "layer"

struct AttentionValidateCase {
  int tp = 1;
  bool decode = false;
  int tokens = 0;   ///< prefill: the prompt's tokens (= context); decode: sequences
  int context = 0;  ///< keys the last token sees
  AttentionSweepShape shape;
};

struct AttentionValidateRequest {
  models::MoeModel model;  ///< dtype set to the request's
  DType dtype = DType::kBf16;
  std::vector<AttentionValidateCase> cases;
  HarnessOptions harness;
  planner::CostStatistic statistic = planner::CostStatistic::kMedian;
  std::shared_ptr<kernels::Backend> backend;  ///< made with the request
  std::string cluster = "local:1";            ///< one rank: the core has no communication
  AttentionScope scope = AttentionScope::kCore;
  /// layer: the MoE layer's spec (scale 1, the request's dtype, the weight format).
  std::optional<kernels::LayerSpec> moe;
  /// The rotation the cases read their weights and KV cache cold through: the profile's
  /// (profiled_cold_bytes), set once the cost database is read.
  std::size_t cold_bytes = kColdBytes;
};

/// The cases; errors name the input (contexts, batches, tp, phases, ...) and say what was
/// expected: a context beyond the model's max_position_embeddings, a tp that does not split the
/// heads, a list with nothing in it.
Result<AttentionValidateRequest> make_attention_validate_request(
    const AttentionValidateOptions& options);

struct AttentionValidateRow : MeasuredCase {
  AttentionValidateCase c;
  /// From the cost database: the core's query (core), the cost model's attention block
  /// (block), the block plus the MoE layer (layer); the source counts its items' sources.
  planner::CostEstimate predicted;
  planner::CostEstimate roofline;
  /// layer: the MoE layer's routed pairs per expert on the block's output (what the
  /// prediction's expert load is).
  std::vector<double> routed;
};

/// Runs every case on the request's backend (sampled output rows checked against the double
/// reference before timing), then once more each case that had not settled (keep_steadier).
/// `progress(done, total, what)` after each; `stop` ends early.
std::vector<AttentionValidateRow> run_attention_validate(
    const AttentionValidateRequest& request,
    const std::function<void(int done, int total, const std::string& what)>& progress,
    const std::function<bool()>& stop = {});

/// The planner's figures for every row: the attention query the cost model asks
/// (planner::attention_core_query) from setup.costs() and setup.roofline.
Status add_attention_predictions(const AttentionValidateRequest& request,
                                 const planner::CostSetup& setup,
                                 std::vector<AttentionValidateRow>& rows);

/// Median and worst |error| of the verified rows, against the database and the roofline.
ValidateSummary summarize(const std::vector<AttentionValidateRow>& rows);

}  // namespace moeplan::profiler
