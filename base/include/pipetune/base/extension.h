// Extension<T>: an optional value of a type the holder's header only
// declares, so that a generic struct can carry a part another header owns
// without including it (analyzer::Diagnosis carries a DataLoader's sections,
// defined in dataloader_sections.h, which diagnosis.h does not include).
//
// Contract: it reads as std::optional<T> (empty by default, has_value,
// operator bool, *, ->, reset, assignment from a T) and copies and moves as
// a value: a copy holds its own T. Storing a T (assigning one) needs T
// complete; copying, moving and destroying an Extension do not, since the
// copy and delete functions are taken where the T was stored. Reading one
// (*, ->) needs T complete where its members are used.
#pragma once

#include <utility>

#include "pipetune/base/check.h"

namespace pipetune {

template <typename T>
class Extension {
 public:
  Extension() = default;
  ~Extension() { reset(); }

  Extension(const Extension& other) : ops_(other.ops_) {
    if (other.value_) value_ = ops_->copy(*other.value_);
  }
  Extension(Extension&& other) noexcept
      : value_(std::exchange(other.value_, nullptr)), ops_(std::exchange(other.ops_, nullptr)) {}
  Extension& operator=(const Extension& other) {
    if (this != &other) *this = Extension(other);
    return *this;
  }
  Extension& operator=(Extension&& other) noexcept {
    if (this != &other) {
      reset();
      value_ = std::exchange(other.value_, nullptr);
      ops_ = std::exchange(other.ops_, nullptr);
    }
    return *this;
  }

  // Stores a copy of (or moves in) `value`; T must be complete here.
  Extension& operator=(T value) {
    reset();
    static constexpr Ops kOps{[](const T& t) { return new T(t); }, [](T* t) { delete t; }};
    value_ = new T(std::move(value));
    ops_ = &kOps;
    return *this;
  }

  bool has_value() const { return value_ != nullptr; }
  explicit operator bool() const { return has_value(); }
  T& operator*() {
    PIPETUNE_CHECK(value_ != nullptr);
    return *value_;
  }
  const T& operator*() const {
    PIPETUNE_CHECK(value_ != nullptr);
    return *value_;
  }
  T* operator->() { return &**this; }
  const T* operator->() const { return &**this; }

  void reset() {
    if (value_) ops_->destroy(value_);
    value_ = nullptr;
    ops_ = nullptr;
  }

 private:
  // Taken where a T was stored (T complete there), so that copying and
  // destroying elsewhere need not see T's definition.
  struct Ops {
    T* (*copy)(const T&);
    void (*destroy)(T*);
  };
  T* value_ = nullptr;
  const Ops* ops_ = nullptr;
};

}  // namespace pipetune
