// SPDX-License-Identifier: Apache-2.0
// Names, the shared parts of DeviceRuntime, and the process-wide runtimes.
#include <fmt/core.h>

#include <mutex>

#include "device/runtime_util.h"
#include "kvport/device.h"
#include "kvport/log.h"
#include "kvport/ucx.h"

namespace kvport {

std::string_view RuntimeKindName(RuntimeKind kind) {
  switch (kind) {
    case RuntimeKind::kHost:
      return "host";
    case RuntimeKind::kCuda:
      return "cuda";
    case RuntimeKind::kAscend:
      return "ascend";
  }
  return "unknown";
}

std::string_view RuntimeStateName(RuntimeState state) {
  switch (state) {
    case RuntimeState::kAvailable:
      return "available";
    case RuntimeState::kAbsent:
      return "absent";
    case RuntimeState::kUnusable:
      return "unusable";
  }
  return "unknown";
}

std::string_view MemcpyKindName(MemcpyKind kind) {
  switch (kind) {
    case MemcpyKind::kHostToHost:
      return "H2H";
    case MemcpyKind::kHostToDevice:
      return "H2D";
    case MemcpyKind::kDeviceToHost:
      return "D2H";
    case MemcpyKind::kDeviceToDevice:
      return "D2D";
  }
  return "unknown";
}

Status DeviceRuntime::RequireUsable(std::string_view purpose) const {
  if (usable()) return Status::Ok();
  return Status::NotSupported(fmt::format("{} needs a usable {}; {}", purpose,
                                          device_internal::RuntimeDisplayName(kind()), reason()));
}

namespace {

// The options the process-wide runtimes open with; fixed by the first configuration or use.
struct ProcessOptions {
  std::mutex mu;
  bool fixed = false;
  RuntimeOptions options;
};

ProcessOptions& GlobalOptions() {
  static ProcessOptions* options = new ProcessOptions();  // never destroyed: used until exit
  return *options;
}

RuntimeOptions FixOptions() {
  ProcessOptions& g = GlobalOptions();
  std::lock_guard<std::mutex> lock(g.mu);
  g.fixed = true;
  return g.options;
}

std::string DescribeOptions(const RuntimeOptions& o) {
  return fmt::format(
      "cuda_runtime_library=\"{}\", ascend_runtime_library=\"{}\", ucx_library=\"{}\"",
      o.cuda_runtime_library, o.ascend_runtime_library, o.ucx_library);
}

// Runtimes are deliberately never destroyed: threads may still use them during exit, and their
// libraries stay loaded anyway.
const DeviceRuntime* Announce(std::unique_ptr<DeviceRuntime> runtime) {
  const RuntimeInfo& info = runtime->info();
  const std::string_view display = device_internal::RuntimeDisplayName(info.kind);
  if (info.state == RuntimeState::kAvailable) {
    log::Info("{}: available, {} devices, {}", display, info.device_count, info.library_path);
  } else if (info.state == RuntimeState::kUnusable) {
    log::Info("{}: present but unusable: {}", display, info.reason);
  } else {
    log::Debug("{}: absent: {}", display, info.reason);
  }
  return runtime.release();
}

}  // namespace

Status ConfigureDeviceRuntimes(const RuntimeOptions& options) {
  ProcessOptions& g = GlobalOptions();
  std::lock_guard<std::mutex> lock(g.mu);
  if (!g.fixed) {
    g.options = options;
    g.fixed = true;
    return Status::Ok();
  }
  if (g.options == options) return Status::Ok();
  return Status::InvalidArgument(
      fmt::format("device runtimes are already configured ({}); the first configuration wins, "
                  "so {} was not applied",
                  DescribeOptions(g.options), DescribeOptions(options)));
}

RuntimeOptions DeviceRuntimeOptions() {
  ProcessOptions& g = GlobalOptions();
  std::lock_guard<std::mutex> lock(g.mu);
  return g.options;
}

// Function-local statics: C++ guarantees one initialization, and concurrent first callers
// wait for it, so every thread gets the same object.
const DeviceRuntime& HostRuntime() {
  static const DeviceRuntime* runtime = OpenHostRuntime().release();
  return *runtime;
}

const DeviceRuntime& CudaRuntime() {
  static const DeviceRuntime* runtime =
      Announce(OpenCudaRuntime(FixOptions().cuda_runtime_library));
  return *runtime;
}

const DeviceRuntime& AscendRuntime() {
  static const DeviceRuntime* runtime =
      Announce(OpenAscendRuntime(FixOptions().ascend_runtime_library));
  return *runtime;
}

const UcxRuntime& ProcessUcxRuntime() {
  // Never destroyed either: the library stays mapped, and workers made from it may outlive main.
  static const UcxRuntime* runtime = OpenUcxRuntime(FixOptions().ucx_library).release();
  return *runtime;
}

const DeviceRuntime& ProcessRuntime(RuntimeKind kind) {
  switch (kind) {
    case RuntimeKind::kCuda:
      return CudaRuntime();
    case RuntimeKind::kAscend:
      return AscendRuntime();
    case RuntimeKind::kHost:
      break;
  }
  return HostRuntime();
}

Result<const DeviceRuntime*> UsableRuntime(RuntimeKind kind) {
  const DeviceRuntime& runtime = ProcessRuntime(kind);
  KVPORT_RETURN_IF_ERROR(runtime.RequireUsable(fmt::format("{} memory", RuntimeKindName(kind))));
  return &runtime;
}

}  // namespace kvport
