// Sweeps derived from a model and a world size: the shapes the planner will ask for when it
// plans that model on that many ranks.
#pragma once

#include <optional>
#include <vector>

#include "models/moe_model.hpp"
#include "profiler/harness.hpp"

namespace moeplan::profiler {

struct SweepRequest {
  int scale = 1;       ///< widths divided by this (as verify/validate --scale)
  int world_size = 1;  ///< ranks the planner will plan for (collective group sizes, tp)
  std::vector<DType> dtypes;
  bool quick = false;      ///< powers of two only, small caps
  int max_tokens = 0;      ///< GEMM rows up to this (0: 4096, quick 512)
  double max_bytes = 0.0;  ///< message and elementwise sizes up to this (0: 64 MiB, quick 1 MiB)
};

/// The sweep for `model` (errors: a scale that does not divide a width, no legal layout on the
/// world size, fp8, caps out of range).
Result<SweepSpec> make_sweep(const models::MoeModel& model, const SweepRequest& request);

/// The attention core's shape on a rank of attention TP size `tp` (planner::attention_core_query
/// with the softmax scale of the unabsorbed head), or nothing when the model has no attention
/// heads or the split leaves the rank's query heads not a multiple of its K/V heads.
std::optional<AttentionSweepShape> attention_sweep_shape(const models::MoeModel& model, int tp,
                                                         bool decode);

/// Every point of `ops` (all ops when empty) for the sweep, in profiling order.
Result<std::vector<std::pair<const OpTable*, OpPoint>>> sweep_points(
    const SweepSpec& sweep, const std::vector<std::string>& ops);

}  // namespace moeplan::profiler
