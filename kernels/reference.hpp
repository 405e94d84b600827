// The single-device dense reference of the MoE layer, computed the straightforward way — each
// expert over the tokens routed to it with plain Eigen products, a weighted scatter-add — and
// independent of the sharded layer's permute, grouped FFN, dispatchers and communicators. With
// each output it derives the largest difference a correct sharded layer can show (see
// docs/VERIFY.md).
#pragma once

#include <span>
#include <vector>

#include "kernels/layer_spec.hpp"

namespace moeplan::kernels {

struct ReferenceOutput {
  std::vector<float> output;  ///< [T][H], values of the storage dtype
  std::vector<float> bound;   ///< [T][H]: |sharded − reference| ≤ bound for any correct layout
  /// [T][H] when asked: the bound of a dispatcher that sums partial outputs in two stages on
  /// the way back, each stored in the dtype (deepep_normal: per expert rank, per node).
  std::vector<float> bound_prereduced;
  /// [T][H] when asked: the output and bound of a dispatcher that sends the expert inputs as
  /// fp8 e4m3 with one fp32 scale per 128 values (deepep_ll): the routed experts read the
  /// inputs' quantized copy (kernels/fp8's quantize_blocks, tested on its own against exact
  /// rounding, as the router is), the router and the shared expert read x.
  std::vector<float> output_fp8_dispatch;
  std::vector<float> bound_fp8_dispatch;
};

/// Which extra bounds reference_forward derives (each costs a pass over the tokens; the fp8 one
/// a second pass through every expert).
struct ReferenceBounds {
  bool prereduced = false;
  bool fp8_dispatch = false;
};

/// One MLP (gate/up, SiLU·up, down) on rows x[m][H] with its bound: y[m][H] values of the
/// dtype as the sharded layer stores them after its TP reduction, `scale[r]` applied to row r
/// (the shared expert's sigmoid gate; empty: 1), `scale_delta[r]` the largest difference of two
/// correct evaluations of that scale.
struct MlpReference {
  std::vector<float> y;
  std::vector<double> bound;
};
MlpReference mlp_reference(std::span<const float> x, int num_rows, int hidden,
                           const ExpertWeights& w, DType dtype, std::span<const float> scale = {},
                           std::span<const double> scale_delta = {});

/// Runs the reference on x[T][H]. Routing uses the backend-independent route_token math (the
/// router is replicated, not sharded, and is tested against a naive router on its own).
ReferenceOutput reference_forward(const LayerSpec& spec, std::span<const float> x, int num_tokens,
                                  const ReferenceBounds& extra = {});

}  // namespace moeplan::kernels
