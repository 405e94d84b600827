// The small data-movement and elementwise steps of the sharded MoE layer and the CPU backend:
// packing rows into a dispatcher's wire format (the layer's host-side data movement, the same
// for every backend, which the profiler's permute op times), and the CPU backend's SiLU·mul and
// sigmoid gate.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/uninit_vector.hpp"
#include "models/dtype.hpp"

namespace moeplan::kernels {

/// Rows of `src` (`hidden` floats each) listed in `rows`, gathered and packed into the storage
/// dtype: what a dispatcher writes into its send buffer (allocated without zero-filling).
UninitVector<std::uint8_t> pack_rows(DType dtype, std::span<const float> src, int hidden,
                                     std::span<const int> rows);

/// act[r][c] = round(SiLU(round(gu[r][c])) · round(gu[r][width + c])) for `rows` rows of the
/// gate/up GEMM output gu[rows][2·width]: the CPU backend's SiLU-and-mul.
void silu_mul_rows(const float* gu, long rows, int width, DType dtype, float* act);

/// out[t] *= sigmoid(x[t] · gate) for `num_tokens` rows of `hidden`: the shared expert's gate.
void sigmoid_gate_rows(const float* x, int num_tokens, int hidden, std::span<const float> gate,
                       float* out);

}  // namespace moeplan::kernels
