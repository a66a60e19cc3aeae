// SPDX-License-Identifier: Apache-2.0
// Accelerator runtimes, found at run time and never required.
//
// kvport runs unchanged on CPU-only, CUDA and Ascend hosts. The CUDA runtime (libcudart) and
// the Ascend runtime (libascendcl) are opened with dlopen(RTLD_NOW | RTLD_LOCAL) and their
// symbols resolved with dlsym; kvport never links them. A missing runtime is a normal state, not
// an error: only a call that needs the runtime fails, with a message naming what is missing.
//
// A DeviceRuntime is in one of three states:
//   available  the library loaded, every required symbol resolved, at least one device is seen;
//   absent     no library was found (the reason lists every name or path tried);
//   unusable   the library is present but cannot be used: it failed to load, lacks a required
//              symbol (an older runtime), or its device count call failed or reported zero.
//              The reason names the library file and carries the runtime's own message, e.g.
//              "libcudart.so.13 (/usr/local/cuda/lib64/libcudart.so.13) loaded but
//              cudaGetDeviceCount failed: error 35 (CUDA driver version is insufficient for CUDA
//              runtime version)".
//
// Nothing here changes process-global state: no setenv, no LD_LIBRARY_PATH edits, no
// RTLD_GLOBAL, no interposed symbols, so other code's dlopen calls are unaffected. A runtime
// library, once opened, is never unloaded (CUDA and ACL register exit-time handlers that must
// stay mapped).
//
// Thread safety: a DeviceRuntime never changes after it is opened (but for the copy streams it
// makes on first use, under its own lock); all its methods may be called from any thread. The
// device a copy or allocation targets is the calling thread's current device (SetDevice); CUDA
// defaults to device 0, Ascend requires SetDevice on each thread first (ACL has no default
// context).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "kvport/export.h"
#include "kvport/status.h"

namespace kvport {

enum class RuntimeKind { kHost, kCuda, kAscend };
// "host", "cuda", "ascend".
KVPORT_API std::string_view RuntimeKindName(RuntimeKind kind);

enum class RuntimeState { kAvailable, kAbsent, kUnusable };
// "available", "absent", "unusable".
KVPORT_API std::string_view RuntimeStateName(RuntimeState state);

// Direction of a copy. Values match both cudaMemcpyKind and aclrtMemcpyKind.
enum class MemcpyKind {
  kHostToHost = 0,
  kHostToDevice = 1,
  kDeviceToHost = 2,
  kDeviceToDevice = 3
};
// "H2H", "H2D", "D2H", "D2D" (as they appear in error messages).
KVPORT_API std::string_view MemcpyKindName(MemcpyKind kind);

// Where to find the runtime libraries. The config loader fills this from cuda_runtime_library /
// ascend_runtime_library / ucx_library (env KVPORT_CUDA_RUNTIME_LIBRARY /
// KVPORT_ASCEND_RUNTIME_LIBRARY / KVPORT_UCX_LIBRARY); the
// device layer reads no config file and no KVPORT_* variable itself.
struct KVPORT_API RuntimeOptions {
  // "" searches libcudart.so.13, .so.12, .so.11.0, then libcudart.so (the dynamic loader's
  // search path). A value containing '/' is a file; one that does not exist reads as absent.
  std::string cuda_runtime_library;
  // "" searches libascendcl.so, then $ASCEND_HOME_PATH/lib64/libascendcl.so.
  std::string ascend_runtime_library;
  // UCX's libucp (kvport/ucx.h): "" searches libucp.so.0, then libucp.so.
  std::string ucx_library;

  bool operator==(const RuntimeOptions&) const = default;
};

// What a runtime reports about itself (kvport doctor prints this).
struct KVPORT_API RuntimeInfo {
  RuntimeKind kind = RuntimeKind::kHost;
  RuntimeState state = RuntimeState::kAvailable;
  // Why the runtime is absent or unusable; empty when available.
  std::string reason;
  // The name given to dlopen ("libcudart.so.13" or a path) and the file it resolved to; both
  // empty when no library loaded.
  std::string library;
  std::string library_path;
  // The runtime's version as it reports it ("13.0"; ACL "major.minor.patch"); empty when the
  // runtime lacks the (optional) version call or it failed.
  std::string version;
  // CUDA only: the driver version cudaDriverGetVersion reports ("none" without a driver).
  std::string driver_version;
  // Devices seen; 0 unless available (the host runtime has none).
  int device_count = 0;
};

class KVPORT_API DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;

  virtual const RuntimeInfo& info() const = 0;
  RuntimeKind kind() const { return info().kind; }
  std::string_view name() const { return RuntimeKindName(kind()); }
  RuntimeState state() const { return info().state; }
  bool usable() const { return state() == RuntimeState::kAvailable; }
  const std::string& reason() const { return info().reason; }
  int device_count() const { return info().device_count; }

