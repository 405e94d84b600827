// The whole sharded MoE layer as a measured op (what `validate` compares the planner against):
// one layout, dispatcher and token count on every rank of the world, verified against the dense
// reference before it is timed.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "kernels/moe_layer.hpp"
#include "profiler/harness.hpp"

namespace moeplan::profiler {

/// Routed (token, expert) pairs per expert when the layer routes its `num_tokens` inputs: the
/// expert load the layer really sees (every rank computes the same counts).
std::vector<double> routed_counts(const kernels::LayerSpec& spec, int num_tokens);
/// The same for the inputs x[num_tokens][H] (a decoder layer's normed attention output).
std::vector<double> routed_counts_of(const kernels::LayerSpec& spec, std::span<const float> x,
                                     int num_tokens);

/// Bytes of a rank's MoE weights: router, score bias, shared gate, every local expert's and the
/// shared expert's matrices (fp32, or fp8 codes with their scales).
std::size_t weight_bytes(const kernels::RankWeights& w);

struct LayerMeasurement {
  Measurement measurement;  ///< the slowest rank's layer time per repetition
  /// Copies of this rank's weights the runs took in turn, so each run read its weights cold as
  /// a step of a many-layer model does (enough to exceed `cold_bytes`, at most 64; 1 on a device
  /// backend, whose weights live on the device).
  int copies = 1;
  kernels::PhaseTimes phases;  ///< this rank's phases of the last repetition
  /// Why the backend ran a stand-in for one of the layer's kernels while it was measured (the
  /// CUDA backend's fp8 GEMM emulated in fp32; Backend::fallbacks): the time is not the
  /// kernels'. Empty when every call ran the backend's own kernel.
  std::string stand_in;
};

/// Measures the layer with the layout's dispatcher collectively on `world`
/// (layout.group_size() == world.size()); the DeepEP dispatchers with `dispatch`'s node grouping
/// and buffer. The layer's ops run on `backend` (null: a CPU backend of its own); one with a
/// device clock times them (the layer's kernels: host copies, packing and the communicator's
/// work are left out). On the CPU the runs take copies of the rank's weights in turn that
/// together exceed `cold_bytes` (the profile's rotation, SweepSpec::cold_bytes).
LayerMeasurement measure_layer(kernels::Communicator& world, const kernels::LayerSpec& spec,
                               const kernels::Layout& layout, int num_tokens,
                               const HarnessOptions& options, bool inject_fault = false,
                               const kernels::DispatchOptions& dispatch = {},
                               kernels::Backend* backend = nullptr,
                               std::size_t cold_bytes = kColdBytes);

}  // namespace moeplan::profiler
