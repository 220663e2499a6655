// Status and StatusOr<T>: how fallible calls report a user's mistake across a
// library boundary. Exceptions never cross a library boundary in pipetune;
// an internal invariant that breaks is a bug and aborts (PIPETUNE_CHECK).
//
// Codes map onto the CLI's exit codes: kInvalidInput (bad config, bad trace,
// bad flag) is exit 2; kFailed (a function failed on an element, a check did
// not pass) is decided by the caller.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace pipetune {

enum class StatusCode {
  kOk = 0,
  kInvalidInput,  // the user's input is wrong: config, trace, flag, file
  kNotFound,      // a file or name the user gave does not exist
  kIoError,       // the operating system refused a read or write
  kFailed,        // a runtime failure: element function error, stopped run
  kUnavailable,   // an optional part (CUPTI, Clang) is not built in
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes context ("config.json: ") so the outermost caller's message names
  // where the problem is without every layer formatting it.
  Status WithContext(const std::string& where) const {
    if (ok()) return *this;
    return Status(code_, where + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidInput(std::string message) {
  return Status(StatusCode::kInvalidInput, std::move(message));
}
inline Status NotFound(std::string message) { return Status(StatusCode::kNotFound, std::move(message)); }
inline Status IoError(std::string message) { return Status(StatusCode::kIoError, std::move(message)); }
inline Status Failed(std::string message) { return Status(StatusCode::kFailed, std::move(message)); }
inline Status Unavailable(std::string message) {
  return Status(StatusCode::kUnavailable, std::move(message));
}

// A value or the Status that explains why there is none. Constructing from an
// ok Status is an invariant violation.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) {
      std::fprintf(stderr, "StatusOr constructed from an ok Status\n");
      std::abort();
    }
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & { return Checked(); }
  const T& value() const& { return const_cast<StatusOr*>(this)->Checked(); }
  T&& value() && { return std::move(Checked()); }
  T* operator->() { return &Checked(); }
  const T* operator->() const { return &const_cast<StatusOr*>(this)->Checked(); }
  T& operator*() & { return Checked(); }
  const T& operator*() const& { return const_cast<StatusOr*>(this)->Checked(); }

 private:
  T& Checked() {
    if (!value_) {
      std::fprintf(stderr, "StatusOr::value() on an error: %s\n", status_.message().c_str());
      std::abort();
    }
    return *value_;
  }
  std::optional<T> value_;
  Status status_;
};

}  // namespace pipetune

// Returns early from the enclosing function with a non-ok Status.
#define PIPETUNE_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::pipetune::Status pipetune_status_ = (expr);        \
    if (!pipetune_status_.ok()) return pipetune_status_; \
  } while (0)

#define PIPETUNE_STATUS_CONCAT_INNER(a, b) a##b
#define PIPETUNE_STATUS_CONCAT(a, b) PIPETUNE_STATUS_CONCAT_INNER(a, b)

// PIPETUNE_ASSIGN_OR_RETURN(auto x, MaybeX()); declares x or returns the error.
#define PIPETUNE_ASSIGN_OR_RETURN(lhs, expr)                        \
  auto PIPETUNE_STATUS_CONCAT(pipetune_or_, __LINE__) = (expr);     \
  if (!PIPETUNE_STATUS_CONCAT(pipetune_or_, __LINE__).ok())         \
    return PIPETUNE_STATUS_CONCAT(pipetune_or_, __LINE__).status(); \
  lhs = std::move(PIPETUNE_STATUS_CONCAT(pipetune_or_, __LINE__)).value()
