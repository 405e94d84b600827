// Typed, validated access to JSON keys: every failure names the file, the key and what was
// expected. Shared by every moeplan reader of user-supplied JSON.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/file_io.hpp"
#include "models/result.hpp"

namespace moeplan {

/// Parses JSON text; errors name `source` and the byte offset.
Result<nlohmann::json> parse_json(const std::string& text, const std::string& source);

/// Reads and parses a JSON file.
Result<nlohmann::json> load_json_file(const std::filesystem::path& path);

/// A short description of a JSON value for error messages: `string "64"`, `null`, `-3`.
std::string describe_json(const nlohmann::json& v);

/// Validated key access on one JSON object. `prefix` is prepended to key names ("inter_node.").
class JsonReader {
 public:
  JsonReader(const nlohmann::json& object, std::string source, std::string prefix = "")
      : obj_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

  bool has(const std::string& key) const;  ///< present and not null

  /// Required integer in [lo, hi].
  Result<std::int64_t> integer(const std::string& key, std::int64_t lo, std::int64_t hi) const;
  /// Optional integer in [lo, hi]: absent or null gives `fallback`.
  Result<std::int64_t> integer_or(const std::string& key, std::int64_t fallback, std::int64_t lo,
                                  std::int64_t hi) const;
  /// Required number in [lo, hi] (integers accepted).
  Result<double> number(const std::string& key, double lo, double hi) const;
  Result<double> number_or(const std::string& key, double fallback, double lo, double hi) const;
  Result<bool> boolean_or(const std::string& key, bool fallback) const;
  Result<std::string> string(const std::string& key) const;
  Result<std::string> string_or(const std::string& key, const std::string& fallback) const;
  /// Optional array of integers each in [lo, hi]; absent or null gives an empty vector.
  Result<std::vector<std::int64_t>> integer_list_or_empty(const std::string& key, std::int64_t lo,
                                                          std::int64_t hi) const;

  /// An error about `key`: "<source>: key '<prefix><key>': <what>".
  Error error(const std::string& key, const std::string& what) const;
  const std::string& source() const { return source_; }

 private:
  const nlohmann::json& obj_;
  std::string source_;
  std::string prefix_;
};

}  // namespace moeplan
