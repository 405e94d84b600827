// Human-readable numbers with units, and comma-separated lists, shared by the CLI and the GUI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moeplan {

/// 55050240 -> "52.50 MiB" (binary prefixes).
std::string format_bytes(double bytes);
/// 57408658944 -> "57.41 B" (decimal: K, M, B, T).
std::string format_count(double count);
/// 1.2e12 -> "1.20 TFLOP" (decimal prefixes on a unit).
std::string format_si(double value, const std::string& unit);
/// A number with `digits` decimals.
std::string format_fixed(double value, int digits);

/// "a,b,,c" → {"a", "b", "c"}: a comma-separated option value, empty items dropped.
std::vector<std::string> split_list(const std::string& text);

}  // namespace moeplan
