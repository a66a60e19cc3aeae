// SPDX-License-Identifier: Apache-2.0
// The Ascend runtime (CANN's ACL), reached through libascendcl with dlopen/dlsym; never linked.
//
// aclInit is called once per opened runtime with no config file; ACL_ERROR_REPEAT_INITIALIZE
// means the process (e.g. torch_npu) initialized ACL already and is success. aclFinalize is
// never called: ACL is process-wide and other code in the process may still use it.
// aclrtHostRegister/aclrtHostUnregister (newer CANN), aclrtGetVersion and aclGetRecentErrMsg
// are optional.
#include <fmt/core.h>

#include <cstdint>
#include <cstdlib>

#include "device/dynamic_library.h"
#include "device/runtime_util.h"
#include "kvport/device.h"

namespace kvport {
namespace {

using device_internal::CheckBuffer;
using device_internal::CheckCopyArguments;
using device_internal::DescribeCopy;
using device_internal::DescribeLibrary;
using device_internal::DescribeSized;
using device_internal::DeviceStreams;
using device_internal::JoinNames;
using device_internal::OpenedLibrary;
using device_internal::ResolveSymbol;

using aclError = int;
constexpr aclError kAclSuccess = 0;
constexpr aclError kAclErrorRepeatInitialize = 100002;
constexpr int kAclMemMallocHugeFirst = 0;  // aclrtMemMallocPolicy
constexpr int kAclHostRegisterMapped = 0;  // aclrtHostRegisterType

struct AclApi {
  aclError (*init)(const char*) = nullptr;
  aclError (*get_device_count)(uint32_t*) = nullptr;
  aclError (*get_device)(int32_t*) = nullptr;
  aclError (*set_device)(int32_t) = nullptr;
  aclError (*memcpy)(void*, size_t, const void*, size_t, int) = nullptr;
  aclError (*create_stream)(void**) = nullptr;
  aclError (*memcpy_async)(void*, size_t, const void*, size_t, int, void*) = nullptr;
  aclError (*synchronize_stream)(void*) = nullptr;
  aclError (*malloc)(void**, size_t, int) = nullptr;
  aclError (*free)(void*) = nullptr;
  aclError (*malloc_host)(void**, size_t) = nullptr;
  aclError (*free_host)(void*) = nullptr;
  // Optional.
  aclError (*host_register)(void*, uint64_t, int, void**) = nullptr;
  aclError (*host_unregister)(void*) = nullptr;
  aclError (*get_version)(int32_t*, int32_t*, int32_t*) = nullptr;
  const char* (*get_recent_err_msg)() = nullptr;
};

// Used when the runtime has no aclGetRecentErrMsg or it returns nothing.
std::string_view KnownAclError(aclError err) {
  switch (err) {
    case 100000:
      return "ACL_ERROR_INVALID_PARAM";
    case 100002:
      return "ACL_ERROR_REPEAT_INITIALIZE";
    case 107000:
      return "ACL_ERROR_RT_PARAM_INVALID";
    case 107001:
      return "ACL_ERROR_RT_INVALID_DEVICEID";
    case 107002:
      return "ACL_ERROR_RT_CONTEXT_NULL: no current device on this thread (call SetDevice)";
    default:
      return "ACL error";
  }
}

class AscendDeviceRuntime final : public DeviceRuntime {
 public:
  explicit AscendDeviceRuntime(std::string_view library) {
    info_.kind = RuntimeKind::kAscend;
    Open(library);
  }

  const RuntimeInfo& info() const override { return info_; }

  Status SetDevice(int device) const override {
    KVPORT_RETURN_IF_ERROR(RequireUsable("aclrtSetDevice"));
    if (device < 0 || device >= info_.device_count) {
      return Status::InvalidArgument(fmt::format(
          "aclrtSetDevice({}): this host has {} Ascend devices", device, info_.device_count));
    }
    return Check(fmt::format("aclrtSetDevice({})", device), api_.set_device(device));
  }

  Status Memcpy(void* dst, const void* src, size_t bytes, MemcpyKind kind) const override {
    KVPORT_RETURN_IF_ERROR(RequireUsable("aclrtMemcpy"));
    KVPORT_RETURN_IF_ERROR(CheckCopyArguments(dst, src, bytes, kind));
    if (bytes == 0) return Status::Ok();
    return Check(DescribeCopy("aclrtMemcpy", kind, bytes),
                 api_.memcpy(dst, bytes, src, bytes, static_cast<int>(kind)));
  }

