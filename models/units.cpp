// Human-readable numbers with units, and comma-separated lists.
#include "models/units.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace moeplan {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string format_fixed(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, value);
  return buf;
}

std::string format_bytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  double v = bytes;
  while (std::fabs(v) >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? format_fixed(v, 0) + " B" : format_fixed(v, 2) + " " + kUnits[u];
}

std::string format_ms(double seconds) { return format_fixed(seconds * 1e3, 3) + " ms"; }

std::string format_gib(double bytes) {
  return format_fixed(bytes / (1024.0 * 1024.0 * 1024.0), 2) + " GiB";
}

std::string format_count(double count) {
  static const char* const kUnits[] = {"", " K", " M", " B", " T"};
  int u = 0;
  double v = count;
  while (std::fabs(v) >= 1000.0 && u < 4) {
    v /= 1000.0;
    ++u;
  }
  return u == 0 ? format_fixed(v, 0) : format_fixed(v, 2) + kUnits[u];
}

std::string format_si(double value, const std::string& unit) {
  static const char* const kPrefixes[] = {"", "K", "M", "G", "T", "P", "E"};
  int u = 0;
  double v = value;
  while (std::fabs(v) >= 1000.0 && u < 6) {
    v /= 1000.0;
    ++u;
  }
  return format_fixed(v, 2) + " " + kPrefixes[u] + unit;
}

}  // namespace moeplan
