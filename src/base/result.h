// Errors are values at boundaries: Result<T> holds a T or an Error, a one-line
// message that names the file, field or address it is about. Nothing at a
// boundary throws. Result<T, ItsError> is for callers that need more than
// the message (ItsError has a `message` member too).
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace ig {

struct Error {
  std::string message;
};

inline Error fail(std::string message) { return Error{std::move(message)}; }

template <typename T, typename E = Error>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(E error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return std::get<0>(v_); }
  const T& operator*() const& { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }

  // Only when !ok().
  const std::string& error() const { return std::get<1>(v_).message; }
  const E& failure() const { return std::get<1>(v_); }

 private:
  std::variant<T, E> v_;
};

template <typename E>
class [[nodiscard]] Result<void, E> {
 public:
  Result() = default;
  Result(E error) : error_(std::move(error)), failed_(true) {}  // NOLINT: implicit by design

  bool ok() const noexcept { return !failed_; }
  explicit operator bool() const noexcept { return ok(); }
  // Only when !ok().
  const std::string& error() const { return error_.message; }
  const E& failure() const { return error_; }

 private:
  E error_{};
  bool failed_ = false;
};

}  // namespace ig
