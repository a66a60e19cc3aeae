// SPDX-License-Identifier: Apache-2.0
// Which data transport a client will actually use, given what it asked for and this host.
//
// EIC configurations name the transport with eic_trans_type: 1 TCP, 2 RDMA, 3 GPUDirect RDMA
// (LMCache's default; Ascend deployments use 2). kvport adds 0 = automatic. What this build
// offers today:
//   TCP   always.
//   RDMA  no RDMA (UCX) transport is built yet: a type-2 configuration initializes and is served
//         over TCP; the choice's reason says so (and lists the RDMA devices seen).
//   GDR   needs a usable CUDA runtime, and the GPUDirect transport is not built yet either, so
//         type 3 is NotSupported; the message names the missing piece, e.g. "eic_trans_type 3
//         (GPUDirect RDMA) needs a usable CUDA runtime; libcudart.so.13 (...) loaded but
//         cudaGetDeviceCount failed: error 35 (...)".
//   auto  the best of the above that works here (today: TCP), with the reason for each skip.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kvport/device.h"
#include "kvport/export.h"
#include "kvport/status.h"

namespace kvport {

// Values are eic_trans_type's.
enum class TransportKind { kAuto = 0, kTcp = 1, kRdma = 2, kGpuDirectRdma = 3 };
// "auto", "TCP", "RDMA", "GPUDirect RDMA".
KVPORT_API std::string_view TransportKindName(TransportKind kind);

struct KVPORT_API TransportChoice {
  TransportKind requested = TransportKind::kTcp;
  TransportKind resolved = TransportKind::kTcp;  // never kAuto
  // True when `resolved` differs from what was asked (RDMA served over TCP, or auto).
  bool fallback = false;
  // One line saying what will be used and why; for the client to log at init.
  std::string reason;
};

// What the resolution depends on. `cuda` may be any runtime (tests pass fakes).
struct KVPORT_API TransportEnvironment {
  const DeviceRuntime* cuda = nullptr;    // null reads as "no CUDA runtime"
  std::vector<std::string> rdma_devices;  // e.g. {"mlx5_0"}; see ListRdmaDevices
};

// Pure: no logging, no I/O. Errors: InvalidArgument for a value outside 0..3 (listing the
// valid ones); NotSupported for GPUDirect RDMA (see above).
KVPORT_API Result<TransportChoice> ResolveTransport(int eic_trans_type,
                                                    const TransportEnvironment& env);

// The environment of this process: the process-wide CUDA runtime and ListRdmaDevices().
KVPORT_API TransportEnvironment HostTransportEnvironment();

// ResolveTransport against HostTransportEnvironment(), logging the outcome (info when served as
// asked, warn on a fallback, error on failure). What a client calls at init.
KVPORT_API Result<TransportChoice> SelectTransport(int eic_trans_type);

// Names of the RDMA devices under `sysfs_dir` (sorted); empty when the folder does not exist.
KVPORT_API std::vector<std::string> ListRdmaDevices(
    const std::string& sysfs_dir = "/sys/class/infiniband");

}  // namespace kvport
