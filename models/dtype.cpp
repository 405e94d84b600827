// Storage data type names.
#include "models/dtype.hpp"

namespace moeplan {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kFp32: return "fp32";
    case DType::kBf16: return "bf16";
    case DType::kFp16: return "fp16";
    case DType::kFp8: return "fp8";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  if (name == "fp32" || name == "float32" || name == "float") return DType::kFp32;
  if (name == "bf16" || name == "bfloat16") return DType::kBf16;
  if (name == "fp16" || name == "float16" || name == "half") return DType::kFp16;
  if (name == "fp8" || name == "float8_e4m3fn" || name == "e4m3") return DType::kFp8;
  return std::nullopt;
}

}  // namespace moeplan
