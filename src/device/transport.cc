// SPDX-License-Identifier: Apache-2.0
// Resolving eic_trans_type against what this build and host can do. See kvport/transport.h.
#include "kvport/transport.h"

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "device/dynamic_library.h"
#include "kvport/log.h"

namespace kvport {
namespace {

std::string Label(TransportKind kind) {
  return fmt::format("eic_trans_type {} ({})", static_cast<int>(kind), TransportKindName(kind));
}

std::string RdmaDevicesSeen(const TransportEnvironment& env) {
  if (env.rdma_devices.empty()) return "no RDMA devices seen on this host";
  return "RDMA devices seen on this host: " + device_internal::JoinNames(env.rdma_devices);
}

// Why GPUDirect RDMA cannot be used here. Today there is always a reason: even with a usable
// CUDA runtime the transport itself is not built yet; the missing runtime is named first
// because it is the piece an operator can act on.
std::string GpuDirectBlocker(const TransportEnvironment& env) {
  const std::string label = Label(TransportKind::kGpuDirectRdma);
  if (env.cuda == nullptr) return label + " needs a usable CUDA runtime; none was looked for";
  if (!env.cuda->usable()) return label + " needs a usable CUDA runtime; " + env.cuda->reason();
  return fmt::format(
      "{}: the CUDA runtime is usable ({} devices) but kvport has no GPUDirect RDMA transport "
      "built yet; use eic_trans_type 1 (TCP) or 2 (RDMA, served over TCP for now)",
      label, env.cuda->device_count());
}

}  // namespace

std::string_view TransportKindName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kAuto:
      return "auto";
    case TransportKind::kTcp:
      return "TCP";
    case TransportKind::kRdma:
      return "RDMA";
    case TransportKind::kGpuDirectRdma:
      return "GPUDirect RDMA";
  }
  return "unknown";
}

Result<TransportChoice> ResolveTransport(int eic_trans_type, const TransportEnvironment& env) {
  if (eic_trans_type < 0 || eic_trans_type > 3) {
    return Status::InvalidArgument(
        fmt::format("eic_trans_type {} is not valid: use 0 (auto), 1 (TCP), 2 (RDMA) or "
                    "3 (GPUDirect RDMA)",
                    eic_trans_type));
  }
  const auto requested = static_cast<TransportKind>(eic_trans_type);
  TransportChoice choice;
  choice.requested = requested;
  choice.resolved = TransportKind::kTcp;
  switch (requested) {
    case TransportKind::kTcp:
      choice.reason = Label(requested) + ": using TCP";
      return choice;
    case TransportKind::kRdma:
      choice.fallback = true;
      choice.reason = fmt::format(
          "{}: no RDMA transport is built into kvport yet, so this client uses TCP ({})",
          Label(requested), RdmaDevicesSeen(env));
      return choice;
    case TransportKind::kGpuDirectRdma:
      return Status::NotSupported(GpuDirectBlocker(env));
    case TransportKind::kAuto:
      // Best first: GPUDirect RDMA, then RDMA, then TCP. Only TCP is built today; say why each
      // better one was skipped.
      choice.fallback = true;
      choice.reason = fmt::format(
          "{}: using TCP; skipped GPUDirect RDMA ({}); skipped RDMA (not built into kvport yet; "
          "{})",
          Label(requested), GpuDirectBlocker(env), RdmaDevicesSeen(env));
      return choice;
  }
  return Status::Internal("unhandled transport kind");
}

TransportEnvironment HostTransportEnvironment() {
  TransportEnvironment env;
  env.cuda = &CudaRuntime();
  env.rdma_devices = ListRdmaDevices();
  return env;
}

Result<TransportChoice> SelectTransport(int eic_trans_type) {
  Result<TransportChoice> choice = ResolveTransport(eic_trans_type, HostTransportEnvironment());
  if (!choice.ok()) {
    log::Error("transport: {}", choice.status().message());
  } else if (choice->fallback) {
    log::Warn("transport: {}", choice->reason);
  } else {
    log::Info("transport: {}", choice->reason);
  }
  return choice;
}

std::vector<std::string> ListRdmaDevices(const std::string& sysfs_dir) {
  std::vector<std::string> names;
  std::error_code ec;
  // The error_code overloads throughout: a folder that vanishes mid-walk must not throw.
  for (std::filesystem::directory_iterator it(sysfs_dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace kvport
