// What the collective op files share: the sweep over group sizes and powers-of-two message sizes
// (nccl-tests' S), and the byte pattern that makes every block's origin checkable.
#pragma once

#include <functional>
#include <memory>

#include "kernels/communicator.hpp"
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

/// The case of collective `op` (all_reduce, all_gather[_v], all_to_all[_v], reduce_scatter) at
/// `p` on the device memory of `comm`'s group (op_device_collective.cpp): the host case's
/// pattern and check, the collective enqueued by run() and waited for by settle().
Result<std::unique_ptr<OpCase>> device_collective_case(const std::string& op,
                                                       kernels::Communicator& comm,
                                                       kernels::DeviceCollectives& dev,
                                                       const OpPoint& p);

/// The table of a collective op: the collective sweep, nccl-tests' bus factor, and a case made
/// by `make_case` on the group's communicator — or, where the group's collectives run on a
/// device (NCCL), the device case of the op.
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
    if (kernels::DeviceCollectives* dev = comm->device_collectives(); dev != nullptr) {
      return device_collective_case(name, *comm, *dev, p);
    }
    return make_case(*comm, p, s);
  };
  return t;
}

}  // namespace moeplan::profiler
