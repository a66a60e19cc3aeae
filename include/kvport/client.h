// SPDX-License-Identifier: Apache-2.0
// kvport::Client: the EIC-style client SDK of a kvport cache node or cluster of nodes.
//
// What an inference engine links against (LMCache's eic:// connector and SGLang call the same
// shape of API on the EIC product). One Client talks to one node, or to a cluster (a static
// list of nodes, or the nodes registered in etcd; docs/cluster.md), over a small pool of TCP
// connections per node; requests from many threads are pipelined on those connections (each carries
// a request id), every call has a deadline, and a lost node is reconnected to with exponential
// backoff, so calls made while a node restarts fail with Unavailable and later calls succeed on
// the same Client. A call that times out while its answer is arriving returns at once and the
// rest of that answer is drained, so the calls pipelined with it still succeed; a node's ERROR
// for one request fails that call alone. Nothing a node reports is trusted for allocation
// (descriptor sizes are checked against the request, buffers grow as bytes arrive).
// docs/client.md describes the API, statuses, threading and staging in full.
//
// Results. A batched call returns Result<...>:
//   - a non-OK Status when the call was rejected or when no key's outcome is known: bad
//     arguments or a call before Init (InvalidArgument), the node unreachable
//     (Unavailable), the deadline passed (Timeout);
//   - otherwise a BatchResult: an overall code (SUCCESS / PARTIAL_FAILED / FAILED) and one
//     KeyCode per key. Per-key codes are the authority: an MGet of keys never written is an OK
//     Result with overall FAILED and every key KEY_NOT_EXIST, exactly as EIC reports it.
//
// Threading: after Init returns OK, every method may be called from any number of threads at
// once. Init and the destructor must not run concurrently with other calls.
//
// Fork: a client belongs to the process that called Init. In a child forked after that (vLLM's
// multiprocess executor, Python multiprocessing's fork start method) every call fails with
// NotSupported ("client used after fork(): ... create a new client in this one"), and destroying
// it there abandons its memory instead of touching the parent's connections. The child does not
// keep the parent's sockets to nodes open (they are closed in it at the fork), so a parent that
// dies ends its sessions on the node even while its children live.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvport/export.h"
#include "kvport/io_buffers.h"
#include "kvport/status.h"

namespace kvport {

// Overall outcome of a batched call.
enum class BatchCode : int32_t {
  kSuccess = 0,        // every key succeeded
  kPartialFailed = 1,  // some keys succeeded, some did not
  kFailed = 2,         // no key succeeded (an empty batch is kSuccess)
};

// Outcome of one key of a batched call.
enum class KeyCode : int32_t {
  kSuccess = 0,            // done (MExist: the key exists)
  kKeyNotExist = 1,        // not stored: never written, deleted, evicted or expired
  kNoSpace = 2,            // MSet: the node has no room now (full of live or pinned objects)
  kTooLarge = 3,           // MSet: larger than the node's capacity or a limit; will never fit
  kBufferTooSmall = 4,     // MGet: the value is larger than the caller's buffer (left untouched)
  kInvalidArgument = 5,    // the key, namespace or meta is malformed or over a limit
  kUnavailable = 6,        // the node could not be reached or the connection was lost
  kTimeout = 7,            // the call's deadline passed before the key's outcome was known
  kDeviceError = 8,        // staging the key's bytes to or from device memory failed
  kFailed = 9,             // any other failure of the node (the reason is in BatchResult::error)
  kPermissionDenied = 10,  // the client's token does not grant this namespace (docs/security.md)
};

// "SUCCESS", "PARTIAL_FAILED", "FAILED".
KVPORT_API std::string_view BatchCodeName(BatchCode code);
// "SUCCESS", "KEY_NOT_EXIST", "NO_SPACE", "TOO_LARGE", "BUFFER_TOO_SMALL", "INVALID_ARGUMENT",
// "UNAVAILABLE", "TIMEOUT", "DEVICE_ERROR", "FAILED", "PERMISSION_DENIED".
KVPORT_API std::string_view KeyCodeName(KeyCode code);
// The code of every key of a call that failed as a whole with `status` (a lost connection:
// kUnavailable; a deadline: kTimeout; ...): what BatchResult::codes holds for such keys.
KVPORT_API KeyCode KeyCodeFromCallFailure(const Status& status);

// The overall code for a list of per-key codes (see BatchCode).
KVPORT_API BatchCode OverallCode(std::span<const KeyCode> codes);

struct KVPORT_API BatchResult {
  BatchCode status = BatchCode::kSuccess;
  std::vector<KeyCode> codes;  // one per key, in the order of the call's keys
  // OK when every key succeeded; otherwise the reason of the first key that did not (with the
  // key named), for logs. MExist/MGet misses are KEY_NOT_EXIST codes, not errors, but still
  // make `status` FAILED or PARTIAL_FAILED like EIC; their `error` is NotFound.
  Status error;
};

struct KVPORT_API GetResult : BatchResult {
  // The stored value's length per key: set for kSuccess and kBufferTooSmall (so the caller can
  // retry with a big enough buffer), 0 otherwise.
  std::vector<uint64_t> value_sizes;
  // The metadata blob stored with each value (empty when none, or when the key was not read).
  std::vector<std::string> metas;
};

// Statistics of the node (STATS), as the node reports them.
struct KVPORT_API NodeStats {
  // Every counter the node sent, by name, in the node's order ("capacity_bytes", "used_bytes",
  // "objects", "hits", "misses", "evictions", ...; docs/protocol.md lists them).
  std::vector<std::pair<std::string, uint64_t>> counters;
  struct Namespace {
    std::string name;  // "" is the default namespace
    uint64_t objects = 0;
    uint64_t bytes = 0;  // value and meta bytes held
  };
  std::vector<Namespace> namespaces;

