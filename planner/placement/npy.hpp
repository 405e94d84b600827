// NumPy .npy arrays as expert loads and top-k traces come in: a strict reader of format
// versions 1.0, 2.0 and 3.0 for little-endian int32/int64/float32/float64 in C order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/result.hpp"

namespace moeplan::planner {

/// A NumPy array: values as doubles, with its shape.
struct NpyArray {
  std::vector<std::int64_t> shape;
  std::vector<double> values;
  bool integer = false;
};

/// Parses .npy bytes (format versions 1.0, 2.0, 3.0); the header dict must hold exactly
/// 'descr', 'fortran_order' (False) and 'shape', and the data must fill the rest exactly.
/// Errors name `source`.
Result<NpyArray> parse_npy(const std::string& bytes, const std::string& source);

}  // namespace moeplan::planner
