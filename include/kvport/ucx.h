// SPDX-License-Identifier: Apache-2.0
// UCX (Unified Communication X: RDMA, GPUDirect RDMA, TCP and shared memory behind one API),
// found at run time like the accelerator runtimes (kvport/device.h) and never required.
//
// libucp is opened with dlopen(RTLD_NOW | RTLD_LOCAL); kvport never links it, so a host without
// UCX runs everything else, and a host's own UCX (a CUDA-enabled build, an RDMA vendor's) is used
// by naming its libucp (config `ucx_library`, env KVPORT_UCX_LIBRARY) without rebuilding kvport.
// The build compiles against UCX's headers (Debian's libucx-dev) for the structure layouts; a
// build made without them reports UCX absent, saying so.
//
// States, as for a DeviceRuntime:
//   available  libucp loaded, every call kvport needs resolved, its version is at least the API
//              this build was compiled against, and a UCP context could be made with this
//              process's UCX_* environment (UCX_TLS, UCX_NET_DEVICES...);
//   absent     no libucp was found (the reason lists what was tried), or this build has no UCX;
//   unusable   libucp is present but failed to load, lacks a call, is too old, or could not make
//              a context (the reason carries UCX's own status string).
//
// Opening makes one UCP context to ask what it supports and cleans it up again; it changes no
// process-global state (no setenv), and the library, once opened, stays mapped.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvport/device.h"
#include "kvport/export.h"
#include "kvport/status.h"

namespace kvport {

// One transport on one device, as UCT lists them (`ucx_info -d`): "tcp" on "lo", "posix" on
// "memory", "rc_mlx5" on "mlx5_0:1"; memory_domain is the component's memory domain ("tcp",
// "posix", "mlx5_0").
struct KVPORT_API UcxResource {
  std::string transport;
  std::string device;
  std::string memory_domain;
  bool operator==(const UcxResource&) const = default;
};

struct KVPORT_API UcxInfo {
  RuntimeState state = RuntimeState::kAbsent;
  std::string reason;        // why absent or unusable; empty when available
  std::string library;       // the name given to dlopen ("libucp.so.0" or a path)
  std::string library_path;  // the file it resolved to
  std::string version;       // ucp_get_version: "1.13.1"; empty when no library loaded
  // Every transport/device pair of every memory domain UCT finds (whatever UCX_TLS says: these
  // are what exists, a context then uses the subset its configuration allows).
  std::vector<UcxResource> resources;
  // Memory a UCP context made with this process's configuration can register and move:
  // UCX's names ("host", "cuda", "cuda-managed", "rocm", "ze-device"...). A CUDA-enabled UCX
  // lists "cuda": the precondition for GPUDirect RDMA.
  std::vector<std::string> memory_types;
};

class KVPORT_API UcxRuntime {
 public:
  virtual ~UcxRuntime() = default;
  virtual const UcxInfo& info() const = 0;
  RuntimeState state() const { return info().state; }
  bool usable() const { return state() == RuntimeState::kAvailable; }
  const std::string& reason() const { return info().reason; }
  // OK when usable; otherwise NotSupported "<purpose> needs a usable UCX; <reason>".
  Status RequireUsable(std::string_view purpose) const;
  // Whether a context supports memory of this kind ("host", "cuda").
  bool SupportsMemoryType(std::string_view name) const;
};

// A fresh runtime. `library` is the `ucx_library` setting: "" searches libucp.so.0 then
// libucp.so (the loader's search path); a value containing '/' is a file (absent when it does
// not exist); any other value is a soname. Never fails: the result is in one of the states.
KVPORT_API std::unique_ptr<UcxRuntime> OpenUcxRuntime(std::string_view library);

// The process-wide UCX runtime: opened once, at its first use, with the ucx_library of the device
// runtime options (ConfigureDeviceRuntimes, kvport/device.h; the first use fixes them as
// CudaRuntime() does). What a client's UCX transport uses.
KVPORT_API const UcxRuntime& ProcessUcxRuntime();

// Whether info.resources include a transport over RDMA hardware (InfiniBand / RoCE verbs: UCT's
// rc_*, dc_*, ud_*; AWS EFA's srd), as opposed to UCX over TCP or shared memory alone.
KVPORT_API bool UcxHasRdma(const UcxInfo& info);

// Each transport of info.resources once, in UCT's order ("self", "tcp", "sysv", ...).
KVPORT_API std::vector<std::string> UcxTransportNames(const UcxInfo& info);

// The UCP API version this build was compiled against ("1.13"), or "" for a build without UCX.
KVPORT_API std::string_view UcxBuildApiVersion();

}  // namespace kvport
