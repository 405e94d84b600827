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
/// 0.0123 s -> "12.300 ms".
std::string format_ms(double seconds);
/// 3.2e9 bytes -> "2.98 GiB" (always in GiB, as memory per GPU is shown).
std::string format_gib(double bytes);

/// "a,b,,c" → {"a", "b", "c"}: a comma-separated option value, empty items dropped.
std::vector<std::string> split_list(const std::string& text);

}  // namespace moeplan
