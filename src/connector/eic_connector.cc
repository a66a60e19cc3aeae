// SPDX-License-Identifier: Apache-2.0
#include "connector/eic_connector.h"

#include <fmt/core.h>

#include <atomic>
#include <chrono>
#include <new>

#include "connector/chunk_check.h"
#include "kvport/client.h"
#include "kvport/log.h"
#include "kvport/size.h"

namespace kvport {
namespace {

// The Status a per-key client code stands for; `error` is the call's first failure, whose
// message is kept when it is about this very code.
Status KeyCodeToStatus(KeyCode code, const std::string& key) {
  std::string what = fmt::format("key '{}': {}", key, KeyCodeName(code));
  switch (code) {
    case KeyCode::kSuccess:
      return Status::Ok();
    case KeyCode::kKeyNotExist:
      return Status::NotFound(std::move(what));
    case KeyCode::kNoSpace:
      return Status::NoSpace(std::move(what));
    case KeyCode::kTooLarge:
      return Status::TooLarge(std::move(what));
    case KeyCode::kBufferTooSmall:
      return Status::Internal(std::move(what));
    case KeyCode::kInvalidArgument:
      return Status::InvalidArgument(std::move(what));
    case KeyCode::kUnavailable:
      return Status::Unavailable(std::move(what));
    case KeyCode::kTimeout:
      return Status::Timeout(std::move(what));
    case KeyCode::kDeviceError:
      return Status::DeviceError(std::move(what));
    case KeyCode::kPermissionDenied:
      return Status::PermissionDenied(std::move(what));
    case KeyCode::kFailed:
      break;
  }
  return Status::IoError(std::move(what));
}

std::vector<std::string> KeyStrings(std::span<const CacheKey> keys) {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const CacheKey& k : keys)
    out.push_back(k.ToString());
  return out;
}

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

class EicConnector : public RemoteConnector {
 public:
  EicConnector(std::unique_ptr<Client> client, const ConnectorOptions& options)
      : client_(std::move(client)), options_(options) {}

  Result<std::vector<Status>> BatchedPut(std::span<const CacheKey> keys,
                                         std::span<const KvChunkView> chunks) override {
    KVPORT_RETURN_IF_ERROR(CheckOpen());
    if (keys.size() != chunks.size()) {
      return Status::InvalidArgument(
          fmt::format("{} keys but {} chunks", keys.size(), chunks.size()));
    }
    std::vector<std::string> names = KeyStrings(keys);
    std::vector<Status> out(keys.size());
    // Only checked chunks go to the node, in one MSET; the others keep their error.
    std::vector<size_t> sent;
    std::vector<std::string> sent_names, metas;
    IOBuffers values;
    for (size_t i = 0; i < keys.size(); ++i) {
      out[i] = CheckChunkToStore(names[i], chunks[i]);
      if (!out[i].ok()) continue;
      Result<std::vector<uint8_t>> meta = chunks[i].meta->Encode();
      if (!meta.ok()) {
        out[i] = meta.status();
        continue;
      }
      sent.push_back(i);
      sent_names.push_back(names[i]);
      metas.emplace_back(meta->begin(), meta->end());
      values.Append(chunks[i].data.data(), chunks[i].data.size());
    }
    if (sent.empty()) return out;
    SetOptions set{options_.ns, options_.ttl_seconds, Timeout()};
    KVPORT_ASSIGN_OR_RETURN(BatchResult result, client_->MSet(sent_names, values, set, metas));
    for (size_t j = 0; j < sent.size(); ++j) {
      out[sent[j]] = KeyCodeToStatus(result.codes[j], sent_names[j]);
      if (out[sent[j]].ok()) LearnChunkBytes(chunks[sent[j]].data.size());
    }
    return out;
  }

  Result<std::vector<std::optional<KvChunk>>> BatchedGet(std::span<const CacheKey> keys) override {
    KVPORT_RETURN_IF_ERROR(CheckOpen());
    return Fetch(keys, /*stop_at_first_miss=*/false);
  }

  Result<size_t> BatchedContains(std::span<const CacheKey> keys) override {
    KVPORT_RETURN_IF_ERROR(CheckOpen());
    if (keys.empty()) return size_t{0};
    std::vector<std::string> names = KeyStrings(keys);
    KVPORT_ASSIGN_OR_RETURN(BatchResult result,
                            client_->MExist(names, ExistOptions{options_.ns, Timeout()}));
    size_t hits = 0;
    while (hits < result.codes.size() && result.codes[hits] == KeyCode::kSuccess)
      ++hits;
    // A key the node could not answer for is not a miss: say why instead of under-counting.
    if (hits < result.codes.size() && result.codes[hits] != KeyCode::kKeyNotExist) {
      return KeyCodeToStatus(result.codes[hits], names[hits]);
    }
    return hits;
  }

