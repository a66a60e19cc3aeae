// SPDX-License-Identifier: Apache-2.0
// ServerCounters: what the network side of a node counts (the store counts the rest).
//
// Relaxed atomics: each counter is exact, but a snapshot taken while requests run is not a
// consistent cut across counters (STATS never needed one).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvport/server.h"
#include "protocol/frame.h"
#include "server/client_error_log.h"
#include "server/request_latency.h"
#include "store/object_store.h"

namespace kvport::server {

class ServerCounters {
 public:
  // One request of `op` was dispatched (counted before it is handled, so a request that fails
  // is counted too).
  void CountRequest(protocol::Opcode op);
  // Admits one more connection if fewer than `max` are open (counting it open from now on);
  // false otherwise. Every admitted connection is closed once.
  bool TryAdmitConnection(uint32_t max);
  // A connection over max_connections was refused.
  void CountRefusedConnection() { connections_refused_.fetch_add(1, std::memory_order_relaxed); }
  // Admits one in place of an unauthenticated connection being closed to make room for it:
  // counted open at once, so `connections` may pass max_connections until that close is done.
  void AdmitConnectionInPlaceOfAnother();
  void ConnectionClosed();
  // Connections that have not completed HELLO (server/unauthenticated.h): the gauge, those
  // refused because their address had too many such, those closed without a HELLO within
  // hello_timeout, and those closed to let a newer connection in at max_connections.
  void AddUnauthenticated(int64_t delta) { Add(unauthenticated_connections_, delta); }
  void CountRefusedForAddress() {
    connections_refused_per_address_.fetch_add(1, std::memory_order_relaxed);
  }
  void CountHelloTimeout() { hello_timeouts_.fetch_add(1, std::memory_order_relaxed); }
  void CountUnauthenticatedEvicted() {
    unauthenticated_evictions_.fetch_add(1, std::memory_order_relaxed);
  }
  // TLS sessions: handshakes completed (and of them, those whose records the kernel encrypts:
  // kTLS), handshakes failed (a bad or missing certificate, a peer not speaking TLS).
  void CountTlsHandshake(bool kernel_send) {
    tls_handshakes_.fetch_add(1, std::memory_order_relaxed);
    if (kernel_send) tls_kernel_offloads_.fetch_add(1, std::memory_order_relaxed);
  }
  void CountTlsHandshakeFailure() {
    tls_handshake_failures_.fetch_add(1, std::memory_order_relaxed);
  }
  void CountErrorResponse() { error_responses_.fetch_add(1, std::memory_order_relaxed); }
  // An ERROR answered a decoded request of `op` (STATS errors_<op>; also CountErrorResponse).
  void CountRequestError(protocol::Opcode op);
  // A response to a request of `op` was queued `ns` nanoseconds after its header arrived.
  void RecordLatency(protocol::Opcode op, uint64_t ns) {
    latencies_.Record(static_cast<size_t>(op), ns);
  }
  // A command of the Redis protocol ran in `ns` nanoseconds (`error`: its reply was an error).
  // `slot` is its row in the RESP command table (server/resp_commands.cc), `name` that row's
  // name, in static storage: STATS and /metrics count it as the op "resp_<name>", from its first
  // call on (op_resp_get, errors_resp_get, latency_resp_get_p50_us, ...).
  static constexpr size_t kRespCommandSlots = 32;
  void RecordRespCommand(size_t slot, const std::string_view* name, bool error, uint64_t ns);
  struct RespCommandCounts {
    uint64_t calls = 0;
    uint64_t errors = 0;
    uint64_t sum_ns = 0;
  };
  // What RecordRespCommand counted for `slot` (INFO commandstats).
  RespCommandCounts RespCommand(size_t slot) const;
  void CountIdleTimeout() { idle_timeouts_.fetch_add(1, std::memory_order_relaxed); }
  void CountAbortedMset() { aborted_msets_.fetch_add(1, std::memory_order_relaxed); }
  void AddBytesReceived(uint64_t n) { bytes_received_.fetch_add(n, std::memory_order_relaxed); }
  void AddBytesSent(uint64_t n) { bytes_sent_.fetch_add(n, std::memory_order_relaxed); }
  // Read system calls made on plain client sockets (net::Stream::TakeSocketReads).
  void AddSocketReads(uint64_t n) { socket_reads_.fetch_add(n, std::memory_order_relaxed); }
  // An I/O thread busy polling (ServerOptions::busy_poll) found events instead of sleeping.
  void CountBusyPollHit() { busy_poll_hits_.fetch_add(1, std::memory_order_relaxed); }
  void CountShmAttach() { shm_attaches_.fetch_add(1, std::memory_order_relaxed); }
  // A HELLO or AUTH refused for its token (none, unknown, or a client too old to present one).
  void CountAuthFailure() { auth_failures_.fetch_add(1, std::memory_order_relaxed); }
  // A connection, HELLO or AUTH refused without its secret being checked: its peer is backed
  // off after failed authentications (server/auth_throttle.h).
  void CountAuthThrottled() { auth_throttled_.fetch_add(1, std::memory_order_relaxed); }
  void LeaseTaken(uint64_t bytes) {
    leases_.fetch_add(1, std::memory_order_relaxed);
    leased_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }
  void LeaseReleased(uint64_t bytes) {
    leases_.fetch_sub(1, std::memory_order_relaxed);
    leased_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  }

