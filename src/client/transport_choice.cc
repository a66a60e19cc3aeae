// SPDX-License-Identifier: Apache-2.0
#include "client/transport_choice.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <utility>

#include "client/arena_transport.h"
#include "client/batch_call.h"
#include "client/stream_transport.h"
#include "client/ucx_arena.h"
#include "kvport/host_info.h"
#include "kvport/ucx.h"

namespace kvport::client {

namespace {

Deadline ConnectDeadline(std::chrono::milliseconds connect_timeout) {
  return MonotonicClock::now() + connect_timeout;
}

// NODE_INFO on one connection of `pool`; NotSupported below protocol version 3.
Result<protocol::NodeInfoResponse> AskNodeInfo(
    ConnectionPool& pool, Deadline deadline,
    DecodingHandler<protocol::NodeInfoRequest, protocol::NodeInfoResponse>* handler) {
  KVPORT_ASSIGN_OR_RETURN(std::shared_ptr<Connection> conn, pool.Acquire(deadline));
  if (conn->version() < protocol::kShmVersion) {
    return Status::NotSupported(
        fmt::format("the node speaks protocol version {}, before NODE_INFO", conn->version()));
  }
  KVPORT_RETURN_IF_ERROR(RoundTripOn(*conn, handler, deadline));
  return handler->response;
}

// A shared-memory pool on `unix_path`, connected; with `expected_node` != 0 it must be that
// node (a Unix socket path seen from another container may belong to another node).
Result<std::unique_ptr<Transport>> OpenShm(const std::string& unix_path, PoolOptions options,
                                           std::chrono::milliseconds connect_timeout,
                                           uint64_t expected_node) {
  auto access = std::make_unique<MappedArena>();
  options.arena_mapper = access->mapper();
  NodeAddress address;
  address.unix_path = unix_path;
  auto pool = std::make_unique<ConnectionPool>(address, options);
  KVPORT_RETURN_IF_ERROR(pool->ConnectFirst(ConnectDeadline(connect_timeout)).status());
  if (expected_node != 0) {
    DecodingHandler<protocol::NodeInfoRequest, protocol::NodeInfoResponse> handler;
    KVPORT_ASSIGN_OR_RETURN(protocol::NodeInfoResponse info,
                            AskNodeInfo(*pool, ConnectDeadline(connect_timeout), &handler));
    if (info.node_id != expected_node) {
      return Status::NotSupported(fmt::format("unix:{} belongs to another node (id {:x}, not {:x})",
                                              unix_path, info.node_id, expected_node));
    }
  }
  return std::unique_ptr<Transport>(new ArenaTransport(std::move(access), std::move(pool)));
}

// A UCX pool to the node at `address`, its first connection attached (UCX_ATTACH).
Result<std::unique_ptr<Transport>> OpenUcx(const NodeAddress& address, PoolOptions options,
                                           std::chrono::milliseconds connect_timeout,
                                           const std::vector<std::string>& devices) {
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<UcxArena> access,
                          UcxArena::Open(ProcessUcxRuntime(), devices));
  UcxArena* arena = access.get();  // outlives the pool: the transport destroys it last
  options.attach = [arena](Connection& conn, Deadline deadline) {
    return arena->Attach(conn, deadline);
  };
  auto pool = std::make_unique<ConnectionPool>(address, options);
  KVPORT_RETURN_IF_ERROR(pool->ConnectFirst(ConnectDeadline(connect_timeout)).status());
  return std::unique_ptr<Transport>(new ArenaTransport(std::move(access), std::move(pool)));
}

}  // namespace

