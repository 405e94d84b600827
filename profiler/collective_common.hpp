// What the collective op files share: the sweep over group sizes and powers-of-two message sizes
// (nccl-tests' S), and the byte pattern that makes every block's origin checkable.
#pragma once

#include <functional>
#include <memory>

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
        const double unit = g * dtype_bytes(dt);
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

/// The table of a collective op: the collective sweep, nccl-tests' bus factor, and a case made
/// by `make_case` on the group's communicator.
inline OpTable collective_table(
    const std::string& name, std::function<double(int)> bus_factor,
    std::function<std::unique_ptr<OpCase>(kernels::Communicator&, const OpPoint&, const SweepSpec&)>
        make_case) {
  OpTable t;
  t.name = name;
  t.collective = true;
  t.sweep = [name](const SweepSpec& s) { return collective_sweep(s, name); };
  t.bus_factor = std::move(bus_factor);
  t.init = [name, make_case = std::move(make_case)](
               const OpPoint& p, const SweepSpec& s, kernels::Communicator* comm,
               kernels::Backend&) -> Result<std::unique_ptr<OpCase>> {
    if (comm == nullptr) return Error{name + ": expected a communicator"};
    return make_case(*comm, p, s);
  };
  return t;
}

}  // namespace moeplan::profiler