  uint64_t connections() const { return connections_.load(std::memory_order_relaxed); }

  // Memory bounds (docs/store.md, "Bounds on node memory"). Gauges: memory of responses queued
  // on every connection (net::OutputQueue::memory_bytes) and of request input buffers
  // (net::ReadBuffer::allocated_bytes); each session adds and removes its own share.
  void AddQueuedResponseBytes(int64_t delta) { Add(queued_response_bytes_, delta); }
  uint64_t queued_response_bytes() const {
    return queued_response_bytes_.load(std::memory_order_relaxed);
  }
  void AddInputBufferBytes(int64_t delta) { Add(input_buffer_bytes_, delta); }
  uint64_t input_buffer_bytes() const {
    return input_buffer_bytes_.load(std::memory_order_relaxed);
  }
  // The node-wide cap on input_buffer_bytes, reported in STATS (set once at start).
  void SetMaxInputBufferBytes(uint64_t cap) {
    max_input_buffer_bytes_.store(cap, std::memory_order_relaxed);
  }
  // The node-wide cap on queued_response_bytes, reported in STATS (set once at start).
  void SetMaxQueuedResponseBytes(uint64_t cap) {
    max_queued_response_bytes_.store(cap, std::memory_order_relaxed);
  }
  // Changes (one per replaced or deleted version the disk held) whose answers wait until their
  // tombstones are durable; each session adds and removes its own share.
  void AddChangesWaitingForDisk(int64_t delta) { Add(changes_waiting_for_disk_, delta); }
  uint64_t changes_waiting_for_disk() const {
    return changes_waiting_for_disk_.load(std::memory_order_relaxed);
  }
  // A session stopped reading requests because of its own or the node's queued responses
  // (counted once per pause; paused_connections: how many are paused now).
  void CountBackpressurePause() { backpressure_pauses_.fetch_add(1, std::memory_order_relaxed); }
  void AddPausedConnections(int64_t delta) { Add(paused_connections_, delta); }
  // A request did not arrive whole within its deadline (request_timeout + min rate).
  void CountRequestTimeout() { request_timeouts_.fetch_add(1, std::memory_order_relaxed); }
  // A connection held back by backpressure was closed because its peer took none of its queued
  // answers within the request deadline (server/stream_connection.h).
  void CountUnreadAnswersClose() { unread_answers_closes_.fetch_add(1, std::memory_order_relaxed); }
  // Cluster membership (docs/cluster.md): cluster_registered is 1 while the node's record is
  // in etcd, cluster_reregistrations counts the new epochs taken after a lapsed lease,
  // cluster_etcd_failures the renewals and registrations etcd did not answer.
  void SetClusterState(bool registered, uint64_t reregistrations, uint64_t etcd_failures) {
    cluster_registered_.store(registered ? 1 : 0, std::memory_order_relaxed);
    cluster_reregistrations_.store(reregistrations, std::memory_order_relaxed);
    cluster_etcd_failures_.store(etcd_failures, std::memory_order_relaxed);
  }
  // Rate-limited warnings about clients' errors, shared by every session of the node.
  ClientErrorLog& client_errors() { return client_errors_; }

