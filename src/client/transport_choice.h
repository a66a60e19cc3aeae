// SPDX-License-Identifier: Apache-2.0
// Choosing the data path at Client::Init: shared memory with a node on this host, UCX with a
// node that offers it when the choice wants UCX, TCP otherwise.
//
//   unix:/PATH endpoint   shared memory, forced: the pool's sessions attach the node's arena. A
//                         node that declines (another user, shared memory off) is still served
//                         over that Unix socket, with the bytes in the frames ("Unix socket").
//   HOST:PORT endpoint    TCP first. With eic_trans_type 0 (auto), 2 (RDMA) or 3 (GPUDirect),
//                         the client asks the node (NODE_INFO, protocol version 3) who it is;
//                         when the node runs on this host (same boot id), offers shared memory
//                         and answers on its Unix socket with the same node id, the client
//                         switches to it. Otherwise, when the resolved choice wants UCX
//                         (TransportChoice::ucx) and the node offers it (protocol version 9), a
//                         new pool's sessions attach to the node's UCX service (UCX_ATTACH) and
//                         values move as UCX messages the node checks. eic_trans_type 1 keeps TCP.
//
// Every outcome carries the one-line reason the client logs (a fallback is logged as a warning).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "client/connection_pool.h"
#include "client/endpoint.h"
#include "client/transport.h"
#include "kvport/status.h"
#include "kvport/transport.h"

namespace kvport::client {

struct ChosenTransport {
  std::unique_ptr<Transport> transport;
  std::string reason;
  bool fallback = false;  // something better was asked for or possible and is not used
};

// Opens the pool (connecting its first connection) of the transport for `address`, given the
// resolved eic_trans_type `choice`, the pool's options and the UCX lanes' devices
// (InitOptions::ucx_devices). Errors: those of the first connect (Unavailable, Timeout,
// NotSupported, Corruption).
Result<ChosenTransport> OpenTransport(const NodeAddress& address, const TransportChoice& choice,
                                      const PoolOptions& pool_options,
                                      std::chrono::milliseconds connect_timeout,
                                      const std::vector<std::string>& ucx_devices = {});

}  // namespace kvport::client