  Result<std::vector<KvChunk>> BatchedGetPrefix(std::span<const CacheKey> keys) override {
    KVPORT_RETURN_IF_ERROR(CheckOpen());
    KVPORT_ASSIGN_OR_RETURN(auto slots, Fetch(keys, /*stop_at_first_miss=*/true));
    std::vector<KvChunk> out;
    for (auto& slot : slots) {
      if (!slot) break;
      out.push_back(std::move(*slot));
    }
    return out;
  }

  Status Remove(const CacheKey& key) override {
    KVPORT_RETURN_IF_ERROR(CheckOpen());
    std::vector<std::string> names{key.ToString()};
    KVPORT_ASSIGN_OR_RETURN(BatchResult result,
                            client_->MDel(names, DelOptions{options_.ns, Timeout()}));
    return KeyCodeToStatus(result.codes[0], names[0]);
  }

  Result<std::vector<std::string>> List() override {
    KVPORT_RETURN_IF_ERROR(CheckOpen());
    std::vector<std::string> keys;
    uint64_t cursor = 0;
    do {
      KVPORT_ASSIGN_OR_RETURN(KeyPage page, client_->List(options_.ns, cursor, kListPageKeys));
      keys.insert(keys.end(), std::make_move_iterator(page.keys.begin()),
                  std::make_move_iterator(page.keys.end()));
      cursor = page.next_cursor;
    } while (cursor != 0);
    return keys;
  }

  Status Ping() override {
    KVPORT_RETURN_IF_ERROR(CheckOpen());
    return client_->Ping();
  }

  Status Close() override {
    closed_ = true;
    return Status::Ok();
  }

  std::string Transport() const override { return std::string(client_->transport()); }
  std::string TransportReason() const override { return client_->transport_reason(); }

 private:
  static constexpr uint32_t kListPageKeys = 1024;

  void LearnChunkBytes(uint64_t bytes) {
    bytes = std::min(bytes, options_.max_chunk_bytes);
    uint64_t seen = learned_chunk_bytes_.load(std::memory_order_relaxed);
    while (bytes > seen &&
           !learned_chunk_bytes_.compare_exchange_weak(seen, bytes, std::memory_order_relaxed)) {
    }
  }

  Status CheckOpen() const {
    return closed_ ? Status::Aborted("eic:// connector is closed") : Status::Ok();
  }

  std::chrono::milliseconds Timeout() const {
    return std::chrono::milliseconds(uint64_t{options_.timeout_secs} * 1000);
  }

  // Whether a stored object the node describes (value size, metadata blob) can be read as a
  // chunk: checked before any buffer is sized for it, since both come from the node. A value
  // over max_chunk_bytes, or one whose metadata does not describe it, is a miss.
  Status CheckFetchable(const std::string& name, uint64_t value_size,
                        const std::string& meta) const {
    if (value_size > options_.max_chunk_bytes) {
      return Status::TooLarge(fmt::format(
          "stored object '{}' is {} ({} bytes), more than max_chunk_bytes {}: not read", name,
          FormatSize(value_size), value_size, FormatSize(options_.max_chunk_bytes)));
    }
    return DecodeStoredMetadata(name, Bytes(meta), value_size).status();
  }

