// Status, Result<T> and ErrorContext: how every fallible runtime function reports failure.
// No exceptions: runtime/, kernels/ and backends/ build with -fno-exceptions -fno-rtti.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

#include "runtime/core/error.h"
#include "runtime/platform/platform.h"

#ifndef EMBER_ERROR_CONTEXT
#define EMBER_ERROR_CONTEXT 1
#endif

namespace ember {

// An Error plus static context (`what` is a string literal, file:line). Trivially copyable; never
// allocates. With EMBER_ERROR_CONTEXT=0 only the code is kept.
class [[nodiscard]] Status {
 public:
  constexpr Status() = default;
  constexpr Status(Error code, const char* what = "", const char* file = "", int line = 0)
      : code_(code)
#if EMBER_ERROR_CONTEXT
        , what_(what), file_(file), line_(line)
#endif
  {
    (void)what, (void)file, (void)line;
  }
  static constexpr Status ok() { return Status(); }

  constexpr bool is_ok() const { return code_ == Error::Ok; }
  constexpr Error code() const { return code_; }
#if EMBER_ERROR_CONTEXT
  const char* what() const { return what_; }
  const char* file() const { return file_; }
  int line() const { return line_; }
#else
  const char* what() const { return ""; }
  const char* file() const { return ""; }
  int line() const { return 0; }
#endif

 private:
  Error code_ = Error::Ok;
#if EMBER_ERROR_CONTEXT
  const char* what_ = "";
  const char* file_ = "";
  int line_ = 0;
#endif
};

// Holds a T or a non-ok Status. T must be movable. No heap.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(const T& value) : status_(), has_value_(true) { new (&storage_) T(value); }
  Result(T&& value) : status_(), has_value_(true) { new (&storage_) T(std::move(value)); }
  Result(Status status) : status_(status), has_value_(false) {
    if (status_.is_ok()) status_ = Status(Error::Internal, "Result built from an ok Status");
  }
  Result(Result&& other) noexcept : status_(other.status_), has_value_(other.has_value_) {
    if (has_value_) new (&storage_) T(std::move(other.value_ref()));
  }
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  Result& operator=(Result&&) = delete;
  ~Result() {
    if (has_value_) value_ref().~T();
  }

  bool is_ok() const { return has_value_; }
  bool has_value() const { return has_value_; }
  Status status() const { return status_; }
  Error error() const { return status_.code(); }
  // Precondition: has_value().
  T& value() & { return value_ref(); }
  const T& value() const& { return value_ref(); }
  T&& value() && { return std::move(value_ref()); }
  T* operator->() { return &value_ref(); }
  const T* operator->() const { return &value_ref(); }
  T& operator*() & { return value_ref(); }

 private:
  T& value_ref() { return *std::launder(reinterpret_cast<T*>(&storage_)); }
  const T& value_ref() const { return *std::launder(reinterpret_cast<const T*>(&storage_)); }

  Status status_;
  bool has_value_;
  alignas(T) unsigned char storage_[sizeof(T)];
};

// Where a failure happened and why, in a fixed-size buffer the caller owns. Filled by EMBER_FAIL;
// the first failure wins (later ones go to the Debug log only) so the root cause is kept.
struct ErrorContext {
  static constexpr size_t kMessageSize = 256;
  enum class Phase : uint8_t { None = 0, Header = 1, Verify = 2, Validate = 3, Load = 4, Execute = 5 };

  Error code = Error::Ok;
  Phase phase = Phase::None;
  int32_t instruction = -1;  // -1 = not tied to an instruction
  int32_t value = -1;
  char message[kMessageSize] = {0};

  bool has_error() const { return code != Error::Ok; }
  void clear() { *this = ErrorContext(); }
};

const char* to_string(ErrorContext::Phase phase);

// Formats into ctx (if not null and still empty) and returns the Status. With a ctx the message is
// logged at Debug level only (the caller reports it: one line per error); without one, at Error.
Status fail(ErrorContext* ctx, Error code, const char* file, int line, const char* format, ...)
    __attribute__((format(printf, 5, 6)));

}  // namespace ember

#define EMBER_ERROR(code, what) ::ember::Status((code), (what), __FILE__, __LINE__)
#define EMBER_FAIL(ctx, code, ...) ::ember::fail((ctx), (code), __FILE__, __LINE__, __VA_ARGS__)

#define EMBER_CONCAT_INNER_(a, b) a##b
#define EMBER_CONCAT_(a, b) EMBER_CONCAT_INNER_(a, b)

#define EMBER_RETURN_IF_ERROR(expr)                \
  do {                                             \
    const ::ember::Status ember_status_ = (expr);  \
    if (!ember_status_.is_ok()) return ember_status_; \
  } while (0)

#define EMBER_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.is_ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#define EMBER_ASSIGN_OR_RETURN(lhs, expr) \
  EMBER_ASSIGN_OR_RETURN_IMPL_(EMBER_CONCAT_(ember_result_, __LINE__), lhs, expr)

// Debug-only invariant checks (free in release). EMBER_CHECK is for tests and examples only.
#ifdef NDEBUG
#define EMBER_DCHECK(cond) ((void)0)
#else
#define EMBER_DCHECK(cond)                                                     \
  do {                                                                         \
    if (!(cond)) {                                                             \
      EMBER_LOG(Error, "DCHECK failed: %s", #cond);                            \
      ::ember::platform_abort();                                               \
    }                                                                          \
  } while (0)
#endif