  // The counter `name`, or `fallback` when the node did not report it.
  uint64_t Get(std::string_view name, uint64_t fallback = 0) const;
};

// One node's statistics in a cluster (Client::StatsPerNode).
struct KVPORT_API NodeReport {
  std::string id;       // the node's id in the cluster (its address in a static list)
  std::string address;  // "host:port"
  uint64_t epoch = 0;   // changes on every start of the node; 0 in a static list
  Status status;        // OK when the node answered; otherwise why not (stats then empty)
  NodeStats stats;
};

// The reports' counters summed and their namespaces merged by name, what Client::Stats returns
// for a cluster: counters a sum would make meaningless (latency quantiles, largest_free_bytes,
// the 0/1 flags auth_required and insecure) take their largest value instead. Reports whose
// status is not OK are left out; when none is OK the first one's status is returned (an empty
// list sums to empty statistics).
KVPORT_API Result<NodeStats> SumNodeStats(const std::vector<NodeReport>& reports);

// One page of a namespace's keys (Client::List).
struct KVPORT_API KeyPage {
  std::vector<std::string> keys;
  uint64_t next_cursor = 0;  // pass to the next List call; 0 when the listing is complete
};

struct KVPORT_API InitOptions {
  // --- EIC's InitOption ------------------------------------------------------------------------
  // Accepted for compatibility; kvport logs through kvport::log (stderr) and does not write log
  // files. A non-empty value is noted in the log once.
  std::string log_dir;
  // EIC's eic_log_level (0 debug, 1 info, 2 warn, 3 error). -1 leaves the process's log level
  // alone; any other value sets it (logging is process-wide, as it is in EIC).
  int log_level = -1;
  // eic_trans_type: 0 automatic (shared memory with a node on this host that offers it, else UCX
  // where it finds RDMA hardware and the node offers it, else TCP), 1 TCP (forced), 2 RDMA
  // (shared memory with a same-host node, else UCX with a node that offers it, else TCP,
  // logged), 3 GPUDirect RDMA (NotSupported without a usable CUDA runtime, Init failing with the
  // reason; otherwise as 2, device buffers staged through pinned host memory).
  // An endpoint "unix:/PATH" asks for shared memory whatever this says. See kvport/transport.h
  // and docs/transports.md.
  int transport_type = 0;
  // Accepted for compatibility (EIC reads gflags from it); kvport has no flags file.
  std::string flag_file;

