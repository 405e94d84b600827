// The small data-movement and elementwise steps of the sharded MoE layer and the CPU backend,
// exposed so the profiler measures the very code the layer runs (permute/pack, combine,
// SiLU·mul, the shared expert's sigmoid gate).
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

/// out[t] = round(Σ_j w[t,j] · y[pair_row[t·k + j]] + shared[t]) accumulated in fp32: the
/// layer's combine (weighted sum of expert outputs plus the shared expert). `shared` may be
/// empty.
std::vector<float> combine_rows(std::span<const float> y, std::span<const int> pair_row,
                                std::span<const float> weights, std::span<const float> shared,
                                int num_tokens, int top_k, int hidden, DType dtype);

/// act[r][c] = round(SiLU(round(gu[r][c])) · round(gu[r][width + c])) for `rows` rows of the
/// gate/up GEMM output gu[rows][2·width]: the CPU backend's SiLU-and-mul.
void silu_mul_rows(const float* gu, long rows, int width, DType dtype, float* act);

/// out[t] *= sigmoid(x[t] · gate) for `num_tokens` rows of `hidden`: the shared expert's gate.
void sigmoid_gate_rows(const float* x, int num_tokens, int hidden, std::span<const float> gate,
                       float* out);

}  // namespace moeplan::kernels
