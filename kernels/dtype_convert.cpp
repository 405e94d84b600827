// Storage rounding and packing for bf16 and fp16.
#include "kernels/dtype_convert.hpp"

#include <cmath>

namespace moeplan::kernels {

std::uint16_t f32_to_f16(float f) {
  std::uint32_t x = 0;
  std::memcpy(&x, &f, 4);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000U);
  const std::uint32_t abs = x & 0x7fffffffU;
  if (abs > 0x7f800000U) return static_cast<std::uint16_t>(sign | 0x7e00U);   // NaN
  if (abs >= 0x477ff000U) return static_cast<std::uint16_t>(sign | 0x7c00U);  // ≥ 65520: inf
  if (abs < 0x38800000U) {  // below 2^-14: subnormal or zero in fp16
    // Value = abs_f × 2^24 ulps of 2^-24; round to nearest even integer.
    float af = 0.0F;
    std::memcpy(&af, &abs, 4);
    const float scaled = af * 16777216.0F;  // exact: power-of-two scaling
    const auto q = static_cast<std::uint32_t>(std::nearbyint(scaled));
    return static_cast<std::uint16_t>(sign | q);
  }
  // Normal: rebias exponent (127 → 15), keep 10 mantissa bits, round to nearest even.
  const std::uint32_t rebased = abs - ((127U - 15U) << 23);
  const std::uint32_t rounding = 0x0fffU + ((rebased >> 13) & 1U);
  return static_cast<std::uint16_t>(sign | ((rebased + rounding) >> 13));
}

float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000U) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fU;
  const std::uint32_t mant = h & 0x3ffU;
  float out = 0.0F;
  if (exp == 0) {
    out = std::ldexp(static_cast<float>(mant), -24);
    return sign != 0 ? -out : out;
  }
  std::uint32_t bits = 0;
  if (exp == 31) {
    bits = sign | 0x7f800000U | (mant << 13);
  } else {
    bits = sign | ((exp + 112U) << 23) | (mant << 13);
  }
  std::memcpy(&out, &bits, 4);
  return out;
}

double unit_roundoff(DType t) {
  switch (t) {
    case DType::kFp32: return std::ldexp(1.0, -24);
    case DType::kBf16: return std::ldexp(1.0, -8);
    case DType::kFp16: return std::ldexp(1.0, -11);
    case DType::kFp8: return std::ldexp(1.0, -4);
  }
  return 0.0;
}

float round_to(DType t, float v) {
  switch (t) {
    case DType::kBf16: return bf16_to_f32(f32_to_bf16(v));
    case DType::kFp16: return f16_to_f32(f32_to_f16(v));
    default: return v;
  }
}

void round_to(DType t, std::span<float> values) {
  if (t == DType::kFp32) return;
  if (t == DType::kBf16) {
    for (float& v : values) v = bf16_to_f32(f32_to_bf16(v));
  } else {
    for (float& v : values) v = round_to(t, v);
  }
}

void pack(DType t, const float* in, std::size_t n, std::uint8_t* out) {
  if (t == DType::kFp32) {
    std::memcpy(out, in, n * 4);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint16_t h = t == DType::kBf16 ? f32_to_bf16(in[i]) : f32_to_f16(in[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

void unpack(DType t, const std::uint8_t* in, std::size_t n, float* out) {
  if (t == DType::kFp32) {
    std::memcpy(out, in, n * 4);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t h = 0;
    std::memcpy(&h, in + 2 * i, 2);
    out[i] = t == DType::kBf16 ? bf16_to_f32(h) : f16_to_f32(h);
  }
}

}  // namespace moeplan::kernels
