// An int count or index (ranks, experts, slots: ints in every interface) as a container index.
#pragma once

#include <cstddef>

namespace moeplan {

/// `v` as a std::size_t; `v` ≥ 0 (a count or an index).
inline std::size_t uz(int v) { return static_cast<std::size_t>(v); }

/// Row-major index of (r, c) in a matrix of `cols` columns.
inline std::size_t row_major(int r, int c, int cols) { return uz(r) * uz(cols) + uz(c); }

}  // namespace moeplan