  // OK when usable; otherwise NotSupported "<purpose> needs a usable CUDA runtime; <reason>".
  Status RequireUsable(std::string_view purpose) const;

  // Every call below returns NotSupported (with the reason) on a runtime that is not usable,
  // InvalidArgument for a null pointer or zero size where bytes are expected, and DeviceError
  // when the runtime call fails; the DeviceError message names the call and carries the
  // runtime's numeric code and string: "cudaMemcpy(D2H, 4096 bytes) failed: error 1 (invalid
  // argument)".

  // Makes `device` (0 <= device < device_count()) the calling thread's current device.
  virtual Status SetDevice(int device) const = 0;
  // Copies `bytes` from src to dst in the given direction on the current device, on the
  // runtime's default stream; synchronous. 0 bytes is a no-op.
  virtual Status Memcpy(void* dst, const void* src, size_t bytes, MemcpyKind kind) const = 0;
  // Copies as the client's staging does, without touching the caller's device state: on
  // `device`, on a stream kvport owns there (made at the first copy, kept while the runtime is;
  // CUDA: one that does not synchronize with the default stream), waiting for that stream only.
  // Work the caller queued on its own streams is neither waited for nor delayed, so device work
  // that produced a put's bytes must be complete before the call, as for any stream of its own.
  // The calling thread's current device is the same afterwards (Ascend: where the thread had
  // one; ACL cannot leave a thread without a device once it has one). 0 bytes is a no-op.
  virtual Status CopyOnDevice(int device, void* dst, const void* src, size_t bytes,
                              MemcpyKind kind) const = 0;
  // Device memory on the current device (the host runtime returns ordinary heap memory).
  virtual Result<void*> AllocDevice(size_t bytes) const = 0;
  virtual Status FreeDevice(void* ptr) const = 0;
  // Page-locked host memory for staging copies (the host runtime: page-aligned heap memory).
  virtual Result<void*> AllocPinnedHost(size_t bytes) const = 0;
  virtual Status FreePinnedHost(void* ptr) const = 0;
  // Pins an existing host range for fast copies; undo with UnregisterHost(ptr). The host
  // runtime accepts both and does nothing. Ascend: NotSupported when the runtime predates
  // aclrtHostRegister.
  virtual Status RegisterHost(void* ptr, size_t bytes) const = 0;
  virtual Status UnregisterHost(void* ptr) const = 0;

  // Shorthands for the staging directions.
  Status CopyToDevice(void* device_dst, const void* host_src, size_t bytes) const {
    return Memcpy(device_dst, host_src, bytes, MemcpyKind::kHostToDevice);
  }
  Status CopyToHost(void* host_dst, const void* device_src, size_t bytes) const {
    return Memcpy(host_dst, device_src, bytes, MemcpyKind::kDeviceToHost);
  }
};

// Fresh, independent runtimes (tests load fakes this way; kvport doctor and the process-wide
// accessors below use them too). Opening never fails: the result is a runtime in one of the
// three states. `library` has the meaning of the RuntimeOptions fields ("" = search).
KVPORT_API std::unique_ptr<DeviceRuntime> OpenHostRuntime();
KVPORT_API std::unique_ptr<DeviceRuntime> OpenCudaRuntime(std::string_view library);
// Calls aclInit(nullptr); ACL_ERROR_REPEAT_INITIALIZE (someone in this process initialized ACL
// already) counts as success. ACL is never finalized.
KVPORT_API std::unique_ptr<DeviceRuntime> OpenAscendRuntime(std::string_view library);

// --- Process-wide runtimes ------------------------------------------------------------------
//
// Each runtime is opened once per process, at its first use, thread-safely: concurrent first
// calls all get the same object. The options they open with are fixed by the first of
//   (a) ConfigureDeviceRuntimes(options), or
//   (b) the first call of CudaRuntime() or AscendRuntime() (which fixes the default options).
// The first configuration wins: a later ConfigureDeviceRuntimes with equal options is OK, with
// different options it returns InvalidArgument naming both and changes nothing. Configure early
// (at client or server init) before anything may ask for a runtime.
KVPORT_API Status ConfigureDeviceRuntimes(const RuntimeOptions& options);
// The options in effect (default-constructed if none were configured yet).
KVPORT_API RuntimeOptions DeviceRuntimeOptions();

KVPORT_API const DeviceRuntime& HostRuntime();
KVPORT_API const DeviceRuntime& CudaRuntime();
KVPORT_API const DeviceRuntime& AscendRuntime();
KVPORT_API const DeviceRuntime& ProcessRuntime(RuntimeKind kind);

// The process-wide runtime for memory of `kind` if it is usable, else NotSupported naming the
// missing piece ("cuda memory needs a usable CUDA runtime; libcudart not found: ...").
KVPORT_API Result<const DeviceRuntime*> UsableRuntime(RuntimeKind kind);

}  // namespace kvport