Result<ChosenTransport> OpenTransport(const NodeAddress& address, const TransportChoice& choice,
                                      const PoolOptions& pool_options,
                                      std::chrono::milliseconds connect_timeout,
                                      const std::vector<std::string>& ucx_devices) {
  ChosenTransport chosen;
  if (address.is_unix()) {
    Result<std::unique_ptr<Transport>> shm =
        OpenShm(address.unix_path, pool_options, connect_timeout, 0);
    if (shm.ok()) {
      chosen.transport = std::move(shm).value();
      chosen.reason = address.ToString() + ": shared memory (the node's arena is mapped here)";
      return chosen;
    }
    if (shm.status().code() != StatusCode::kNotSupported) return shm.status();
    auto pool = std::make_unique<ConnectionPool>(address, pool_options);
    KVPORT_RETURN_IF_ERROR(pool->ConnectFirst(ConnectDeadline(connect_timeout)).status());
    chosen.transport = std::make_unique<StreamTransport>(std::move(pool), "Unix socket");
    chosen.reason = address.ToString() + ": values through the socket; " + shm.status().message();
    chosen.fallback = true;
    return chosen;
  }

  auto pool = std::make_unique<ConnectionPool>(address, pool_options);
  KVPORT_RETURN_IF_ERROR(pool->ConnectFirst(ConnectDeadline(connect_timeout)).status());
  chosen.reason = choice.reason;
  chosen.fallback = choice.fallback;
  if (choice.requested == TransportKind::kTcp) {
    chosen.transport = std::make_unique<StreamTransport>(std::move(pool), "TCP");
    return chosen;
  }
  // Shared memory beats every network path to a node on this host; UCX comes next, where the
  // choice wants it and the node offers it. Any reason neither can be used is said, and TCP
  // stays.
  std::string why_not;
  DecodingHandler<protocol::NodeInfoRequest, protocol::NodeInfoResponse> handler;
  Result<protocol::NodeInfoResponse> info =
      AskNodeInfo(*pool, ConnectDeadline(connect_timeout), &handler);
  const std::string here = HostBootId();
  if (!info.ok()) {
    why_not = info.status().message();
  } else if (info->host_id.empty() || info->host_id != here ||
             (info->offers & protocol::kOfferSharedMemory) == 0) {
    why_not = info->host_id == here
                  ? "the node on this host offers no shared memory (no unix_socket configured)"
                  : "the node runs on another host";
    if (choice.ucx && (info->offers & protocol::kOfferUcx) == 0) {
      why_not += "; it offers no UCX (kvport serve --ucx)";
    } else if (choice.ucx) {
      Result<std::unique_ptr<Transport>> ucx =
          OpenUcx(address, pool_options, connect_timeout, ucx_devices);
      if (ucx.ok()) {
        pool->CloseAll();
        chosen.transport = std::move(ucx).value();
        chosen.reason = fmt::format(
            "{}; values over UCX, copied by the node into and out of the arena of {}{}",
            choice.reason, address.ToString(),
            ucx_devices.size() > 1
                ? fmt::format(" on {} lanes ({})", ucx_devices.size(), fmt::join(ucx_devices, "; "))
                : "");
        chosen.fallback = choice.fallback;
        return chosen;
      }
      why_not += "; UCX with it failed: " + ucx.status().message();
    }
  } else {
    Result<std::unique_ptr<Transport>> shm =
        OpenShm(std::string(info->unix_path), pool_options, connect_timeout, info->node_id);
    if (shm.ok()) {
      pool->CloseAll();
      chosen.transport = std::move(shm).value();
      chosen.reason = fmt::format(
          "eic_trans_type {} ({}): shared memory through unix:{}, the node runs on this host",
          static_cast<int>(choice.requested), TransportKindName(choice.requested), info->unix_path);
      chosen.fallback = choice.requested != TransportKind::kAuto;
      return chosen;
    }
    why_not = fmt::format("shared memory through unix:{} failed: {}", info->unix_path,
                          shm.status().message());
  }
  chosen.transport = std::make_unique<StreamTransport>(std::move(pool), "TCP");
  chosen.reason = choice.reason + "; values over TCP: " + why_not;
  // Automatic selection settling on TCP is the normal case for a remote node: not a warning.
  chosen.fallback = choice.requested != TransportKind::kAuto;
  return chosen;
}

}  // namespace kvport::client
