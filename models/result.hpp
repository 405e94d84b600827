// Expected failures as values: Error carries one message naming the file, the key and what was
// expected; Result<T> holds either a value or an Error. Used by every moeplan module.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace moeplan {

/// An expected failure (bad input, illegal layout, unsupported dtype). `message` is one line.
struct Error {
  std::string message;
};

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
