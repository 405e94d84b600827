// 4-bit weight formats as checkpoints store them, decoded when the weights are loaded (W4A16:
// the GEMMs then run at the model's dtype): int4 groups with 16-bit scales (GPTQ symmetric,
// AWQ with zero points), MXFP4 (OCP Microscaling: e2m1 values, one e8m0 scale per 32 inputs;
// gpt-oss) and NVFP4 (e2m1 values, one e4m3 scale per 16 inputs and an fp32 scale per tensor).
//
// Every weight here is an [in × out] matrix stored input-major (row r holds input r of every
// output column), as the kernels keep gate, up and down; a group is `group` consecutive inputs
// of one output column.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "models/dtype.hpp"

namespace moeplan::kernels {

/// An int4-grouped weight: codes 0..15, value = scale · (code − zero) per group.
struct Int4Groups {
  int in = 0;
  int out = 0;
  int group = 0;
  bool zero_points = false;  ///< AWQ-style asymmetric groups; false: GPTQ symmetric (zero 8)
  /// GPTQ's packing: [in / 8][out] words, input 8i + j of column c in bits 4j .. 4j + 3 of word
  /// [i][c].
  std::vector<std::uint32_t> qweight;
  std::vector<float> scales;        ///< [in / group][out], each a value of fp16 (as stored)
  std::vector<std::uint8_t> zeros;  ///< [in / group][out], 0 .. 15 (8 for every symmetric group)

  /// The code of input r, column c.
  int code(int r, int c) const;
};

/// Quantizes `w` ([in][out], input-major) in groups of `group` inputs (a divisor of `in`;
/// `in` a multiple of 8), rounding to nearest (ties to even) on the grid checkpoints store:
///   symmetric (GPTQ's quantizer): amax over the group and 0, scale = 2·amax / 15 (2/15 for
///   an all-zero group), zero 8;
///   zero_points (AWQ's pseudo_quantize_tensor): scale = max(max − min, 1e-5) / 15,
///   zero = clamp(round(−min / scale), 0, 15).
/// The scale is rounded to fp16 first and the codes are taken against it: code =
/// clamp(round(v / scale) + zero, 0, 15).
Int4Groups quantize_int4_groups(std::span<const float> w, int in, int out, int group,
                                bool zero_points);

/// The weight a W4A16 kernel computes with: scale · (code − zero) rounded to `dtype`, [in][out].
void dequantize_int4_groups(const Int4Groups& q, DType dtype, std::span<float> w);

/// fp32 → e2m1 (FP4: 1 sign, 2 exponent, 1 mantissa bits; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4,
/// 6): round to nearest, ties to the even code, saturating at ±6 as the MX spec's conversion
/// does; NaN → 0 is not defined by the format and does not occur here (asserted finite).
std::uint8_t f32_to_e2m1(float f);
/// e2m1 code (low 4 bits) → its value (exact).
float e2m1_to_f32(std::uint8_t code);

/// An MXFP4 weight: value = e2m1(code) · 2^(scale − 127) per group of 32 inputs.
struct Mxfp4Groups {
  int in = 0;
  int out = 0;
  int group = 0;
  /// [in / 2][out] bytes: input 2i of column c in the low nibble of byte [i][c], input 2i + 1
  /// in the high nibble (the nibble order of gpt-oss's `blocks`; that checkpoint stores them
  /// output-major, these are input-major like the rest of the kernels' weights).
  std::vector<std::uint8_t> codes;
  std::vector<std::uint8_t> scales;  ///< [in / group][out] e8m0 (biased exponents, 0 .. 254)

  /// The e2m1 code of input r, column c.
  int code(int r, int c) const;
};

/// Quantizes `w` ([in][out]) to MXFP4 in groups of `group` inputs (OCP MX v1.0, section 6.3):
/// shared exponent floor(log2(amax)) − 2 (2: e2m1's largest exponent), clamped to e8m0's
/// −127 .. 127 (−127 for an all-zero group); each value v / 2^exp rounded to e2m1.
Mxfp4Groups quantize_mxfp4(std::span<const float> w, int in, int out, int group);

/// The weight a W4A16 kernel computes with: e2m1 · 2^exp rounded to `dtype`, [in][out].
void dequantize_mxfp4(const Mxfp4Groups& q, DType dtype, std::span<float> w);

/// An NVFP4 weight (NVIDIA's two-level FP4, as ModelOpt quantizes checkpoints): value =
/// e2m1(code) · e4m3(block scale) · global scale, one block scale per group of 16 inputs.
struct Nvfp4Groups {
  int in = 0;
  int out = 0;
  int group = 0;
  float global_scale = 0.0F;         ///< weight_scale_2: the tensor's amax / (6 · 448), fp32
  std::vector<std::uint8_t> codes;   ///< [in / 2][out], the nibble order of Mxfp4Groups
  std::vector<std::uint8_t> scales;  ///< [in / group][out] e4m3 bits (weight_scale)

  /// The e2m1 code of input r, column c.
  int code(int r, int c) const;
};

/// Quantizes `w` ([in][out]) to NVFP4 in groups of `group` inputs, as NVIDIA ModelOpt's
/// NVFP4QTensor does: global scale g = tensor_amax / (6 · 448) (`tensor_amax` given, so that a
/// tp-slice or fused gate/up share one; 1 when zero); each group's scale e4m3(amax / 6 / g)
/// (1 for an all-zero group; saturating at 448); each value e2m1(v / (scale · g)).
Nvfp4Groups quantize_nvfp4(std::span<const float> w, int in, int out, int group, float tensor_amax);

/// The weight a W4A16 kernel computes with: e2m1 · e4m3(scale) · g rounded to `dtype`.
void dequantize_nvfp4(const Nvfp4Groups& q, DType dtype, std::span<float> w);

}  // namespace moeplan::kernels