  Status CopyOnDevice(int device, void* dst, const void* src, size_t bytes,
                      MemcpyKind kind) const override {
    KVPORT_RETURN_IF_ERROR(RequireUsable("aclrtMemcpyAsync"));
    KVPORT_RETURN_IF_ERROR(CheckCopyArguments(dst, src, bytes, kind));
    if (bytes == 0) return Status::Ok();
    if (device < 0 || device >= info_.device_count) {
      return Status::InvalidArgument(fmt::format(
          "copy on Ascend device {}: this host has {} Ascend devices", device, info_.device_count));
    }
    // A thread that never set a device has none (aclrtGetDevice fails): it keeps `device`.
    int32_t caller_device = -1;
    if (api_.get_device(&caller_device) != kAclSuccess) caller_device = -1;
    if (caller_device != device) {
      KVPORT_RETURN_IF_ERROR(
          Check(fmt::format("aclrtSetDevice({})", device), api_.set_device(device)));
    }
    Status copied = [&]() -> Status {
      KVPORT_ASSIGN_OR_RETURN(void* stream, streams_.Get(device, [&](void** made) {
        return Check("aclrtCreateStream", api_.create_stream(made));
      }));
      KVPORT_RETURN_IF_ERROR(
          Check(DescribeCopy("aclrtMemcpyAsync", kind, bytes),
                api_.memcpy_async(dst, bytes, src, bytes, static_cast<int>(kind), stream)));
      return Check("aclrtSynchronizeStream", api_.synchronize_stream(stream));
    }();
    if (caller_device >= 0 && caller_device != device) {
      Status restored =
          Check(fmt::format("aclrtSetDevice({}) (the caller's device, restored)", caller_device),
                api_.set_device(caller_device));
      if (copied.ok()) copied = restored;
    }
    return copied;
  }

  Result<void*> AllocDevice(size_t bytes) const override {
    KVPORT_RETURN_IF_ERROR(RequireUsable("aclrtMalloc"));
    if (bytes == 0) return Status::InvalidArgument("aclrtMalloc: size is 0 bytes");
    void* ptr = nullptr;
    KVPORT_RETURN_IF_ERROR(Check(DescribeSized("aclrtMalloc", bytes),
                                 api_.malloc(&ptr, bytes, kAclMemMallocHugeFirst)));
    return NonNull("aclrtMalloc", bytes, ptr);
  }
  Status FreeDevice(void* ptr) const override {
    KVPORT_RETURN_IF_ERROR(RequireUsable("aclrtFree"));
    if (ptr == nullptr) return Status::Ok();
    return Check("aclrtFree", api_.free(ptr));
  }

  Result<void*> AllocPinnedHost(size_t bytes) const override {
    KVPORT_RETURN_IF_ERROR(RequireUsable("aclrtMallocHost"));
    if (bytes == 0) return Status::InvalidArgument("aclrtMallocHost: size is 0 bytes");
    void* ptr = nullptr;
    KVPORT_RETURN_IF_ERROR(
        Check(DescribeSized("aclrtMallocHost", bytes), api_.malloc_host(&ptr, bytes)));
    return NonNull("aclrtMallocHost", bytes, ptr);
  }
  Status FreePinnedHost(void* ptr) const override {
    KVPORT_RETURN_IF_ERROR(RequireUsable("aclrtFreeHost"));
    if (ptr == nullptr) return Status::Ok();
    return Check("aclrtFreeHost", api_.free_host(ptr));
  }

  Status RegisterHost(void* ptr, size_t bytes) const override {
    KVPORT_RETURN_IF_ERROR(RequireUsable("aclrtHostRegister"));
    KVPORT_RETURN_IF_ERROR(CheckBuffer("aclrtHostRegister", ptr, bytes, true));
    if (api_.host_register == nullptr) return MissingOptional("aclrtHostRegister");
    void* device_ptr = nullptr;  // the mapped device address; staging copies do not need it
    return Check(DescribeSized("aclrtHostRegister", bytes),
                 api_.host_register(ptr, bytes, kAclHostRegisterMapped, &device_ptr));
  }
  Status UnregisterHost(void* ptr) const override {
    KVPORT_RETURN_IF_ERROR(RequireUsable("aclrtHostUnregister"));
    KVPORT_RETURN_IF_ERROR(CheckBuffer("aclrtHostUnregister", ptr, 0, false));
    if (api_.host_unregister == nullptr) return MissingOptional("aclrtHostUnregister");
    return Check("aclrtHostUnregister", api_.host_unregister(ptr));
  }

