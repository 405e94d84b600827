// Expected failures as values: Error carries one message naming the file, the key and what was
// expected; Result<T> holds either a value or an Error. Used by every moeplan module.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace moeplan {

/// An expected failure (bad input, illegal layout, unsupported dtype). `message` is one line
/// naming the file, key or input and what was expected.
struct Error {
  std::string message;
  /// The user input the error is about, in the libraries' own words ("tokens", "costs",
  /// "max_tokens"), when it is one; `message` then starts with it. Each front end shows it as its
  /// own name for that input (the CLI as "--tokens", the GUI as the field's label). Empty when
  /// the message names a file and key instead.
  std::string input = {};
};

/// An error about user input `input`: the message is `input` followed by `rest` (which starts
/// with ": " or " " and a value), e.g. input_error("scale", " 3 does not divide ...").
inline Error input_error(const std::string& input, const std::string& rest) {
  return Error{input + rest, input};
}

/// `error` about another name of the same input (a command taking it under another flag):
/// its leading input name replaced by `input`.
inline Error with_input(Error error, const std::string& input) {
  if (!error.input.empty() && error.message.compare(0, error.input.size(), error.input) == 0) {
    error.message = input + error.message.substr(error.input.size());
    error.input = input;
  }
  return error;
}

/// A message may also mention other inputs as "{name}" (e.g. "use {gpus} 64"). Renders `error`
/// for a front end: its leading input and every "{name}" become `name_of(name)` (the CLI gives
/// "--gpus", the GUI its field label), so "scale 3 does not divide ..." reads
/// "--scale 3 does not divide ..." on the command line.
template <typename NameOf>
std::string render_error(const Error& error, const NameOf& name_of) {
  std::string text = error.message;
  std::string out;
  std::size_t at = 0;
  if (!error.input.empty() && text.compare(0, error.input.size(), error.input) == 0) {
    out = name_of(error.input);
    at = error.input.size();
  }
  while (at < text.size()) {
    const std::size_t open = text.find('{', at);
    const std::size_t close = open == std::string::npos ? open : text.find('}', open);
    bool is_name = close != std::string::npos && close > open + 1;
    for (std::size_t i = open + 1; is_name && i < close; ++i) {
      const char c = text[i];
      is_name = (c >= 'a' && c <= 'z') || c == '_';
    }
    if (!is_name) {
      const std::size_t next = open == std::string::npos ? text.size() : open + 1;
      out += text.substr(at, next - at);
      at = next;
      continue;
    }
    out += text.substr(at, open - at) + name_of(text.substr(open + 1, close - open - 1));
    at = close + 1;
  }
  return out;
}

/// `input` as moeplan's command line spells it: "ll_max_tokens" → "--ll-max-tokens". The CLI
/// renders messages with it, and so does the plan JSON (which `moeplan plan --json` writes).
inline std::string cli_flag(const std::string& input) {
  std::string flag = "--" + input;
  for (char& c : flag) {
    if (c == '_') c = '-';
  }
  return flag;
}

/// A message with every "{name}" of an input rendered as moeplan's flag (render_error with
/// cli_flag): what a machine-readable output carries.
inline std::string render_flags(const std::string& message) {
  return render_error(Error{message}, cli_flag);
}

/// A value of type T or an Error.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : data_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(data_); }
  explicit operator bool() const { return ok(); }

  const T& value() const& { return std::get<T>(data_); }
  T& value() & { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  const Error& error() const { return std::get<Error>(data_); }

 private:
  std::variant<T, Error> data_;
};

/// Success or an Error, for operations without a value.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  static Status Ok() { return {}; }

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_{};
  bool ok_ = true;
};

[[noreturn]] inline void assert_fail(const char* expr, const char* file, int line,
                                     const char* msg) {
  std::fprintf(stderr, "moeplan: internal error: %s:%d: assertion '%s' failed%s%s\n", file, line,
               expr, msg[0] != '\0' ? ": " : "", msg);
  std::abort();
}

}  // namespace moeplan

/// Broken invariants (not user errors): abort with file:line.
#define MOEPLAN_ASSERT(expr, msg) \
  ((expr) ? static_cast<void>(0) : ::moeplan::assert_fail(#expr, __FILE__, __LINE__, msg))

/// Propagates an error from an expression returning Result<T> or Status.
#define MOEPLAN_TRY_STATUS(expr)                            \
  do {                                                      \
    auto moeplan_try_status_ = (expr);                      \
    if (!moeplan_try_status_.ok()) {                        \
      return ::moeplan::Error{moeplan_try_status_.error()}; \
    }                                                       \
  } while (false)
