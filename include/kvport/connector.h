// SPDX-License-Identifier: Apache-2.0
// RemoteConnector: a remote tier of KV-cache chunks with LMCache's semantics.
//
// A serving engine (or kvport's CacheEngine) hands a connector chunks named by CacheKey, each a
// payload plus the RemoteMetadata that describes it (LMCache's MemoryObj). A connector is made
// from a URL by CreateConnector(); `eic://host:port[/namespace]` is a kvport node.
//
// Semantics every connector keeps (docs/eic_remote_backend.md):
//   - A chunk is stored with its metadata atomically: there is never metadata without its data
//     (no phantom hit) and never a half-written payload visible.
//   - Batched calls report one outcome per key; a key that failed is reported as failed, never
//     as success, and a chunk whose put failed never becomes a hit later.
//   - A stored chunk read back has metadata that decodes and a payload of exactly meta.length
//     bytes; anything else (a foreign or damaged object) reads as a miss, with a warning.
//
// Threading: every method may be called from many threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvport/byte_vector.h"
#include "kvport/cache_key.h"
#include "kvport/export.h"
#include "kvport/remote_metadata.h"
#include "kvport/status.h"

namespace kvport {

struct Config;
class PriorityExecutor;

// A chunk owned by the caller of Get: metadata and its payload (meta.length bytes, the groups
// back to back as RemoteMetadata::GroupOffsets describes). The payload is a ByteVector, which a
// connector sizes without zero-filling before it reads the chunk's bytes into it; it compares
// equal to a std::vector<uint8_t> of the same bytes.
struct KVPORT_API KvChunk {
  RemoteMetadata meta;
  ByteVector data;
};

// A chunk to store, borrowed from the caller for the duration of the call.
struct KVPORT_API KvChunkView {
  const RemoteMetadata* meta = nullptr;
  std::span<const uint8_t> data;  // must be exactly meta->length bytes
};

class KVPORT_API RemoteConnector {
 public:
  virtual ~RemoteConnector() = default;

  // --- Batched operations: what implementations provide --------------------------------------

  // Stores chunks[i] under keys[i]. The outer Result fails only when nothing was attempted (bad
  // arguments, the remote unreachable); otherwise one Status per key.
  virtual Result<std::vector<Status>> BatchedPut(std::span<const CacheKey> keys,
                                                 std::span<const KvChunkView> chunks) = 0;
  // One slot per key: the chunk, or nullopt for a miss.
  virtual Result<std::vector<std::optional<KvChunk>>> BatchedGet(
      std::span<const CacheKey> keys) = 0;
  // How many keys, counted from the first, are stored (stops at the first miss).
  virtual Result<size_t> BatchedContains(std::span<const CacheKey> keys) = 0;
  // The chunks of the leading run of hits only; everything after the first miss is released
  // (not returned, even where it was a hit). LMCache's batched_get_non_blocking.
  virtual Result<std::vector<KvChunk>> BatchedGetPrefix(std::span<const CacheKey> keys) = 0;
  // OK when removed; NotFound when there was nothing under `key`.
  virtual Status Remove(const CacheKey& key) = 0;
  // The key strings stored in this connector's namespace (every page).
  virtual Result<std::vector<std::string>> List() = 0;
  virtual Status Ping() = 0;
  // Releases connections; later calls fail with Aborted.
  virtual Status Close() = 0;
  // The data path under the connector, for logs and reports: eic:// says what Client::transport
  // and transport_reason say ("shared memory", "TCP", "Unix socket", and why), mem:// says
  // "in-process".
  virtual std::string Transport() const = 0;
  virtual std::string TransportReason() const = 0;

  // --- Single-key forms, defined on the batched ones ------------------------------------------

  Result<bool> Exists(const CacheKey& key);
  Result<std::optional<KvChunk>> Get(const CacheKey& key);
  Status Put(const CacheKey& key, const KvChunkView& chunk);
};

// What a connector is made with; CreateConnector(url, Config) fills it from the config.
struct KVPORT_API ConnectorOptions {
  std::string ns;              // namespace (eic_kv_ns), unless the URL names one
  int64_t ttl_seconds = -1;    // eic_kv_ttl; -1 = no expiry
  int transport_type = 0;      // eic_trans_type; 0 = automatic (InitOptions::transport_type)
  uint32_t timeout_secs = 10;  // blocking_timeout_secs: per remote call
  std::string token_file;      // token_file: the node's token (InitOptions::token_file)
  std::string tls_ca_file;     // tls_ca_file, tls_cert_file, tls_key_file: InitOptions' TLS
  std::string tls_cert_file;
  std::string tls_key_file;
  bool tls_verify_hostname = true;  // InitOptions::tls_verify_hostname
  int replicas = 1;                 // replicas, write_quorum: a cluster's (InitOptions::replicas)
  int write_quorum = 1;
  int busy_poll_us = 0;                  // InitOptions::busy_poll
  bool checksums = true;                 // checksums: InitOptions::checksums
  std::vector<std::string> ucx_devices;  // ucx_devices: InitOptions::ucx_devices
  // Payload bytes of a full chunk when the caller knows it (model shape x chunk_size): gets then
  // take one round trip, reading straight into buffers of this size; a larger stored value is
  // fetched again at its true size. 0 = unknown: a get first reads metadata (sizes), then data.
  uint64_t expected_chunk_bytes = 0;
  // The largest chunk payload a get allocates for. Sizes come from the node, so they are
  // checked against this before any buffer is sized: a stored object that is larger reads as a
  // miss (with a warning) and is never fetched. Must be at least expected_chunk_bytes.
  uint64_t max_chunk_bytes = uint64_t{1} << 30;
};

// Makes the connector `url` names. Known schemes: "eic" (a kvport node: eic://host:port or
// eic://host:port/namespace) and "mem" (an in-process map, mem:// or mem://name; connectors of
// the same name share one map, for tests and single-process setups). An unknown scheme is
// InvalidArgument listing the known ones; a bad host/port names the part.
KVPORT_API Result<std::unique_ptr<RemoteConnector>> CreateConnector(
    std::string_view url, const ConnectorOptions& options);
// Same, with options from LMCache-style config (remote_url, eic_kv_ns, eic_kv_ttl,
// eic_trans_type, blocking_timeout_secs, token_file, tls_*_file, replicas, write_quorum,
// busy_poll_us, ucx_devices, checksums).
// InvalidArgument when remote_url is empty.
KVPORT_API Result<std::unique_ptr<RemoteConnector>> CreateConnector(const Config& config);

// Runs a connector's calls on a bounded pool of threads in LMCache's priority order: PEEK
// (contains) > PREFETCH (get prefix) > GET > PUT. A PEEK submitted behind a queue of PUTs runs
// before them. The connector must outlive this object; the destructor finishes queued work.
class KVPORT_API AsyncConnector {
 public:
  AsyncConnector(RemoteConnector& connector, size_t threads);
  ~AsyncConnector();

  // Key and chunk spans are copied into the task; payload bytes are borrowed and must stay
  // valid until the future is ready.
  std::future<Result<size_t>> Contains(std::vector<CacheKey> keys);
  std::future<Result<std::vector<KvChunk>>> GetPrefix(std::vector<CacheKey> keys);
  std::future<Result<std::vector<std::optional<KvChunk>>>> Get(std::vector<CacheKey> keys);
  std::future<Result<std::vector<Status>>> Put(std::vector<CacheKey> keys,
                                               std::vector<KvChunkView> chunks);

  RemoteConnector& connector() { return connector_; }

 private:
  RemoteConnector& connector_;
  std::unique_ptr<PriorityExecutor> executor_;
};

}  // namespace kvport
