// Helpers shared by the op files: deterministic data in a storage dtype, shape text, the size
// sweeps of elementwise ops and collectives.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/dtype_convert.hpp"
#include "kernels/layer_spec.hpp"
#include "profiler/harness.hpp"

namespace moeplan::profiler {

inline std::size_t usz(long v) { return static_cast<std::size_t>(v); }

/// How many copies of a `bytes` operand make a rotation cold: their total exceeds `cold_bytes`
/// (SweepSpec::cold_bytes; 1 when one copy already does; at most `cap`).
inline std::size_t cold_copies(std::size_t bytes, std::size_t cap, std::size_t cold_bytes) {
  if (bytes == 0) return 1;
  const std::size_t n = cold_bytes / bytes + 1;
  return n < 1 ? 1 : (n > cap ? cap : n);
}

/// n values uniform in [lo, hi), representable in `dtype`, from (seed, stream).
inline std::vector<float> random_values(DType dtype, std::size_t n, std::uint32_t stream,
                                        float lo = -1.0F, float hi = 1.0F) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float u = 0.5F * (kernels::uniform_value(0x70726f66ULL, stream, i) + 1.0F);
    v[i] = kernels::round_to(dtype, lo + (hi - lo) * u);
  }
  return v;
}

/// "key=value,..." with integers printed exactly.
inline std::string shape_text(std::initializer_list<std::pair<const char*, double>> items) {
  std::string s;
  for (const auto& [k, v] : items) {
    if (!s.empty()) s += ",";
    s += k;
    s += "=";
    s += std::to_string(std::llround(v));
  }
  return s;
}

/// Elementwise sweep: for every dtype and power-of-two byte target, `units(target, dtype)` whole
/// units (rows, tokens, elements) of `unit_bytes(dtype)` bytes each; duplicates dropped.
template <class MakePoint>
std::vector<OpPoint> byte_sweep(const SweepSpec& s, double (*unit_bytes)(const SweepSpec&, DType),
                                MakePoint make) {
  std::vector<OpPoint> out;
  for (const DType dt : s.dtypes) {
    long last = 0;
    for (const double target : powers_of_two(s.min_bytes, s.max_bytes)) {
      const long units = std::max(1L, std::lround(target / unit_bytes(s, dt)));
      if (units == last) continue;
      last = units;
      out.push_back(make(dt, units));
    }
  }
  return out;
}

/// Tolerance of an fp32 sum of `terms` products then stored in `dtype`: accumulation error
/// (terms · u32 · Σ|term|) plus the storage rounding of the result.
inline double sum_tolerance(DType dtype, int terms, double sum_abs, double ref) {
  const double u32 = std::ldexp(1.0, -24);
  const double acc = terms * u32 * sum_abs;
  return acc + kernels::unit_roundoff(dtype) * (std::abs(ref) + acc) + 1e-30;
}

/// The backend's can_implement for `op` on `dtype`, as an op's init reports it (not supported).
inline Status backend_supports(const kernels::Backend& backend, kernels::BackendOp op,
                               DType dtype) {
  return backend.can_implement({op, dtype});
}

}  // namespace moeplan::profiler