  // --- kvport ----------------------------------------------------------------------------------
  // The secret presented to a node that requires a token (docs/security.md). Empty: the first
  // line of token_file when that is set (config key token_file), else the environment variable
  // KVPORT_TOKEN when set, else none (a node that requires a token then refuses the connection
  // with PermissionDenied).
  std::string token;
  std::string token_file;
  // TLS to the node's TCP port (docs/security.md, "TLS"): with tls_ca_file (PEM), every TCP
  // connection is TLS 1.3 and the node's certificate must chain to that CA and name the host
  // connected to (a DNS name or an IP address in its subjectAltName). tls_cert_file and
  // tls_key_file: a client certificate, for a node that requires one. Each empty field is taken
  // from its environment variable (KVPORT_TLS_CA_FILE, KVPORT_TLS_CERT_FILE,
  // KVPORT_TLS_KEY_FILE). No CA file: plain TCP. Shared memory (the node's Unix socket) never
  // uses TLS. Init fails with InvalidArgument naming a missing or unreadable file, and with
  // PermissionDenied when the node's certificate fails verification.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // false: the node's certificate must chain to tls_ca_file but need not name the host
  // connected to (nodes reached by addresses their certificates do not carry). Left true, the
  // environment variable KVPORT_TLS_VERIFY_HOSTNAME (true/false) decides when set. With the
  // check on, a connection with no host name to check is refused, never left unchecked.
  bool tls_verify_hostname = true;
  // A cluster (docs/cluster.md): each key is written to its first `replicas` nodes (1..16) and
  // a write succeeds when `write_quorum` of them (1..replicas) stored it. An endpoint's
  // ?replicas=N and ?write_quorum=M win over these. Ignored for a single node.
  int replicas = 1;
  int write_quorum = 1;
  int connections = 2;                                     // TCP connections per node (>= 1)
  std::chrono::milliseconds timeout{10'000};               // per call, unless the call overrides it
  std::chrono::milliseconds connect_timeout{3'000};        // one connect + handshake attempt
  std::chrono::milliseconds reconnect_backoff_min{20};     // first wait after a failed connect
  std::chrono::milliseconds reconnect_backoff_max{2'000};  // the wait doubles up to this
  // A call whose deadline passes while its response is arriving returns Timeout at once; the
  // connection's reader discards the rest of that response and goes on with the next one, so
  // the other calls pipelined on the connection are not failed. The drain is bounded: a
  // response not complete drain_timeout after its call's deadline, or a rest of more than
  // drain_max_bytes, closes the connection instead (its other calls fail Unavailable and the
  // pool reconnects).
  std::chrono::milliseconds drain_timeout{5'000};
  uint64_t drain_max_bytes = uint64_t{256} << 20;
  // A caller waiting for its answer checks its connection without sleeping for up to this long
  // before it blocks in poll (0..1 s; 0: it blocks at once). For small calls, where the round
  // trip is mostly the wake-up of a sleeping thread (and, on a VM, of its halted vCPU), this cuts
  // the latency by half or more, for the CPU it spins (docs/client.md, "Busy polling").
  std::chrono::microseconds busy_poll{0};
  // UCX multi-rail (config key ucx_devices): one lane per entry, each a UCX worker limited to
  // those devices (UCX_NET_DEVICES' syntax: "mlx5_0:1", "mlx5_1:1"), with its own endpoint to
  // the node; a call's values, cut into 1 MiB stripes, move on every lane at once. Empty: one
  // lane, with the process's UCX_* configuration. Used only when the client takes UCX.
  std::vector<std::string> ucx_devices;
  // Pinned host memory kept cached for staging device buffers; staging beyond this is
  // allocated for the call and freed after it.
  uint64_t staging_cache_bytes = uint64_t{256} << 20;
  // Accelerator runtime libraries for device buffers (config keys cuda_runtime_library and
  // ascend_runtime_library). "" uses the process-wide runtime (kvport/device.h), opened at the
  // first RegisterMemory of that kind, never at Init: a TCP client never loads libcudart. A
  // path opens a runtime of this client's own from that file (how tests load the fakes).
  std::string cuda_runtime_library;
  std::string ascend_runtime_library;
  // Checksums end to end (docs/client.md, "Checksums"): each value's xxh3-64 computed at its
  // put, kept by the node with the value (in memory and in its disk record), and checked at
  // every get before the caller sees the bytes (a buffer, a device buffer's staging, a view in
  // place): a value that fails is a miss (KeyCode::kKeyNotExist), counted
  // (Client::checksum_mismatches) and logged once per key. Values of a namespace in
  // unchecked_namespaces are neither checksummed nor checked. A node before protocol version
  // 10 keeps no checksums; values written without one (checksums off) are not checked until
  // the node's disk tier has given them its own. Left true, the environment variable
  // KVPORT_CHECKSUMS (true/false) decides when set: how a client made by an engine that has no
  // such option (LMCache's and SGLang's `eic`) is turned off.
  bool checksums = true;
  std::vector<std::string> unchecked_namespaces;
};

// Values a same-host node lends in place (Client::MGetInPlace): views into the node's arena
// through this process's read-only mapping of it, no copy made. The node keeps the objects
// pinned (a lease) until this object is destroyed or Release() is called: eviction, overwrites
// and deletes never reuse their bytes meanwhile. If the session that took the lease ends (the
// connection is lost, the node stopped or restarted), the node has ended the lease and may reuse
// the bytes: valid() turns false and the views must not be trusted any more.
//
// That can happen while the caller is reading a view, so check after reading, not before: copy
// the bytes out (or hash them, or send them on), then call valid(); true means every byte read
// before the call was the lent value (the node moves a word valid() reads before it frees a
// leased byte: docs/client.md, "Values in place"). Movable; not thread-safe.
class KVPORT_API LentValues {
 public:
  LentValues();
  ~LentValues();
  LentValues(LentValues&&) noexcept;
  LentValues& operator=(LentValues&&) noexcept;

  // Per key: kSuccess (the view is valid), kKeyNotExist, ...; value sizes and metas.
  const GetResult& result() const { return result_; }
  // Key i's value (empty unless result().codes[i] is kSuccess).
  std::span<const uint8_t> value(size_t i) const;
  // False once released, or once the node ended the lease. Call it after reading the views: true
  // then says the bytes read were the lent values.
  bool valid() const;
  // Gives the values back now (the destructor does it otherwise).
  void Release();

 private:
  friend class Client;
  struct Loan;
  GetResult result_;
  std::vector<std::span<const uint8_t>> values_;
  std::unique_ptr<Loan> loan_;
};

namespace client {
template <typename R>
class PendingCall;
// How a Pending lets its call go (the call may be kept for reuse): defined with PendingCall.
struct DisposeCall {
  template <typename R>
  void operator()(PendingCall<R>* call) const;
};
}  // namespace client

// A batched call in flight (Client::MSetAsync, MGetAsync, MExistAsync, MDelAsync): the post and
// check of NIXL's transfers. An Async call sends the call's frames and returns at once, so one
// thread can keep many calls in flight on the same connections (each frame carries its request
// id and the node answers them in any order). Contract:
//   - Ready() says, without blocking, whether Wait() would return at once. It reads what has
//     arrived on the connections and takes the call's next step where a data path has several
//     (shared memory commits once its reservations are answered), so a loop polling Ready()
//     makes progress without another thread.
//   - Wait() returns exactly what the blocking call returns, errors included (a call refused
//     before anything was sent is ready at once with its error). Called once; valid() is false
//     after it.
//   - Until Wait returns, the call's keys, metas and IOBuffers, and the memory the buffers
//     point at, must stay valid, and an MGet's buffers untouched; the options are read when
//     the call starts.
//   - Destroying a handle that was not waited for waits for its call (like Wait, at most until
//     the call's deadline), so no byte moves into or out of the caller's memory afterwards.
//   - A cluster call (docs/cluster.md) whose first nodes fail tries the next ones inside Wait.
//   - Every handle must be waited for or destroyed before its Client is destroyed.
// Movable; one thread at a time per handle.
template <typename R>
class KVPORT_API Pending {
 public:
  Pending();
  ~Pending();
  Pending(Pending&&) noexcept;
  Pending& operator=(Pending&&) noexcept;

  bool Ready();
  Result<R> Wait();
  bool valid() const { return call_ != nullptr; }

 private:
  friend class Client;
  explicit Pending(std::unique_ptr<client::PendingCall<R>, client::DisposeCall> call);
  std::unique_ptr<client::PendingCall<R>, client::DisposeCall> call_;
};

struct KVPORT_API SetOptions {
  std::string ns;                        // namespace; "" is the default namespace
  int64_t ttl_seconds = -1;              // seconds the objects live; -1 (or 0) = no expiry
  std::chrono::milliseconds timeout{0};  // 0 = the client's InitOptions::timeout
};

// any_namespace (GetOptions, ExistOptions, DelOptions): match each key in every namespace that
// holds it instead of in `ns` alone. What EIC callers that never name a namespace on a probe or
// a delete expect (LMCache's EIC connector names one on its puts and gets only). Contract:
//   - `ns` must be empty; a call with any_namespace and a non-empty ns is InvalidArgument,
//     before anything is sent. (ns "" without any_namespace is exact: the default namespace.)
//   - Search order: the default namespace "" first, then the other namespaces ascending by name
//     (bytewise). MGet/MGetMeta read the first match (its value and meta); MExist reports
//     kSuccess if some namespace holds the key; MDel deletes the key in EVERY namespace that
//     holds it: kSuccess if at least one copy was deleted, kKeyNotExist otherwise.
//   - Cost on the node: one index probe per live namespace per key (namespaces are few).
//   - Needs protocol version 2: against a node that negotiated version 1 the call fails with
//     NotSupported naming the versions; it never falls back to an exact lookup.
struct KVPORT_API GetOptions {
  std::string ns;
  std::chrono::milliseconds timeout{0};
  bool any_namespace = false;  // see above; ns must then be empty
};

struct KVPORT_API ExistOptions {
  std::string ns;
  std::chrono::milliseconds timeout{0};
  bool any_namespace = false;  // see above; ns must then be empty
};

struct KVPORT_API DelOptions {
  std::string ns;
  std::chrono::milliseconds timeout{0};
  bool any_namespace = false;  // see above; ns must then be empty
};

// The namespace an endpoint names: "NS" for "eic://HOST:PORT/NS", "" when it names none (a
// HOST:PORT, an eic:// URL without a path, a unix:/PATH). The endpoint is checked as Client::Init
// checks it: InvalidArgument, saying what is wrong, for one Init would refuse.
KVPORT_API Result<std::string> EndpointNamespace(std::string_view endpoint);

class KVPORT_API Client {
 public:
  Client();
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Connects to `endpoint`, with an optional "/namespace" that is ignored here (namespaces are
  // per call) and an optional "?replicas=N&write_quorum=M":
  //   "host:port", "eic://host:port", "unix:/PATH"   one node;
  //   "host:port;host:port[;...]"                    a static cluster (EIC's form);
  //   "etcd:HOST:PORT[,HOST:PORT]/CLUSTER"           the nodes registered in etcd, watched.
  // Resolves the transport first, so a GPUDirect request on a host that cannot do it fails here
  // with the device layer's reason (NotSupported) before any connection is made. One node: opens
  // one connection to check the node answers (Unavailable if it does not); the rest of the pool
  // connects lazily. A cluster: reads the membership (Unavailable when etcd does not answer) and
  // connects to every node at once; Unavailable when there are nodes and none answers. Calling
  // Init twice is InvalidArgument.
  Status Init(std::string_view instance_id, std::string_view endpoint,
              const InitOptions& options = {});

  // Stores value i (buffers[i], buffers[i].size bytes) under keys[i], replacing any previous
  // value atomically. `metas`, when not empty, has one entry per key: a small blob stored
  // atomically with the value ("" = none). Requires keys.size() == values.size().
  Result<BatchResult> MSet(const std::vector<std::string>& keys, const IOBuffers& values,
                           const SetOptions& options = {},
                           const std::vector<std::string>& metas = {});

  // Reads value i into buffers[i] (at most buffers[i].size bytes). A value larger than its
  // buffer is the key's kBufferTooSmall, with the true length in value_sizes[i]; the buffer is
  // not written. Requires keys.size() == buffers.size().
  Result<GetResult> MGet(const std::vector<std::string>& keys, const GetOptions& options,
                         const IOBuffers& buffers);

  // Reads the values in place, without copying them (see LentValues). Needs the shared-memory
  // transport (transport() == "shared memory"): NotSupported, naming the transport in use,
  // otherwise.
  Result<LentValues> MGetInPlace(const std::vector<std::string>& keys,
                                 const GetOptions& options = {});

  // Reads only the metadata and the value sizes (MGET's meta-only form): what a caller needs to
  // size its buffers before an MGet.
  Result<GetResult> MGetMeta(const std::vector<std::string>& keys, const GetOptions& options = {});

  // Per key: kSuccess when the key exists, kKeyNotExist when it does not.
  Result<BatchResult> MExist(const std::vector<std::string>& keys,
                             const ExistOptions& options = {});

  // Per key: kSuccess when it was deleted, kKeyNotExist when there was nothing to delete.
  Result<BatchResult> MDel(const std::vector<std::string>& keys, const DelOptions& options = {});

  // The batched calls above, asynchronous: each starts the call and returns its handle at once
  // (see Pending for the contract). What a caller with many small values uses to keep a
  // connection busy from one thread.
  Pending<BatchResult> MSetAsync(const std::vector<std::string>& keys, const IOBuffers& values,
                                 const SetOptions& options = {},
                                 const std::vector<std::string>& metas = {});
  Pending<GetResult> MGetAsync(const std::vector<std::string>& keys, const GetOptions& options,
                               const IOBuffers& buffers);
  Pending<BatchResult> MExistAsync(const std::vector<std::string>& keys,
                                   const ExistOptions& options = {});
  Pending<BatchResult> MDelAsync(const std::vector<std::string>& keys,
                                 const DelOptions& options = {});

  // Declares the memory behind `buffers` as `info.kind` memory on `info.device_id`. Buffers in
  // CUDA or Ascend memory are then staged through pinned host memory with that runtime on every
  // MSet/MGet (TCP cannot reach device memory). Host memory needs no registration. Errors:
  // NotSupported when the runtime for `info.kind` is not usable here (with the reason),
  // InvalidArgument for a null/empty buffer or a bad device id, or a range overlapping one
  // registered with a different kind.
  Status RegisterMemory(const IOBuffers& buffers, const MemoryInfo& info);
  // Forgets ranges registered with exactly these (data, size) pairs; NotFound for one that was
  // not registered.
  Status UnregisterMemory(const IOBuffers& buffers);
  // Where [data, data+size) lies as this client's registrations say: the kind and device of the
  // registered range holding it, host memory when no registered range touches it;
  // InvalidArgument for a buffer that runs across a registered range's edge. (The Python
  // bindings ask it to refuse device buffers that were never registered.)
  Result<MemoryInfo> RegisteredMemoryOf(const void* data, size_t size) const;

  // One round trip to the node.
  Status Ping();
  // Values a get found failing their checksum since Init (each answered as a miss).
  uint64_t checksum_mismatches() const;
  // The node's statistics; for a cluster, every node's counters summed (quantiles and other
  // counters a sum would make meaningless: the largest) and its namespaces merged.
  Result<NodeStats> Stats();
  // Each node's statistics, one report per node (a single node: one report).
  Result<std::vector<NodeReport>> StatsPerNode();
  // One page of at most `max_keys` keys of namespace `ns`, from `cursor` (0 to start).
  Result<KeyPage> List(std::string_view ns, uint64_t cursor = 0, uint32_t max_keys = 1024);

  // The data path Init chose: "shared memory" (a node on this host), "TCP", or "Unix socket"
  // (a unix: endpoint whose node declined shared memory), and the one-line reason it logged. A
  // cluster: the data path of the first node reached at Init (each node gets the best one it
  // offers).
  std::string_view transport() const;
  const std::string& transport_reason() const;

  // The namespace the client's token names for calls that name none (the token's `namespace`
  // field, docs/security.md; learned at Init from a node of protocol version 5 on). nullopt: an
  // open node, a token that names none, an older node, or before Init. kvport's own calls always
  // name their namespace (SetOptions::ns ...); the `eic` drop-in uses this for an `ns` its
  // caller never assigned.
  const std::optional<std::string>& default_namespace() const;

  // "host:port" of the node ("a:1;b:2" or "etcd:HOST:PORT/CLUSTER" for a cluster); empty
  // before Init.
  const std::string& endpoint() const;
  // Whether Init connected to a cluster (a list of nodes, or etcd) rather than one node.
  bool is_cluster() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvport
