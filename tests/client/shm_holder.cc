// SPDX-License-Identifier: Apache-2.0
// A shared-memory client that takes arena ranges and then waits to be killed: what
// shm_process_test runs as a child process to show that a client killed with SIGKILL leaves
// neither a lease nor a reservation behind on the node.
//
//   shm_holder lease PATH KEY          lends KEY in place (MGetInPlace) and holds the lease
//   shm_holder reserve PATH KEY BYTES  reserves BYTES for KEY (ARENA_RESERVE), never commits
//   shm_holder ucx-lease HOST:PORT KEY          the same over a TCP session attached to the
//   shm_holder ucx-reserve HOST:PORT KEY BYTES  node's UCX (UCX_ATTACH; UCX_TLS from the parent)
//
// It prints "ready" on stdout once it holds the range, then sleeps until killed. With
// --fork-child first, it then forks a child that sleeps until killed too (what a worker process
// forked by a client's process does), and prints "ready CHILD_PID".
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "client/arena_mapping.h"
#include "client/batch_call.h"
#include "client/connection.h"
#include "client/endpoint.h"
#include "client/ucx_arena.h"
#include "kvport/client.h"
#include "kvport/ucx.h"

namespace {

int Fail(const kvport::Status& s) {
  std::fprintf(stderr, "shm_holder: %s\n", s.ToString().c_str());
  return 1;
}

bool g_fork_child = false;

int Ready() {
  if (g_fork_child) {
    std::fflush(stdout);  // nothing buffered may be written twice
    const pid_t child = ::fork();
    if (child < 0) return Fail(kvport::Status::FromErrno("fork", errno));
    if (child == 0) {
      for (;;)
        ::pause();
    }
    std::printf("ready %d\n", static_cast<int>(child));
  } else {
    std::printf("ready\n");
  }
  std::fflush(stdout);
  for (;;)
    ::pause();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kvport;
  if (argc > 1 && std::string(argv[1]) == "--fork-child") {
    g_fork_child = true;
    --argc;
    ++argv;
  }
  if (argc < 4) {
    std::fprintf(stderr, "usage: shm_holder [--fork-child] lease|reserve PATH KEY [BYTES]\n");
    return 2;
  }
  const std::string mode = argv[1];
  const std::string path = argv[2];
  const std::string key = argv[3];
  if (mode == "lease") {
    Client client;
    Status init = client.Init("shm-holder", "unix:" + path);
    if (!init.ok()) return Fail(init);
    Result<LentValues> lent = client.MGetInPlace({key});
    if (!lent.ok()) return Fail(lent.status());
    if (lent->result().codes[0] != KeyCode::kSuccess) return Fail(lent->result().error);
    return Ready();
  }
  if (mode == "reserve" && argc == 5) {
    client::ArenaMapper mapper;
    client::NodeAddress address;
    address.unix_path = path;
    const client::Deadline deadline = MonotonicClock::now() + std::chrono::seconds(10);
    Result<std::shared_ptr<client::Connection>> conn =
        client::Connection::Open(address, "shm-holder", deadline, {}, &mapper);
    if (!conn.ok()) return Fail(conn.status());
    client::DecodingHandler<protocol::ArenaReserveRequest, protocol::ArenaReserveResponse> handler;
    handler.request.items.push_back(
        protocol::MsetItem{key, "", std::strtoull(argv[4], nullptr, 10), nullptr});
    handler.limits = (*conn)->limits();
    protocol::EncodedFrame frame;
    const uint64_t id = (*conn)->NextRequestId();
    Status encoded =
        protocol::EncodeRequest(id, handler.request, (*conn)->limits(), &frame, (*conn)->version());
    if (!encoded.ok()) return Fail(encoded);
    Result<client::Connection::Ticket> ticket = (*conn)->Send(id, frame, &handler, deadline);
    if (!ticket.ok()) return Fail(ticket.status());
    Status waited = (*conn)->Wait(*ticket, deadline);
    if (!waited.ok()) return Fail(waited);
    if (handler.response.reservation_id == 0) return Fail(Status::NoSpace("nothing reserved"));
    return Ready();
  }
  if (mode == "ucx-lease" || (mode == "ucx-reserve" && argc == 5)) {
    const client::Deadline deadline = MonotonicClock::now() + std::chrono::seconds(10);
    Result<std::unique_ptr<client::UcxArena>> ucx = client::UcxArena::Open(ProcessUcxRuntime());
    if (!ucx.ok()) return Fail(ucx.status());
    Result<client::Endpoint> endpoint = client::ParseEndpoint(path);
    if (!endpoint.ok()) return Fail(endpoint.status());
    Result<std::shared_ptr<client::Connection>> conn =
        client::Connection::Open(endpoint->nodes[0], "ucx-holder", deadline);
    if (!conn.ok()) return Fail(conn.status());
    Status attached = (*ucx)->Attach(**conn, deadline);
    if (!attached.ok()) return Fail(attached);
    if (mode == "ucx-lease") {
      client::DecodingHandler<protocol::ArenaGetRequest, protocol::ArenaGetResponse> get;
      get.request.keys.push_back(protocol::MgetKey{key});
      Status got = client::RoundTripOn(**conn, &get, deadline);
      if (!got.ok()) return Fail(got);
      if (get.response.lease_id == 0) return Fail(Status::NotFound("nothing leased"));
      return Ready();
    }
    client::DecodingHandler<protocol::ArenaReserveRequest, protocol::ArenaReserveResponse> reserve;
    reserve.request.items.push_back(
        protocol::MsetItem{key, "", std::strtoull(argv[4], nullptr, 10), nullptr});
    Status reserved = client::RoundTripOn(**conn, &reserve, deadline);
    if (!reserved.ok()) return Fail(reserved);
    if (reserve.response.reservation_id == 0) return Fail(Status::NoSpace("nothing reserved"));
    return Ready();
  }
  std::fprintf(stderr, "shm_holder: unknown mode '%s'\n", mode.c_str());
  return 2;
}
