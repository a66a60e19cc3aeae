// SPDX-License-Identifier: Apache-2.0
// The host runtime: ordinary memory, always available. "Device" memory is heap memory and every
// copy direction is std::memcpy, so code written against DeviceRuntime runs on CPU-only hosts.
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "device/runtime_util.h"
#include "kvport/device.h"

namespace kvport {
namespace {

using device_internal::CheckBuffer;
using device_internal::CheckCopyArguments;

class HostDeviceRuntime final : public DeviceRuntime {
 public:
  HostDeviceRuntime() { info_.kind = RuntimeKind::kHost; }

  const RuntimeInfo& info() const override { return info_; }

  Status SetDevice(int device) const override {
    if (device != 0)
      return Status::InvalidArgument("the host runtime has one device, 0; asked for " +
                                     std::to_string(device));
    return Status::Ok();
  }

  Status Memcpy(void* dst, const void* src, size_t bytes, MemcpyKind kind) const override {
    KVPORT_RETURN_IF_ERROR(CheckCopyArguments(dst, src, bytes, kind));
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return Status::Ok();
  }

  Status CopyOnDevice(int device, void* dst, const void* src, size_t bytes,
                      MemcpyKind kind) const override {
    KVPORT_RETURN_IF_ERROR(SetDevice(device));
    return Memcpy(dst, src, bytes, kind);
  }

  Result<void*> AllocDevice(size_t bytes) const override { return Allocate("host malloc", bytes); }
  Status FreeDevice(void* ptr) const override {
    std::free(ptr);
    return Status::Ok();
  }

  Result<void*> AllocPinnedHost(size_t bytes) const override {
    return Allocate("host pinned alloc", bytes);
  }
  Status FreePinnedHost(void* ptr) const override {
    std::free(ptr);
    return Status::Ok();
  }

  Status RegisterHost(void* ptr, size_t bytes) const override {
    return CheckBuffer("host register", ptr, bytes, true);
  }
  Status UnregisterHost(void* ptr) const override {
    return CheckBuffer("host unregister", ptr, 0, false);
  }

 private:
  // Page-aligned so that buffers behave like the runtimes' (and can be registered later).
  static Result<void*> Allocate(std::string_view call, size_t bytes) {
    if (bytes == 0) return Status::InvalidArgument(std::string(call) + ": size is 0 bytes");
    const long page = sysconf(_SC_PAGESIZE);
    void* ptr = nullptr;
    if (posix_memalign(&ptr, page > 0 ? static_cast<size_t>(page) : 4096, bytes) != 0) {
      return Status::NoSpace(std::string(call) + "(" + std::to_string(bytes) +
                             " bytes): out of memory");
    }
    return ptr;
  }

  RuntimeInfo info_;
};

}  // namespace

std::unique_ptr<DeviceRuntime> OpenHostRuntime() {
  return std::make_unique<HostDeviceRuntime>();
}

}  // namespace kvport
