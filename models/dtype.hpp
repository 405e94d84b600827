// Storage data types moeplan knows, with their sizes and names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace moeplan {

enum class DType : std::uint8_t { kFp32, kBf16, kFp16, kFp8 };

/// Bytes per element of a storage dtype.
constexpr double dtype_bytes(DType t) {
  switch (t) {
    case DType::kFp32: return 4.0;
    case DType::kBf16: return 2.0;
    case DType::kFp16: return 2.0;
    case DType::kFp8: return 1.0;
  }
  return 0.0;
}

/// Bytes per element as a size (for buffer arithmetic).
constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFp32: return 4;
    case DType::kBf16: return 2;
    case DType::kFp16: return 2;
    case DType::kFp8: return 1;
  }
  return 0;
}

/// Canonical short name: "fp32", "bf16", "fp16", "fp8".
std::string_view dtype_name(DType t);

/// Parses "fp32"/"float32", "bf16"/"bfloat16", "fp16"/"float16", "fp8"/"float8_e4m3fn".
std::optional<DType> parse_dtype(std::string_view name);

}  // namespace moeplan