  // Reads the chunks of `keys`: one slot per key, nullopt for a miss (or for a stored object
  // that is not a chunk). With stop_at_first_miss, nothing after the first miss is read.
  //
  // When the size of a full chunk is known (expected_chunk_bytes, or else the largest chunk
  // this connector has stored or read so far: chunks of one model are one size, a prefix's
  // last one smaller), one MGET reads every key straight into buffers of that size (a partial
  // chunk is smaller and fits); only a larger value costs a second MGET at its true size.
  // Otherwise (a fresh process that has seen no chunk yet) a meta-only MGET learns the sizes
  // first. Buffers are sized without
  // zero-filling (the MGET overwrites them), and only for sizes CheckFetchable accepted.
  Result<std::vector<std::optional<KvChunk>>> Fetch(std::span<const CacheKey> keys,
                                                    bool stop_at_first_miss) {
    std::vector<std::string> names = KeyStrings(keys);
    std::vector<std::optional<KvChunk>> slots(keys.size());
    const uint64_t expected = options_.expected_chunk_bytes != 0
                                  ? options_.expected_chunk_bytes
                                  : learned_chunk_bytes_.load(std::memory_order_relaxed);
    std::vector<uint64_t> sizes(keys.size(), expected);
    std::vector<size_t> wanted(keys.size());
    for (size_t i = 0; i < wanted.size(); ++i)
      wanted[i] = i;

    if (expected == 0 && !keys.empty()) {
      KVPORT_ASSIGN_OR_RETURN(GetResult meta,
                              client_->MGetMeta(names, GetOptions{options_.ns, Timeout()}));
      wanted.clear();
      for (size_t i = 0; i < keys.size(); ++i) {
        Status usable;
        if (meta.codes[i] == KeyCode::kSuccess) {
          usable = CheckFetchable(names[i], meta.value_sizes[i], meta.metas[i]);
          if (!usable.ok()) log::Warn("eic:// get: {}", usable.message());
        }
        if (meta.codes[i] != KeyCode::kSuccess || !usable.ok()) {
          if (stop_at_first_miss) break;
          continue;
        }
        sizes[i] = meta.value_sizes[i];
        wanted.push_back(i);
      }
    }
    // Two rounds at most: the second only for values larger than the expected chunk size.
    for (int round = 0; round < 2 && !wanted.empty(); ++round) {
      std::vector<std::string> round_names;
      IOBuffers buffers;
      for (size_t i : wanted) {
        slots[i].emplace();
        try {
          slots[i]->data.resize(sizes[i]);
        } catch (const std::bad_alloc&) {
          return Status::NoSpace(fmt::format("eic:// get: cannot allocate {} for chunk '{}'",
                                             FormatSize(sizes[i]), names[i]));
        }
        round_names.push_back(names[i]);
        buffers.Append(slots[i]->data.data(), slots[i]->data.size());
      }
      KVPORT_ASSIGN_OR_RETURN(
          GetResult got, client_->MGet(round_names, GetOptions{options_.ns, Timeout()}, buffers));
      std::vector<size_t> retry;
      for (size_t j = 0; j < wanted.size(); ++j) {
        const size_t i = wanted[j];
        if (got.codes[j] == KeyCode::kBufferTooSmall && round == 0) {
          slots[i].reset();
          Status usable = CheckFetchable(names[i], got.value_sizes[j], got.metas[j]);
          if (!usable.ok()) {
            log::Warn("eic:// get: {}", usable.message());
            continue;
          }
          sizes[i] = got.value_sizes[j];
          retry.push_back(i);
          continue;
        }
        if (got.codes[j] != KeyCode::kSuccess) {
          if (got.codes[j] != KeyCode::kKeyNotExist) {
            log::Warn("eic:// get: {}", KeyCodeToStatus(got.codes[j], names[i]).message());
          }
          slots[i].reset();
          continue;
        }
        Result<RemoteMetadata> meta =
            DecodeStoredMetadata(names[i], Bytes(got.metas[j]), got.value_sizes[j]);
        if (!meta.ok()) {
          log::Warn("eic:// get: {}", meta.status().message());
          slots[i].reset();
          continue;
        }
        slots[i]->meta = std::move(*meta);
        slots[i]->data.resize(got.value_sizes[j]);  // a partial chunk: only its bytes were read
        LearnChunkBytes(got.value_sizes[j]);
      }
      wanted = std::move(retry);
    }
    if (stop_at_first_miss) {
      size_t run = 0;
      while (run < slots.size() && slots[run])
        ++run;
      for (size_t i = run; i < slots.size(); ++i)
        slots[i].reset();
    }
    return slots;
  }

  std::unique_ptr<Client> client_;
  ConnectorOptions options_;
  std::atomic<bool> closed_{false};
  // The largest chunk stored or read so far (0: none yet), bounded by max_chunk_bytes.
  std::atomic<uint64_t> learned_chunk_bytes_{0};
};

}  // namespace

Result<std::unique_ptr<RemoteConnector>> OpenEicConnector(const std::string& endpoint,
                                                          const ConnectorOptions& options) {
  if (options.max_chunk_bytes == 0 || options.expected_chunk_bytes > options.max_chunk_bytes) {
    return Status::InvalidArgument(
        fmt::format("eic:// connector: max_chunk_bytes ({}) must be positive and at least "
                    "expected_chunk_bytes ({})",
                    options.max_chunk_bytes, options.expected_chunk_bytes));
  }
  auto client = std::make_unique<Client>();
  InitOptions init;
  init.transport_type = options.transport_type;
  init.timeout = std::chrono::milliseconds(uint64_t{options.timeout_secs} * 1000);
  init.token_file = options.token_file;
  init.tls_ca_file = options.tls_ca_file;
  init.tls_cert_file = options.tls_cert_file;
  init.tls_key_file = options.tls_key_file;
  init.tls_verify_hostname = options.tls_verify_hostname;
  init.replicas = options.replicas;
  init.write_quorum = options.write_quorum;
  init.busy_poll = std::chrono::microseconds(options.busy_poll_us);
  init.checksums = options.checksums;
  init.ucx_devices = options.ucx_devices;
  KVPORT_RETURN_IF_ERROR(client->Init("kvport-connector", endpoint, init));
  return std::unique_ptr<RemoteConnector>(
      std::make_unique<EicConnector>(std::move(client), options));
}

}  // namespace kvport
