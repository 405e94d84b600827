// Storage rounding for bf16 and fp16 (round to nearest even), and packing float values into
// 16-bit storage for communication. Kernels accumulate in fp32 and round where a real kernel
// stores its result in the storage dtype.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "models/dtype.hpp"

namespace moeplan::kernels {

/// fp32 → bf16 bits, round to nearest even (NaN kept quiet).
inline std::uint16_t f32_to_bf16(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffU) > 0x7f800000U) return static_cast<std::uint16_t>((u >> 16) | 0x40U);
  const std::uint32_t rounding = 0x7fffU + ((u >> 16) & 1U);
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}

inline float bf16_to_f32(std::uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f = 0.0F;
  std::memcpy(&f, &u, 4);
  return f;
}

/// fp32 → IEEE fp16 bits, round to nearest even, with subnormals, overflow to inf.
std::uint16_t f32_to_f16(float f);
float f16_to_f32(std::uint16_t h);

/// Unit roundoff u of a storage dtype (half an ulp at 1.0): 2^-24, 2^-8, 2^-11, 2^-4.
double unit_roundoff(DType t);

/// Rounds one value to the nearest value representable in `t` (identity for fp32).
float round_to(DType t, float v);

/// Rounds every value in place to `t`.
void round_to(DType t, std::span<float> values);

/// Bytes of `n` values in storage dtype `t` (fp32: 4, bf16/fp16: 2).
inline std::size_t storage_bytes(DType t, std::size_t n) { return n * dtype_size(t); }

/// Packs floats (already representable in `t`) into storage bytes: out must hold
/// storage_bytes(t, n). fp8 is not a storage dtype of the CPU backend.
void pack(DType t, const float* in, std::size_t n, std::uint8_t* out);
/// Unpacks storage bytes into floats.
void unpack(DType t, const std::uint8_t* in, std::size_t n, float* out);

}  // namespace moeplan::kernels
