// fp8 e4m3fn (OCP FP8 E4M3, "fn": no infinities, one NaN pattern per sign) conversion with
// round-to-nearest-even and saturation to ±448, and DeepSeek-V3's block-scaled quantization:
// weights in 128×128 blocks, activations in 1×128 groups, one fp32 scale each.
#pragma once

#include <cstdint>
#include <span>

namespace moeplan::kernels {

/// The largest finite e4m3fn value.
inline constexpr float kE4m3Max = 448.0F;

/// fp32 → e4m3fn bits: round to nearest, ties to even; values beyond ±448 (infinities included)
/// saturate to ±448, as NVIDIA's satfinite conversion does; NaN stays NaN (0x7f / 0xff).
std::uint8_t f32_to_e4m3(float f);

/// e4m3fn bits → fp32 (exact).
float e4m3_to_f32(std::uint8_t bits);

/// Quantizes a row-major [rows × cols] matrix in blocks of [block_rows × block_cols] (partial
/// blocks at the edges, as DeepSeek-V3's checkpoint tiles them): each block's scale is
/// amax / 448 (1 for an all-zero block) and its values e4m3(v / scale). `q` holds rows·cols
/// bytes; `scales` ⌈rows/block_rows⌉·⌈cols/block_cols⌉ floats, row-major by block.
void quantize_blocks(std::span<const float> values, int rows, int cols, int block_rows,
                     int block_cols, std::span<std::uint8_t> q, std::span<float> scales);

/// The inverse of quantize_blocks: values[i] = e4m3_to_f32(q[i]) · scale of its block.
void dequantize_blocks(std::span<const std::uint8_t> q, std::span<const float> scales, int rows,
                       int cols, int block_rows, int block_cols, std::span<float> values);

}  // namespace moeplan::kernels
