// SPDX-License-Identifier: Apache-2.0
// Status and Result<T>: the error model of every kvport library API.
//
// No exception crosses a public kvport API. A function that can fail returns a Status (or a
// Result<T> when it also produces a value). A Status is cheap to return when OK (no allocation)
// and carries a code plus a human-readable message otherwise. Messages are written for the
// operator who will read them: they name the thing that failed and why.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "kvport/export.h"

namespace kvport {

// Stable codes: they are also carried on the wire (see docs/protocol.md), so values never change.
enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument = 1,  // the caller passed something malformed or out of range
  kNotFound = 2,         // the key (or file, or library) does not exist
  kNoSpace = 3,          // no room now (capacity full of pinned or live objects)
  kTooLarge = 4,         // larger than a configured limit; will never fit
  kUnavailable = 5,      // peer/runtime not reachable right now; retry may succeed
  kTimeout = 6,          // deadline passed
  kIoError = 7,          // an OS-level I/O call failed
  kCorruption = 8,       // malformed bytes (a bad frame, a bad metadata blob)
  kNotSupported = 9,     // this build or host cannot do it (e.g. GPUDirect without CUDA)
  kDeviceError = 10,     // an accelerator runtime call failed; message has its code and string
  kAborted = 11,         // cancelled (shutdown, connection closed mid-request)
  kInternal = 12,        // a bug: an invariant did not hold
  // The caller's token does not grant this (protocol version 4 on; docs/security.md).
  kPermissionDenied = 13,
};

// Returns a short stable name such as "NotFound".
KVPORT_API std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] KVPORT_API Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return {StatusCode::kInvalidArgument, std::move(msg)};
  }
  static Status NotFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
  static Status NoSpace(std::string msg) { return {StatusCode::kNoSpace, std::move(msg)}; }
  static Status TooLarge(std::string msg) { return {StatusCode::kTooLarge, std::move(msg)}; }
  static Status Unavailable(std::string msg) { return {StatusCode::kUnavailable, std::move(msg)}; }
  static Status Timeout(std::string msg) { return {StatusCode::kTimeout, std::move(msg)}; }
  static Status IoError(std::string msg) { return {StatusCode::kIoError, std::move(msg)}; }
  // IoError whose message ends with ": " + strerror(err).
  static Status FromErrno(std::string_view what, int err);
  static Status Corruption(std::string msg) { return {StatusCode::kCorruption, std::move(msg)}; }
  static Status NotSupported(std::string msg) {
    return {StatusCode::kNotSupported, std::move(msg)};
  }
  static Status DeviceError(std::string msg) { return {StatusCode::kDeviceError, std::move(msg)}; }
  static Status Aborted(std::string msg) { return {StatusCode::kAborted, std::move(msg)}; }
  static Status Internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }
  static Status PermissionDenied(std::string msg) {
    return {StatusCode::kPermissionDenied, std::move(msg)};
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  // Empty when OK.
  const std::string& message() const;
  // "OK", "<CodeName>: <message>", or "<CodeName>" for an error without a message.
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context + ": "`; OK stays OK.
  Status WithContext(std::string_view context) const;

  Status(const Status& other);
  Status& operator=(const Status& other);
  // A moved-from Status is OK.
  Status(Status&& other) noexcept
      : code_(std::exchange(other.code_, StatusCode::kOk)), message_(std::move(other.message_)) {}
  Status& operator=(Status&& other) noexcept {
    code_ = std::exchange(other.code_, StatusCode::kOk);
    message_ = std::move(other.message_);
    return *this;
  }
  ~Status() = default;

 private:
  StatusCode code_ = StatusCode::kOk;
  // Null when there is no message: an error without one (a store miss) allocates nothing.
  std::unique_ptr<std::string> message_;
};

// Either a T or a non-OK Status. Accessing value() of an error Result is a bug (checked by
// assert in debug builds); callers test ok() first or use KVPORT_ASSIGN_OR_RETURN.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) { CheckNotOk(); }  // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<1>(v_);
  }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  void CheckNotOk() {
    if (std::get<1>(v_).ok()) v_ = Status::Internal("Result constructed from an OK Status");
  }
  std::variant<T, Status> v_;
};

}  // namespace kvport

#define KVPORT_CONCAT_INNER_(a, b) a##b
#define KVPORT_CONCAT_(a, b) KVPORT_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function if `expr` (a Status) is not OK.
#define KVPORT_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::kvport::Status kvport_status_ = (expr);        \
    if (!kvport_status_.ok()) return kvport_status_; \
  } while (0)

// KVPORT_ASSIGN_OR_RETURN(auto x, FunctionReturningResult()); returns the error Status early.
#define KVPORT_ASSIGN_OR_RETURN(lhs, expr) \
  KVPORT_ASSIGN_OR_RETURN_IMPL_(KVPORT_CONCAT_(kvport_result_, __LINE__), lhs, expr)
#define KVPORT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
