// RMSNorm and rotary position embedding (RoPE) on the CPU (the CPU backend's rms_norm and rope
// ops), the cos/sin cache RoPE reads, and their double-precision references with the bound a
// correct kernel stays within (docs/VERIFY.md, "Norms and RoPE").
#pragma once

#include <span>
#include <vector>

#include "models/dtype.hpp"

namespace moeplan::kernels {

/// out[r][c] = x[r·in_ld + c] / √(mean_c x[r·in_ld + c]² + eps) · weight[c], the sum of
/// squares and the scaling in fp32, written contiguous [rows][width] in `dtype`
/// (Backend::rms_norm; in_ld ≥ width).
void rms_norm_cpu(std::span<const float> x, int rows, int width, int in_ld,
                  std::span<const float> weight, float eps, DType dtype, std::span<float> out);

/// The cos/sin cache of RoPE as the frameworks precompute it: row p holds cos(p·θ_i) for
/// i < rot_dim/2, then sin(p·θ_i), θ_i = theta^(−2i/rot_dim), computed in double and stored in
/// fp32. rot_dim must be even.
std::vector<float> rope_cos_sin_cache(int max_positions, int rot_dim, double theta);

/// NeoX-style RoPE (Qwen, Mixtral; DeepSeek's rope dims pair neighbours instead, GPT-J style —
/// the same arithmetic and bytes on other pairs): for every row r (a token at positions[r]) and
/// head h, the first rot_dim values of the head rotate in pairs (i, i + rot_dim/2) by the
/// cache's angle, the rest are copied. Reads `in` with `in_ld` floats between
/// rows (the q or k part of a fused q/k/v projection), writes `out` contiguous [rows][heads]
/// [head_dim], stored in `dtype` (Backend::rope).
void rope_cpu(std::span<const float> in, int in_ld, int rows, int heads, int head_dim, int rot_dim,
              std::span<const int> positions, std::span<const float> cos_sin, DType dtype,
              std::span<float> out);

/// The references: the result in double from the same inputs and, per element, the largest
/// difference a correct kernel can show (fp32 arithmetic, the result stored in `dtype`).
struct ElementwiseReference {
  std::vector<double> out;
  std::vector<double> bound;
};
ElementwiseReference rms_norm_reference(std::span<const float> x, int rows, int width,
                                        std::span<const float> weight, float eps, DType dtype);
ElementwiseReference rope_reference(std::span<const float> in, int in_ld, int rows, int heads,
                                    int head_dim, int rot_dim, std::span<const int> positions,
                                    std::span<const float> cos_sin, DType dtype);

}  // namespace moeplan::kernels
