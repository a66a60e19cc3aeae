// SPDX-License-Identifier: Apache-2.0
// Resolving eic_trans_type against what this build and host can do. See kvport/transport.h.
#include "kvport/transport.h"

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "device/dynamic_library.h"
#include "kvport/log.h"
#include "kvport/ucx.h"

namespace kvport {
namespace {

std::string Label(TransportKind kind) {
  return fmt::format("eic_trans_type {} ({})", static_cast<int>(kind), TransportKindName(kind));
}

std::string RdmaDevicesSeen(const TransportEnvironment& env) {
  if (env.rdma_devices.empty()) return "no RDMA devices seen on this host";
  return "RDMA devices seen on this host: " + device_internal::JoinNames(env.rdma_devices);
}

// Why GPUDirect RDMA cannot be used here: the missing CUDA runtime (empty when it is usable).
std::string CudaBlocker(const TransportEnvironment& env) {
  const std::string label = Label(TransportKind::kGpuDirectRdma);
  if (env.cuda == nullptr) return label + " needs a usable CUDA runtime; none was looked for";
  if (!env.cuda->usable()) return label + " needs a usable CUDA runtime; " + env.cuda->reason();
  return "";
}

// "UCX 1.13.1 (self, tcp, sysv, posix, cma)".
std::string DescribeUcx(const UcxRuntime& ucx) {
  return fmt::format("UCX {} ({})", ucx.info().version,
                     device_internal::JoinNames(UcxTransportNames(ucx.info())));
}

// Why UCX is not used here; empty when it is usable.
std::string UcxBlocker(const TransportEnvironment& env) {
  if (env.ucx == nullptr) return "UCX was not looked for";
  if (!env.ucx->usable()) return "UCX is not usable here: " + env.ucx->reason();
  return "";
}

// Why device buffers are staged rather than moved by UCX directly (GPUDirect RDMA).
std::string StagingReason(const TransportEnvironment& env) {
  if (!UcxBlocker(env).empty()) return UcxBlocker(env);
  if (!env.ucx->SupportsMemoryType("cuda")) {
    return "this UCX lists no cuda memory (a CUDA-enabled UCX is needed, named by ucx_library)";
  }
  return "kvport does not register device memory with UCX yet";
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
      if (const std::string blocker = UcxBlocker(env); !blocker.empty()) {
        choice.fallback = true;
        choice.reason = fmt::format("{}: {}, so this client uses TCP ({})", Label(requested),
                                    blocker, RdmaDevicesSeen(env));
        return choice;
      }
      choice.resolved = TransportKind::kRdma;
      choice.ucx = true;
      choice.reason =
          fmt::format("{}: {}, node-checked UCX messages with a node that offers UCX ({})",
                      Label(requested), DescribeUcx(*env.ucx), RdmaDevicesSeen(env));
      if (!UcxHasRdma(env.ucx->info())) {
        // As asked, but worth a warning: UCX over TCP is slower than kvport's own TCP
        // (docs/performance.md, "UCX").
        choice.fallback = true;
        choice.reason +=
            "; UCX has no RDMA transport here, and UCX over TCP is slower than kvport's TCP "
            "(eic_trans_type 0 or 1 uses that)";
      }
      return choice;
    case TransportKind::kGpuDirectRdma: {
      if (const std::string blocker = CudaBlocker(env); !blocker.empty()) {
        return Status::NotSupported(blocker);
      }
      choice.resolved = TransportKind::kGpuDirectRdma;
      choice.fallback = true;  // staged: not what GPUDirect promises
      choice.ucx = UcxBlocker(env).empty();
      choice.reason = fmt::format(
          "{}: the CUDA runtime is usable ({} devices); device buffers are staged through pinned "
          "host memory ({}); values go {}",
          Label(requested), env.cuda->device_count(), StagingReason(env),
          choice.ucx ? "over " + DescribeUcx(*env.ucx) + " to a node that offers it"
                     : std::string("over TCP"));
      return choice;
    }
    case TransportKind::kAuto: {
      // Best first: RDMA hardware through UCX, then TCP (GPUDirect RDMA is asked for by name:
      // automatic selection never loads CUDA). Say why each better one was skipped.
      std::string rdma_skip = UcxBlocker(env);
      if (rdma_skip.empty() && !UcxHasRdma(env.ucx->info())) {
        rdma_skip = DescribeUcx(*env.ucx) + " has no RDMA transport here";
      }
      if (rdma_skip.empty()) {
        choice.resolved = TransportKind::kRdma;
        choice.ucx = true;
        choice.reason = fmt::format("{}: RDMA over {} with a node that offers UCX ({})",
                                    Label(requested), DescribeUcx(*env.ucx), RdmaDevicesSeen(env));
        return choice;
      }
      choice.fallback = true;
      choice.reason = fmt::format(
          "{}: using TCP; skipped GPUDirect RDMA (ask for it: eic_trans_type 3); "
          "skipped RDMA ({}; {})",
          Label(requested), rdma_skip, RdmaDevicesSeen(env));
      return choice;
    }
  }
  return Status::Internal("unhandled transport kind");
}

TransportEnvironment HostTransportEnvironment() {
  TransportEnvironment env;
  env.cuda = &CudaRuntime();
  env.ucx = &ProcessUcxRuntime();
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
