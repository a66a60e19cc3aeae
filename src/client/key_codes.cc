// SPDX-License-Identifier: Apache-2.0
// Names of the client's result codes and the rule that turns per-key codes into an overall one.
#include "kvport/client.h"

namespace kvport {

std::string_view BatchCodeName(BatchCode code) {
  switch (code) {
    case BatchCode::kSuccess:
      return "SUCCESS";
    case BatchCode::kPartialFailed:
      return "PARTIAL_FAILED";
    case BatchCode::kFailed:
      return "FAILED";
  }
  return "UNKNOWN";
}

std::string_view KeyCodeName(KeyCode code) {
  switch (code) {
    case KeyCode::kSuccess:
      return "SUCCESS";
    case KeyCode::kKeyNotExist:
      return "KEY_NOT_EXIST";
    case KeyCode::kNoSpace:
      return "NO_SPACE";
    case KeyCode::kTooLarge:
      return "TOO_LARGE";
    case KeyCode::kBufferTooSmall:
      return "BUFFER_TOO_SMALL";
    case KeyCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case KeyCode::kUnavailable:
      return "UNAVAILABLE";
    case KeyCode::kTimeout:
      return "TIMEOUT";
    case KeyCode::kDeviceError:
      return "DEVICE_ERROR";
    case KeyCode::kFailed:
      return "FAILED";
    case KeyCode::kPermissionDenied:
      return "PERMISSION_DENIED";
  }
  return "UNKNOWN";
}

BatchCode OverallCode(std::span<const KeyCode> codes) {
  size_t ok = 0;
  for (KeyCode c : codes)
    ok += c == KeyCode::kSuccess ? 1 : 0;
  if (ok == codes.size()) return BatchCode::kSuccess;
  return ok == 0 ? BatchCode::kFailed : BatchCode::kPartialFailed;
}

}  // namespace kvport
