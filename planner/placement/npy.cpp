// The .npy reader: the magic and version, the header dict, then the data.
#include "planner/placement/npy.hpp"

#include <cctype>
#include <cstring>
#include <limits>
#include <optional>

namespace moeplan::planner {

namespace {

/// The header dict's three keys.
struct NpyHeader {
  std::string descr;
  std::optional<bool> fortran;
  std::optional<std::vector<std::int64_t>> shape;
};

/// A cursor over the header dict's text (Python literal syntax, as NumPy writes it).
class HeaderText {
 public:
  HeaderText(std::string text, std::string what) : h_(std::move(text)), what_(std::move(what)) {}

  Error error(const std::string& message) const { return Error{what_ + message}; }
  std::size_t pos() const { return p_; }
  void skip_ws() {
    while (p_ < h_.size() && h_[p_] == ' ') ++p_;
  }
  bool at(char c) {
    skip_ws();
    return p_ < h_.size() && h_[p_] == c;
  }
  bool expect(char c) {
    if (!at(c)) return false;
    ++p_;
    return true;
  }
  bool read_quoted(std::string& out) {
    skip_ws();
    if (p_ >= h_.size() || (h_[p_] != '\'' && h_[p_] != '"')) return false;
    const char q = h_[p_++];
    const std::size_t end = h_.find(q, p_);
    if (end == std::string::npos) return false;
    out = h_.substr(p_, end - p_);
    p_ = end + 1;
    return true;
  }
  bool read_word(const char* word) {
    skip_ws();
    const std::size_t n = std::strlen(word);
    if (h_.compare(p_, n, word) != 0) return false;
    p_ += n;
    return true;
  }
  /// A shape tuple of non-negative integers ("(3, 4)", "(5,)", "()"; Python 2's 'L' allowed).
  Result<std::vector<std::int64_t>> read_shape() {
    if (!expect('(')) return error("key 'shape': expected a tuple");
    std::vector<std::int64_t> dims;
    while (true) {
      if (expect(')')) return dims;
      if (p_ >= h_.size() || !std::isdigit(static_cast<unsigned char>(h_[p_]))) {
        return error("key 'shape': expected non-negative integers");
      }
      std::int64_t d = 0;
      while (p_ < h_.size() && std::isdigit(static_cast<unsigned char>(h_[p_]))) {
        if (d > (std::numeric_limits<std::int64_t>::max() - 9) / 10) {
          return error("key 'shape': dimension too large");
        }
        d = d * 10 + (h_[p_] - '0');
        ++p_;
      }
      if (p_ < h_.size() && h_[p_] == 'L') ++p_;
      dims.push_back(d);
      if (expect(',')) continue;
      if (expect(')')) return dims;
      return error("key 'shape': expected ',' or ')'");
    }
  }
  /// Only spaces and one newline left.
  bool at_end_line() {
    skip_ws();
    return p_ + 1 == h_.size() && h_[p_] == '\n';
  }

