// Plain-text tables for the CLI.
#include "app/cli/table.hpp"

#include <algorithm>

namespace moeplan::cli {

namespace {
// Display width: count UTF-8 code points, not bytes ("×" is one column).
std::size_t display_width(const std::string& s) {
  std::size_t n = 0;
  for (const char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0U) != 0x80U) ++n;
  }
  return n;
}
std::string pad(const std::string& s, std::size_t width, Table::Align align) {
  const std::size_t w = display_width(s);
  const std::string fill(width > w ? width - w : 0, ' ');
  return align == Table::Align::kLeft ? s + fill : fill + s;
}
}  // namespace

void Table::add_column(std::string header, Align align) {
  headers_.push_back(std::move(header));
  aligns_.push_back(align);
}

void Table::add_row(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::render() const {
  std::vector<std::size_t> widths(headers_.size());
  for (std::size_t c = 0; c < headers_.size(); ++c) {
    widths[c] = display_width(headers_[c]);
    for (const auto& row : rows_) widths[c] = std::max(widths[c], display_width(row[c]));
  }
  std::string out;
  auto emit = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) line += "  ";
      line += pad(cells[c], widths[c], aligns_[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  };
  emit(headers_);
  std::string rule;
  for (std::size_t c = 0; c < widths.size(); ++c) {
    if (c > 0) rule += "  ";
    rule += std::string(widths[c], '-');
  }
  out += rule + "\n";
  for (const auto& row : rows_) emit(row);
  return out;
}

std::string render_key_values(const std::vector<std::pair<std::string, std::string>>& rows) {
  std::size_t w = 0;
  for (const auto& [k, v] : rows) w = std::max(w, display_width(k));
  std::string out;
  for (const auto& [k, v] : rows) out += pad(k, w, Table::Align::kLeft) + "  " + v + "\n";
  return out;
}

}  // namespace moeplan::cli