  // Appends ("name", value) pairs: connections, connections_accepted, connections_refused
  // (over max_connections), unauthenticated_connections, connections_refused_per_address,
  // hello_timeouts, unauthenticated_evictions, tls_handshakes, tls_handshake_failures,
  // tls_kernel_offloads, error_responses,
  // idle_timeouts, aborted_msets, bytes_received, bytes_sent, shm_attaches, auth_failures,
  // auth_throttled, leases
  // (live arena leases), leased_bytes (value bytes they pin), queued_response_bytes,
  // max_queued_response_bytes, input_buffer_bytes, max_input_buffer_bytes,
  // changes_waiting_for_disk, backpressure_pauses,
  // paused_connections, request_timeouts, unread_answers_closes, cluster_registered,
  // cluster_reregistrations, cluster_etcd_failures, op_<opcode> for every opcode (and
  // op_resp_<command> for every RESP command called), then errors_<op>, latency_<op>_p50_us and
  // latency_<op>_p99_us for each.
  void AppendTo(std::vector<std::pair<std::string, uint64_t>>* counters) const;
  // One histogram per opcode counted in op_*, in the same order.
  void AppendLatencies(std::vector<ServerStats::Latency>* latencies) const;

 private:
  // The RESP slots called so far, and the latencies of the opcodes and of those slots.
  std::vector<size_t> CalledRespSlots() const;
  void AppendLatencies(const std::vector<size_t>& resp_slots,
                       std::vector<ServerStats::Latency>* latencies) const;

  static constexpr size_t kOpcodeSlots = 16;
  std::array<std::atomic<uint64_t>, kOpcodeSlots> ops_{};
  std::array<std::atomic<uint64_t>, kOpcodeSlots> op_errors_{};
  RequestLatencies latencies_;
  // RESP commands: the name of each slot counted so far (null: never called), and its errors;
  // the calls are its histogram's count.
  std::array<std::atomic<const std::string_view*>, kRespCommandSlots> resp_names_{};
  std::array<std::atomic<uint64_t>, kRespCommandSlots> resp_errors_{};
  RequestLatencies resp_latencies_{kRespCommandSlots};
  ClientErrorLog client_errors_;
  std::atomic<uint64_t> connections_{0};
  std::atomic<uint64_t> connections_accepted_{0};
  std::atomic<uint64_t> connections_refused_{0};
  std::atomic<uint64_t> unauthenticated_connections_{0};
  std::atomic<uint64_t> connections_refused_per_address_{0};
  std::atomic<uint64_t> hello_timeouts_{0};
  std::atomic<uint64_t> unauthenticated_evictions_{0};
  std::atomic<uint64_t> tls_handshakes_{0};
  std::atomic<uint64_t> tls_handshake_failures_{0};
  std::atomic<uint64_t> tls_kernel_offloads_{0};
  std::atomic<uint64_t> error_responses_{0};
  std::atomic<uint64_t> idle_timeouts_{0};
  std::atomic<uint64_t> aborted_msets_{0};
  std::atomic<uint64_t> bytes_received_{0};
  std::atomic<uint64_t> socket_reads_{0};
  std::atomic<uint64_t> busy_poll_hits_{0};
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> shm_attaches_{0};
  std::atomic<uint64_t> auth_failures_{0};
  std::atomic<uint64_t> auth_throttled_{0};
  std::atomic<uint64_t> leases_{0};
  std::atomic<uint64_t> leased_bytes_{0};
  static void Add(std::atomic<uint64_t>& gauge, int64_t delta) {
    gauge.fetch_add(static_cast<uint64_t>(delta), std::memory_order_relaxed);  // wraps: adds
  }
  std::atomic<uint64_t> queued_response_bytes_{0};
  std::atomic<uint64_t> max_queued_response_bytes_{0};
  std::atomic<uint64_t> input_buffer_bytes_{0};
  std::atomic<uint64_t> max_input_buffer_bytes_{0};
  std::atomic<uint64_t> changes_waiting_for_disk_{0};
  std::atomic<uint64_t> backpressure_pauses_{0};
  std::atomic<uint64_t> paused_connections_{0};
  std::atomic<uint64_t> request_timeouts_{0};
  std::atomic<uint64_t> unread_answers_closes_{0};
  std::atomic<uint64_t> cluster_registered_{0};
  std::atomic<uint64_t> cluster_reregistrations_{0};
  std::atomic<uint64_t> cluster_etcd_failures_{0};
};

// Everything STATS reports: the store's counters and namespaces, then the server's counters.
// Names are snake_case: capacity_bytes, used_bytes, value_bytes, reserved_bytes, retired_bytes,
// objects, hits, misses, evictions, expirations, free_extents, largest_free_bytes, index_bytes,
// max_index_bytes, max_reserved_bytes, pinned_bytes, max_pinned_bytes, reserve_cap_refusals,
// pin_cap_refusals, then the ServerCounters names.
ServerStats CollectStats(const store::ObjectStore& store, const ServerCounters& counters,
                         bool namespaces = true);

}  // namespace kvport::server
