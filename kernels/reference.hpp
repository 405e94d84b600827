// The single-device dense reference of the MoE layer, computed the straightforward way — each
// expert over the tokens routed to it with plain Eigen products, a weighted scatter-add — and
// independent of the sharded layer's permute, grouped FFN, dispatchers and communicators. With
// each output it derives the largest difference a correct sharded layer can show (see
// docs/VERIFY.md).
#pragma once

#include <span>
#include <vector>

#include "kernels/layer_spec.hpp"
#include "models/layout.hpp"

namespace moeplan::kernels {

class Backend;

struct ReferenceOutput {
  std::vector<float> output;  ///< [T][H], values of the storage dtype
  std::vector<float> bound;   ///< [T][H]: |sharded − reference| ≤ bound for any correct layout
  /// [T][H] when asked (ReferenceBounds::fp8_inputs): the output and bound of the DeepEP
  /// dispatchers, which send the expert inputs as fp8 e4m3 with one fp32 scale per 128 values:
  /// the routed experts read the inputs' quantized copy (kernels/fp8's quantize_blocks, tested on
  /// its own against exact rounding, as the router is), the router and the shared expert read x.
  std::vector<float> output_fp8_inputs;
  std::vector<float> bound_fp8_inputs;  ///< deepep_ll: the combine sums the k outputs
  /// deepep_normal: the way back also stores two stages of partial sums in the dtype (per expert
  /// rank, per node).
  std::vector<float> bound_fp8_inputs_prereduced;
};

/// Which extra outputs reference_forward derives (a second pass through every routed expert).
struct ReferenceBounds {
  bool fp8_inputs = false;
  /// The tp size of the layouts the output is for: with per-token fp8 activations each rank
  /// quantizes its tp-slice of a row of the down projection's input with its own scale, so the
  /// reference depends on it (ref_tp_slices); otherwise any.
  int tp_slices = 1;
  /// The fp8 expert GEMMs' accumulation beyond fp32 (Backend::fp8_accumulation of the backend
  /// checked), added to the bounds of both GEMMs of every fp8 expert.
  Fp8Accumulation fp8_accumulation{};
};

/// How `backend`'s fp8 GEMMs accumulate for the weight format of `s` (Backend::fp8_accumulation
/// with its activation quantization and, for block scales, its blocks); none without fp8.
Fp8Accumulation fp8_accumulation_of(const Backend& backend, const LayerSpec& s);

/// The tp_slices a reference of `s` must be made with for layouts of tp size `tp`: `tp` with
/// per-token fp8 activations, else 1 (one reference serves every layout).
int ref_tp_slices(const LayerSpec& s, int tp);

/// Whether a layer of `s` with dispatcher `d` sends the expert inputs as fp8 e4m3 with one fp32
/// scale per 128 values: the DeepEP dispatchers always, every dispatcher when the weights are
/// fp8 (their GEMMs take fp8 inputs; kernels/moe_layer.cpp's Payload).
bool sends_fp8(const LayerSpec& s, models::Dispatcher d);

/// What a layer of `s` with dispatcher `d` must match (the fp8-input output when it sends fp8)
/// and its bound; those need reference_forward with fp8_inputs.
const std::vector<float>& reference_of(const ReferenceOutput& ref, const LayerSpec& s,
                                       models::Dispatcher d);
const std::vector<float>& bound_of(const ReferenceOutput& ref, const LayerSpec& s,
                                   models::Dispatcher d);

/// One MLP (gate/up, SiLU·up, down) on rows x[m][H] with its bound: y[m][H] values of the
/// dtype as the sharded layer stores them after its TP reduction, `scale[r]` applied to row r
/// (the shared expert's sigmoid gate; empty: 1), `scale_delta[r]` the largest difference of two
/// correct evaluations of that scale.
struct MlpReference {
  std::vector<float> y;
  std::vector<double> bound;
};
/// `fp8_acc`: the fp8 GEMMs' accumulation beyond fp32 of the backend checked.
MlpReference mlp_reference(std::span<const float> x, int num_rows, int hidden,
                           const ExpertWeights& w, DType dtype, std::span<const float> scale = {},
                           std::span<const double> scale_delta = {},
                           const Fp8Accumulation& fp8_acc = {});

/// Runs the reference on x[T][H]. Routing uses the backend-independent route_token math (the
/// router is replicated, not sharded, and is tested against a naive router on its own).
ReferenceOutput reference_forward(const LayerSpec& spec, std::span<const float> x, int num_tokens,
                                  const ReferenceBounds& extra = {});

}  // namespace moeplan::kernels
