// int4 groups, MXFP4 and NVFP4: quantization as checkpoints store them, decoding on load.
#include "kernels/four_bit.hpp"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <utility>

#include "kernels/dtype_convert.hpp"
#include "kernels/fp8.hpp"
#include "models/index.hpp"

namespace moeplan::kernels {

namespace {

constexpr std::array<float, 8> kE2m1 = {0.0F, 0.5F, 1.0F, 1.5F, 2.0F, 3.0F, 4.0F, 6.0F};

}  // namespace

int Int4Groups::code(int r, int c) const {
  const std::uint32_t word = qweight[row_major(r / 8, c, out)];
  return static_cast<int>((word >> (4 * (r % 8))) & 0xfU);
}

Int4Groups quantize_int4_groups(std::span<const float> w, int in, int out, int group,
                                bool zero_points) {
  assert(group > 0 && in % group == 0 && in % 8 == 0);
  assert(w.size() == static_cast<std::size_t>(in) * static_cast<std::size_t>(out));
  Int4Groups q;
  q.in = in;
  q.out = out;
  q.group = group;
  q.zero_points = zero_points;
  const int groups = in / group;
  q.qweight.assign(static_cast<std::size_t>(in / 8) * static_cast<std::size_t>(out), 0U);
  q.scales.assign(static_cast<std::size_t>(groups) * static_cast<std::size_t>(out), 0.0F);
  q.zeros.assign(q.scales.size(), 8);
  for (int g = 0; g < groups; ++g) {
    for (int c = 0; c < out; ++c) {
      float lo = 0.0F;
      float hi = 0.0F;
      if (zero_points) {
        lo = hi = w[row_major(g * group, c, out)];
      }
      for (int r = g * group; r < (g + 1) * group; ++r) {
        lo = std::min(lo, w[row_major(r, c, out)]);
        hi = std::max(hi, w[row_major(r, c, out)]);
      }
      float scale = 0.0F;
      int zero = 8;
      if (zero_points) {
        scale = round_to(DType::kFp16, std::max(hi - lo, 1e-5F) / 15.0F);
        zero = std::clamp(static_cast<int>(std::nearbyint(-lo / scale)), 0, 15);
      } else {
        const float amax = std::max(-lo, hi);
        scale = round_to(DType::kFp16, amax > 0.0F ? 2.0F * amax / 15.0F : 2.0F / 15.0F);
      }
      q.scales[row_major(g, c, out)] = scale;
      q.zeros[row_major(g, c, out)] = static_cast<std::uint8_t>(zero);
      for (int r = g * group; r < (g + 1) * group; ++r) {
        const int code = std::clamp(
            static_cast<int>(std::nearbyint(w[row_major(r, c, out)] / scale)) + zero, 0, 15);
        q.qweight[row_major(r / 8, c, out)] |= static_cast<std::uint32_t>(code) << (4 * (r % 8));
      }
    }
  }
  return q;
}

void dequantize_int4_groups(const Int4Groups& q, DType dtype, std::span<float> w) {
  assert(w.size() == static_cast<std::size_t>(q.in) * static_cast<std::size_t>(q.out));
  for (int r = 0; r < q.in; ++r) {
    const int g = r / q.group;
    for (int c = 0; c < q.out; ++c) {
      const float scale = q.scales[row_major(g, c, q.out)];
      const int zero = q.zeros[row_major(g, c, q.out)];
      w[row_major(r, c, q.out)] = round_to(dtype, scale * static_cast<float>(q.code(r, c) - zero));
    }
  }
}

std::uint8_t f32_to_e2m1(float f) {
  assert(std::isfinite(f));
  const std::uint8_t sign = std::signbit(f) ? 0x8U : 0x0U;
  const float a = std::fabs(f);
  std::uint8_t code = 7;  // ≥ 6 saturates
  for (std::uint8_t i = 0; i < 7; ++i) {
    const float mid = 0.5F * (kE2m1[i] + kE2m1[i + 1]);  // exact: both have few bits
    if (a < mid) {
      code = i;
      break;
    }
    if (a == mid) {
      code = (i % 2 == 0) ? i : static_cast<std::uint8_t>(i + 1);  // ties to the even code
      break;
    }
  }
  return static_cast<std::uint8_t>(sign | code);
}

float e2m1_to_f32(std::uint8_t code) {
  const float v = kE2m1[code & 0x7U];
  return (code & 0x8U) != 0 ? -v : v;
}

namespace {

// The e2m1 code of input r, column c of [in / 2][out] packed bytes (input 2i in the low nibble,
// 2i + 1 in the high one).
int packed_code(const std::vector<std::uint8_t>& codes, int out, int r, int c) {
  const std::uint8_t byte = codes[row_major(r / 2, c, out)];
  return (r % 2 == 0) ? (byte & 0xf) : (byte >> 4);
}

// Quantizes w [in][out] to e2m1 in groups of `group` inputs of a column: `scale_of(amax)` gives
// the group's stored scale byte and the value its inputs are divided by before rounding.
template <class ScaleOf>
void quantize_fp4_groups(std::span<const float> w, int in, int out, int group,
                         std::vector<std::uint8_t>& codes, std::vector<std::uint8_t>& scales,
                         ScaleOf scale_of) {
  assert(group > 0 && in % group == 0 && in % 2 == 0);
  assert(w.size() == static_cast<std::size_t>(in) * static_cast<std::size_t>(out));
  const int groups = in / group;
  codes.assign(static_cast<std::size_t>(in / 2) * static_cast<std::size_t>(out), 0);
  scales.assign(static_cast<std::size_t>(groups) * static_cast<std::size_t>(out), 0);
  for (int g = 0; g < groups; ++g) {
    for (int c = 0; c < out; ++c) {
      float amax = 0.0F;
      for (int r = g * group; r < (g + 1) * group; ++r) {
        amax = std::max(amax, std::fabs(w[row_major(r, c, out)]));
      }
      const auto [scale_byte, divisor] = scale_of(amax);
      scales[row_major(g, c, out)] = scale_byte;
      for (int r = g * group; r < (g + 1) * group; ++r) {
        const std::uint8_t code =
            f32_to_e2m1(divisor > 0.0F ? w[row_major(r, c, out)] / divisor : 0.0F);
        codes[row_major(r / 2, c, out)] |= static_cast<std::uint8_t>(code << (4 * (r % 2)));
      }
    }
  }
}

}  // namespace

int Mxfp4Groups::code(int r, int c) const { return packed_code(codes, out, r, c); }

Mxfp4Groups quantize_mxfp4(std::span<const float> w, int in, int out, int group) {
  Mxfp4Groups q;
  q.in = in;
  q.out = out;
  q.group = group;
  quantize_fp4_groups(w, in, out, group, q.codes, q.scales, [](float amax) {
    int e = -127;
    if (amax > 0.0F) {
      int ex = 0;
      (void)std::frexp(amax, &ex);  // amax = m · 2^ex, m in [0.5, 1): floor(log2 amax) = ex − 1
      e = std::clamp(ex - 1 - 2, -127, 127);
    }
    // v / 2^e is exact (a power of two), as ldexp(v, −e) is.
    return std::pair{static_cast<std::uint8_t>(e + 127), std::ldexp(1.0F, e)};
  });
  return q;
}

void dequantize_mxfp4(const Mxfp4Groups& q, DType dtype, std::span<float> w) {
  assert(w.size() == static_cast<std::size_t>(q.in) * static_cast<std::size_t>(q.out));
  for (int r = 0; r < q.in; ++r) {
    const int g = r / q.group;
    for (int c = 0; c < q.out; ++c) {
      const int e = static_cast<int>(q.scales[row_major(g, c, q.out)]) - 127;
      w[row_major(r, c, q.out)] =
          round_to(dtype, std::ldexp(e2m1_to_f32(static_cast<std::uint8_t>(q.code(r, c))), e));
    }
  }
}

int Nvfp4Groups::code(int r, int c) const { return packed_code(codes, out, r, c); }

Nvfp4Groups quantize_nvfp4(std::span<const float> w, int in, int out, int group,
                           float tensor_amax) {
  Nvfp4Groups q;
  q.in = in;
  q.out = out;
  q.group = group;
  q.global_scale = tensor_amax > 0.0F ? tensor_amax / (6.0F * kE4m3Max) : 1.0F;
  const float g = q.global_scale;
  quantize_fp4_groups(w, in, out, group, q.codes, q.scales, [g](float amax) {
    const float block = amax / 6.0F;
    const std::uint8_t bits = f32_to_e4m3(block > 0.0F ? block / g : 1.0F);
    return std::pair{bits, e4m3_to_f32(bits) * g};
  });
  return q;
}

void dequantize_nvfp4(const Nvfp4Groups& q, DType dtype, std::span<float> w) {
  assert(w.size() == static_cast<std::size_t>(q.in) * static_cast<std::size_t>(q.out));
  for (int r = 0; r < q.in; ++r) {
    const int g = r / q.group;
    for (int c = 0; c < q.out; ++c) {
      const float scale = e4m3_to_f32(q.scales[row_major(g, c, q.out)]) * q.global_scale;
      w[row_major(r, c, q.out)] =
          round_to(dtype, e2m1_to_f32(static_cast<std::uint8_t>(q.code(r, c))) * scale);
    }
  }
}

}  // namespace moeplan::kernels
