// Plain-text tables for the CLI: aligned columns, a header rule, right-aligned numbers.
#pragma once

#include <string>
#include <vector>

namespace moeplan::cli {

class Table {
 public:
  enum class Align { kLeft, kRight };
  void add_column(std::string header, Align align = Align::kLeft);
  void add_row(std::vector<std::string> cells);
  std::string render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<Align> aligns_;
  std::vector<std::vector<std::string>> rows_;
};

/// Key/value listing: keys padded to one width.
std::string render_key_values(const std::vector<std::pair<std::string, std::string>>& rows);

}  // namespace moeplan::cli
