// What the collective op files share: the sweep over group sizes and powers-of-two message sizes
// (nccl-tests' S), and the byte pattern that makes every block's origin checkable.
#pragma once

#include "profiler/op_common.hpp"

namespace moeplan::profiler {

/// Byte i of the block rank `src` sends to rank `dst`.
inline std::uint8_t pattern_byte(int src, int dst, std::size_t i) {
  return static_cast<std::uint8_t>(
      (static_cast<std::size_t>(src) * 31U + static_cast<std::size_t>(dst) * 7U + i * 13U) & 0xffU);
}

/// Points of a collective: every group size, dtype and S = 2^j bytes (rounded to whole
/// elements per rank), with world/g concurrent groups.
inline std::vector<OpPoint> collective_sweep(const SweepSpec& s, const std::string& op) {
  std::vector<OpPoint> out;
  for (const int g : s.group_sizes) {
    for (const DType dt : s.dtypes) {
      double last = 0.0;
      for (const double target : powers_of_two(s.min_bytes, s.max_bytes)) {
        const double unit = g * dtype_size(dt);
        const double bytes = std::max(1.0, std::round(target / unit)) * unit;
        if (bytes == last) continue;
        last = bytes;
        OpPoint p;
        p.op = op;
        p.dtype = dt;
        p.group_size = g;
        p.bytes = bytes;
        p.m = bytes;
        p.n = static_cast<double>(s.world_size / g);
        p.shape = shape_text({{"bytes", bytes}, {"groups", p.n}, {"ranks", s.world_size}});
        out.push_back(std::move(p));
      }
    }
  }
  return out;
}

}  // namespace moeplan::profiler