 private:
  void Open(std::string_view library) {
    std::vector<std::string> candidates;
    if (library.empty()) {
      candidates.emplace_back("libascendcl.so");
      // Read-only: CANN's set_env.sh exports ASCEND_HOME_PATH; we never set it.
      const char* home = std::getenv("ASCEND_HOME_PATH");
      if (home != nullptr && home[0] != '\0')
        candidates.push_back(std::string(home) + "/lib64/libascendcl.so");
    } else {
      candidates.emplace_back(library);
    }
    OpenedLibrary lib = device_internal::OpenFirstLibrary("libascendcl", candidates);
    if (lib.handle == nullptr) {
      info_.state = lib.failure;
      info_.reason = lib.reason;
      return;
    }
    info_.library = lib.name;
    info_.library_path = lib.path;
    described_ = DescribeLibrary(lib);

    std::vector<std::string> missing;
    void* h = lib.handle;
    ResolveSymbol(h, "aclInit", api_.init, &missing);
    ResolveSymbol(h, "aclrtGetDeviceCount", api_.get_device_count, &missing);
    ResolveSymbol(h, "aclrtGetDevice", api_.get_device, &missing);
    ResolveSymbol(h, "aclrtSetDevice", api_.set_device, &missing);
    ResolveSymbol(h, "aclrtMemcpy", api_.memcpy, &missing);
    ResolveSymbol(h, "aclrtCreateStream", api_.create_stream, &missing);
    ResolveSymbol(h, "aclrtMemcpyAsync", api_.memcpy_async, &missing);
    ResolveSymbol(h, "aclrtSynchronizeStream", api_.synchronize_stream, &missing);
    ResolveSymbol(h, "aclrtMalloc", api_.malloc, &missing);
    ResolveSymbol(h, "aclrtFree", api_.free, &missing);
    ResolveSymbol(h, "aclrtMallocHost", api_.malloc_host, &missing);
    ResolveSymbol(h, "aclrtFreeHost", api_.free_host, &missing);
    ResolveSymbol(h, "aclrtHostRegister", api_.host_register, nullptr);
    ResolveSymbol(h, "aclrtHostUnregister", api_.host_unregister, nullptr);
    ResolveSymbol(h, "aclrtGetVersion", api_.get_version, nullptr);
    ResolveSymbol(h, "aclGetRecentErrMsg", api_.get_recent_err_msg, nullptr);
    if (!missing.empty()) {
      info_.state = RuntimeState::kUnusable;
      info_.reason =
          fmt::format("{} lacks {}, required by kvport (an older or incomplete CANN runtime)",
                      described_, JoinNames(missing));
      return;
    }

    const aclError init = api_.init(nullptr);
    if (init != kAclSuccess && init != kAclErrorRepeatInitialize) {
      info_.state = RuntimeState::kUnusable;
      info_.reason = fmt::format("{} loaded but aclInit failed: error {} ({})", described_, init,
                                 ErrorString(init));
      return;
    }

    if (api_.get_version != nullptr) {
      int32_t major = 0, minor = 0, patch = 0;
      if (api_.get_version(&major, &minor, &patch) == kAclSuccess)
        info_.version = fmt::format("{}.{}.{}", major, minor, patch);
    }

    uint32_t count = 0;
    const aclError err = api_.get_device_count(&count);
    if (err != kAclSuccess) {
      info_.state = RuntimeState::kUnusable;
      info_.reason = fmt::format("{} loaded but aclrtGetDeviceCount failed: error {} ({})",
                                 described_, err, ErrorString(err));
      return;
    }
    if (count == 0) {
      info_.state = RuntimeState::kUnusable;
      info_.reason = fmt::format("{} loaded but aclrtGetDeviceCount reports 0 devices", described_);
      return;
    }
    info_.device_count = static_cast<int>(count);
    info_.state = RuntimeState::kAvailable;
  }

  std::string ErrorString(aclError err) const {
    if (api_.get_recent_err_msg != nullptr) {
      const char* msg = api_.get_recent_err_msg();
      if (msg != nullptr && msg[0] != '\0') return msg;
    }
    return std::string(KnownAclError(err));
  }

  Status Check(std::string_view call, aclError err) const {
    if (err == kAclSuccess) return Status::Ok();
    return device_internal::RuntimeCallError(call, err, ErrorString(err));
  }

  static Result<void*> NonNull(std::string_view function, size_t bytes, void* ptr) {
    if (ptr != nullptr) return ptr;
    return Status::DeviceError(
        fmt::format("{} returned success and a null pointer", DescribeSized(function, bytes)));
  }

  Status MissingOptional(std::string_view symbol) const {
    return Status::NotSupported(
        fmt::format("{} has no {} (it arrived in a later CANN release)", described_, symbol));
  }

  RuntimeInfo info_;
  AclApi api_;
  std::string described_;
  mutable DeviceStreams streams_;
};

}  // namespace

std::unique_ptr<DeviceRuntime> OpenAscendRuntime(std::string_view library) {
  return std::make_unique<AscendDeviceRuntime>(library);
}

}  // namespace kvport