 private:
  std::string h_;
  std::string what_;
  std::size_t p_ = 0;
};

/// Grammar: '{' ( 'key' ':' value ',' )* '}' then spaces and '\n'.
Result<NpyHeader> parse_header_dict(HeaderText& t) {
  if (!t.expect('{')) return t.error("expected a dict starting with '{'");
  NpyHeader hd;
  while (!t.expect('}')) {
    std::string key;
    if (!t.read_quoted(key)) {
      return t.error("expected a quoted key or '}' at byte " + std::to_string(t.pos()));
    }
    if (!t.expect(':')) return t.error("expected ':' after key '" + key + "'");
    if (key == "descr") {
      if (!hd.descr.empty()) return t.error("key 'descr' given twice");
      if (!t.read_quoted(hd.descr) || hd.descr.empty()) {
        return t.error("key 'descr': expected a quoted dtype");
      }
    } else if (key == "fortran_order") {
      if (hd.fortran) return t.error("key 'fortran_order' given twice");
      if (t.read_word("False")) {
        hd.fortran = false;
      } else if (t.read_word("True")) {
        hd.fortran = true;
      } else {
        return t.error("key 'fortran_order': expected True or False");
      }
    } else if (key == "shape") {
      if (hd.shape) return t.error("key 'shape' given twice");
      auto dims = t.read_shape();
      if (!dims) return dims.error();
      hd.shape = std::move(*dims);
    } else {
      return t.error("unexpected key '" + key + "', expected descr, fortran_order, shape");
    }
    if (t.expect(',')) continue;
    if (t.expect('}')) break;
    return t.error("expected ',' or '}' after key '" + key + "'");
  }
  if (!t.at_end_line()) return t.error("expected the dict to end with spaces and a newline");
  if (hd.descr.empty() || !hd.fortran || !hd.shape) {
    return t.error("expected keys 'descr', 'fortran_order' and 'shape'");
  }
  if (*hd.fortran) return t.error("fortran_order is True, expected C order (False)");
  return hd;
}

/// The values of `count` items of `descr` at `data`, as doubles.
std::vector<double> decode_values(const char* data, std::size_t count, const std::string& descr,
                                  std::size_t item) {
  std::vector<double> values(count);
  for (std::size_t i = 0; i < count; ++i) {
    const char* at = data + i * item;
    if (descr == "<i4") {
      std::int32_t v = 0;
      std::memcpy(&v, at, 4);
      values[i] = v;
    } else if (descr == "<i8") {
      std::int64_t v = 0;
      std::memcpy(&v, at, 8);
      values[i] = static_cast<double>(v);
    } else if (descr == "<f4") {
      float v = 0.0F;
      std::memcpy(&v, at, 4);
      values[i] = v;
    } else {
      double v = 0.0;
      std::memcpy(&v, at, 8);
      values[i] = v;
    }
  }
  return values;
}

}  // namespace

Result<NpyArray> parse_npy(const std::string& bytes, const std::string& source) {
  const std::string what = source + ": npy header: ";
  static const char kMagic[] = "\x93NUMPY";
  if (bytes.empty()) return Error{source + ": empty file, expected a NumPy .npy array"};
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0) {
    return Error{what + "expected the magic \\x93NUMPY at the start"};
  }
  const auto major = static_cast<unsigned char>(bytes[6]);
  const auto minor = static_cast<unsigned char>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0) {
    return Error{what + "expected format version 1.0, 2.0 or 3.0, got " + std::to_string(major) +
                 "." + std::to_string(minor)};
  }
  std::size_t header_len = 0;
  std::size_t offset = 0;
  if (major == 1) {
    header_len = static_cast<std::size_t>(static_cast<unsigned char>(bytes[8])) |
                 static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8U;
    offset = 10;
  } else {
    if (bytes.size() < 12) return Error{what + "truncated before the header length"};
    for (std::size_t i = 0; i < 4; ++i) {
      header_len |= static_cast<std::size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8U * i);
    }
    offset = 12;
  }
  if (header_len > bytes.size() - offset) {
    return Error{what + "header length " + std::to_string(header_len) + " exceeds the file"};
  }
  HeaderText text(bytes.substr(offset, header_len), what);
  auto header = parse_header_dict(text);
  if (!header) return header.error();
  const std::string& descr = header->descr;
  std::size_t item = 0;
  bool is_float = false;
  if (descr == "<i4" || descr == "<i8") {
    item = descr == "<i4" ? 4 : 8;
  } else if (descr == "<f4" || descr == "<f8") {
    item = descr == "<f4" ? 4 : 8;
    is_float = true;
  } else {
    return Error{what + "dtype '" + descr + "' not supported, expected <i4, <i8, <f4 or <f8"};
  }
  NpyArray arr;
  arr.shape = *header->shape;
  arr.integer = !is_float;
  std::size_t count = 1;
  for (const std::int64_t d : arr.shape) {
    const auto ud = static_cast<std::size_t>(d);
    if (ud != 0 && count > std::numeric_limits<std::size_t>::max() / ud / item) {
      return Error{what + "shape too large"};
    }
    count *= ud;
  }
  const std::size_t data_start = offset + header_len;
  const std::size_t data_size = bytes.size() - data_start;
  if (data_size != count * item) {
    return Error{what + "shape and dtype give " + std::to_string(count * item) +
                 " data bytes, the file has " + std::to_string(data_size)};
  }
  arr.values = decode_values(bytes.data() + data_start, count, descr, item);
  return arr;
}

}  // namespace moeplan::planner
