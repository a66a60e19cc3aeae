// SPDX-License-Identifier: Apache-2.0
// Which data transport a client will actually use, given what it asked for and this host.
//
// EIC configurations name the transport with eic_trans_type: 1 TCP, 2 RDMA, 3 GPUDirect RDMA
// (LMCache's default; Ascend deployments use 2). kvport adds 0 = automatic. What each resolves
// to here (the client then settles it with the node it connects to: client/transport_choice.h):
//   TCP   always.
//   RDMA  UCX (kvport/ucx.h) when it is usable on this host: one-sided reads and writes of the
//         arena of a node that offers UCX, over whatever UCX finds (verbs on an RDMA NIC; its
//         tcp and shared-memory transports otherwise). Without a usable UCX the client uses TCP,
//         and the reason says why (and lists the RDMA devices seen).
//   GDR   needs a usable CUDA runtime, otherwise NotSupported naming the missing piece, e.g.
//         "eic_trans_type 3 (GPUDirect RDMA) needs a usable CUDA runtime; libcudart.so.13 (...)
//         loaded but cudaGetDeviceCount failed: error 35 (...)". With one, device buffers are
//         staged through pinned host memory (the reason says why not directly) and the values
//         go as for RDMA: over UCX where usable, TCP otherwise.
//   auto  RDMA over UCX when UCX finds RDMA hardware here, TCP otherwise, with the reason for
//         each skip. Shared memory beats all of them for a node on this host (every kind but 1).
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
  // True when `resolved` differs from what was asked (RDMA served over TCP, or auto), or device
  // buffers are staged instead of moved directly (GPUDirect RDMA).
  bool fallback = false;
  // UCX is usable here and wanted: the client moves values over it with a node that offers it.
  bool ucx = false;
  // One line saying what will be used and why; for the client to log at init.
  std::string reason;
};

class UcxRuntime;

// What the resolution depends on. `cuda` and `ucx` may be any runtimes (tests pass fakes).
struct KVPORT_API TransportEnvironment {
  const DeviceRuntime* cuda = nullptr;    // null reads as "no CUDA runtime"
  const UcxRuntime* ucx = nullptr;        // null reads as "UCX not looked for"
  std::vector<std::string> rdma_devices;  // e.g. {"mlx5_0"}; see ListRdmaDevices
};

// Pure: no logging, no I/O. Errors: InvalidArgument for a value outside 0..3 (listing the
// valid ones); NotSupported for GPUDirect RDMA without a usable CUDA runtime.
KVPORT_API Result<TransportChoice> ResolveTransport(int eic_trans_type,
                                                    const TransportEnvironment& env);

// The environment of this process: the process-wide CUDA and UCX runtimes and ListRdmaDevices().
KVPORT_API TransportEnvironment HostTransportEnvironment();

// ResolveTransport against HostTransportEnvironment(), logging the outcome (info when served as
// asked, warn on a fallback, error on failure). What a client calls at init.
KVPORT_API Result<TransportChoice> SelectTransport(int eic_trans_type);

// Names of the RDMA devices under `sysfs_dir` (sorted); empty when the folder does not exist.
KVPORT_API std::vector<std::string> ListRdmaDevices(
    const std::string& sysfs_dir = "/sys/class/infiniband");

}  // namespace kvport
