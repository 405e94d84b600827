// Typed, validated access to JSON keys.
#include "models/json_reader.hpp"

#include <cmath>
#include <sstream>

namespace moeplan {

Result<nlohmann::json> parse_json(const std::string& text, const std::string& source) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return Error{source + ": empty file, expected a JSON document"};
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    return Error{source + ": invalid JSON at byte " + std::to_string(e.byte) + ": " +
                 std::string(e.what()).substr(std::string(e.what()).find(':') + 2)};
  } catch (const nlohmann::json::exception& e) {
    // out_of_range 406: a number literal past double's range ("1e400"); found by fuzz_model_config.
    const std::string what = e.what();
    const auto at = what.find("] ");
    return Error{source +
                 ": invalid JSON: " + (at == std::string::npos ? what : what.substr(at + 2)) +
                 ", expected numbers within ±1.8e308"};
  }
}

Result<nlohmann::json> load_json_file(const std::filesystem::path& path) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  return parse_json(*text, path.string());
}

std::string describe_json(const nlohmann::json& v) {
  std::string dump = v.dump();
  if (dump.size() > 40) dump = dump.substr(0, 37) + "...";
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::string: return "string " + dump;
    case nlohmann::json::value_t::boolean: return "boolean " + dump;
    case nlohmann::json::value_t::array: return "array " + dump;
    case nlohmann::json::value_t::object: return "object " + dump;
    default: return dump;
  }
}

bool JsonReader::has(const std::string& key) const {
  return obj_.is_object() && obj_.contains(key) && !obj_.at(key).is_null();
}

Error JsonReader::error(const std::string& key, const std::string& what) const {
  return Error{source_ + ": key '" + prefix_ + key + "': " + what};
}

namespace {
std::string range_text(std::int64_t lo, std::int64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}
std::string range_text(double lo, double hi) {
  std::ostringstream ss;
  ss << "[" << lo << ", " << hi << "]";
  return ss.str();
}
}  // namespace

Result<std::int64_t> JsonReader::integer(const std::string& key, std::int64_t lo,
                                         std::int64_t hi) const {
  if (!has(key)) return error(key, "missing, expected an integer in " + range_text(lo, hi));
  const auto& v = obj_.at(key);
  std::int64_t x = 0;
  if (v.is_number_integer()) {
    x = v.get<std::int64_t>();
  } else if (v.is_number_float() && std::isfinite(v.get<double>()) &&
             std::floor(v.get<double>()) == v.get<double>() &&
             std::fabs(v.get<double>()) < 9.0e15) {
    x = static_cast<std::int64_t>(v.get<double>());
  } else {
    return error(key, "expected an integer in " + range_text(lo, hi) + ", got " + describe_json(v));
  }
  if (x < lo || x > hi) {
    return error(key,
                 "expected an integer in " + range_text(lo, hi) + ", got " + std::to_string(x));
  }
  return x;
}

Result<std::int64_t> JsonReader::integer_or(const std::string& key, std::int64_t fallback,
                                            std::int64_t lo, std::int64_t hi) const {
  if (!has(key)) return fallback;
  return integer(key, lo, hi);
}

Result<double> JsonReader::number(const std::string& key, double lo, double hi) const {
  if (!has(key)) return error(key, "missing, expected a number in " + range_text(lo, hi));
  const auto& v = obj_.at(key);
  if (!v.is_number()) {
    return error(key, "expected a number in " + range_text(lo, hi) + ", got " + describe_json(v));
  }
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    return error(key, "expected a number in " + range_text(lo, hi) + ", got " + v.dump());
  }
  return x;
}

Result<double> JsonReader::number_or(const std::string& key, double fallback, double lo,
                                     double hi) const {
  if (!has(key)) return fallback;
  return number(key, lo, hi);
}

Result<bool> JsonReader::boolean_or(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const auto& v = obj_.at(key);
  if (!v.is_boolean()) return error(key, "expected true or false, got " + describe_json(v));
  return v.get<bool>();
}

Result<std::string> JsonReader::string(const std::string& key) const {
  if (!has(key)) return error(key, "missing, expected a string");
  const auto& v = obj_.at(key);
  if (!v.is_string()) return error(key, "expected a string, got " + describe_json(v));
  return v.get<std::string>();
}

Result<std::string> JsonReader::string_or(const std::string& key,
                                          const std::string& fallback) const {
  if (!has(key)) return fallback;
  return string(key);
}

Result<std::vector<std::int64_t>> JsonReader::integer_list_or_empty(const std::string& key,
                                                                    std::int64_t lo,
                                                                    std::int64_t hi) const {
  std::vector<std::int64_t> out;
  if (!has(key)) return out;
  const auto& v = obj_.at(key);
  const std::string want = "expected an array of integers in " + range_text(lo, hi);
  if (!v.is_array()) return error(key, want + ", got " + describe_json(v));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto& e = v[i];
    if (!e.is_number_integer() || e.get<std::int64_t>() < lo || e.get<std::int64_t>() > hi) {
      return error(key, want + ", got " + describe_json(e) + " at index " + std::to_string(i));
    }
    out.push_back(e.get<std::int64_t>());
  }
  return out;
}

}  // namespace moeplan
