// SPDX-License-Identifier: Apache-2.0
#include "device/runtime_util.h"

#include <fmt/core.h>

namespace kvport::device_internal {

std::string_view RuntimeDisplayName(RuntimeKind kind) {
  switch (kind) {
    case RuntimeKind::kHost:
      return "host runtime";
    case RuntimeKind::kCuda:
      return "CUDA runtime";
    case RuntimeKind::kAscend:
      return "Ascend runtime (ACL)";
  }
  return "unknown runtime";
}

Status RuntimeCallError(std::string_view call, long code, std::string_view text) {
  return Status::DeviceError(fmt::format("{} failed: error {} ({})", call, code, text));
}

std::string DescribeCopy(std::string_view function, MemcpyKind kind, size_t bytes) {
  return fmt::format("{}({}, {} bytes)", function, MemcpyKindName(kind), bytes);
}

std::string DescribeSized(std::string_view function, size_t bytes) {
  return fmt::format("{}({} bytes)", function, bytes);
}

Status CheckBuffer(std::string_view call, const void* ptr, size_t bytes, bool bytes_required) {
  if (ptr == nullptr) return Status::InvalidArgument(fmt::format("{}: null pointer", call));
  if (bytes_required && bytes == 0)
    return Status::InvalidArgument(fmt::format("{}: size is 0 bytes", call));
  return Status::Ok();
}

Status CheckCopyArguments(void* dst, const void* src, size_t bytes, MemcpyKind kind) {
  switch (kind) {
    case MemcpyKind::kHostToHost:
    case MemcpyKind::kHostToDevice:
    case MemcpyKind::kDeviceToHost:
    case MemcpyKind::kDeviceToDevice:
      break;
    default:
      return Status::InvalidArgument(
          fmt::format("memcpy kind {} is not one of H2H, H2D, D2H, D2D", static_cast<int>(kind)));
  }
  if (bytes > 0 && (dst == nullptr || src == nullptr)) {
    return Status::InvalidArgument(fmt::format("memcpy({}, {} bytes): null {} pointer",
                                               MemcpyKindName(kind), bytes,
                                               dst == nullptr ? "destination" : "source"));
  }
  return Status::Ok();
}

}  // namespace kvport::device_internal
