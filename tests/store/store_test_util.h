// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the store's tests.
#pragma once

#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "store/object_store.h"

namespace kvport::store::testing {

inline constexpr uint64_t kBlock = Arena::kBlockBytes;

// A file's whole content (empty when it cannot be read), and its replacement: for tests that
// edit a disk tier's files behind its back.
inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
inline void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A store of `blocks` 4 KiB blocks whose TTLs follow `clock` (may be null).
inline std::unique_ptr<ObjectStore> MakeStore(uint64_t blocks, const TtlClock* clock = nullptr,
                                              uint64_t max_value_bytes = 0) {
  StoreOptions options;
  options.capacity_bytes = blocks * kBlock;
  options.max_value_bytes = max_value_bytes;
  options.ttl_clock = clock;
  auto store = ObjectStore::Create(options);
  return store.ok() ? std::move(store).value() : nullptr;
}

// An EvictionSink that wants every evicted object and hands it to `evicted`.
class EvictedTo final : public EvictionSink {
 public:
  explicit EvictedTo(std::function<void(const EvictedObject&)> evicted)
      : evicted_(std::move(evicted)) {}
  bool Leaving(const EvictedObject&) override { return true; }
  void Evicted(const EvictedObject& object) override { evicted_(object); }

 private:
  std::function<void(const EvictedObject&)> evicted_;
};

// Reserve + copy + Commit, the way the server does it.
inline Status Put(ObjectStore& store, std::string_view ns, std::string_view key,
                  std::string_view value, std::string_view meta = {},
                  uint32_t ttl_seconds = kNoExpiry) {
  Result<WriteHandle> w = store.Reserve(ns, key, value.size(), meta, ttl_seconds);
  if (!w.ok()) return w.status();
  std::memcpy(w->data(), value.data(), value.size());
  return store.Commit(std::move(*w));
}

// The value of (ns, key), or nullopt when Lookup fails.
inline std::optional<std::string> Get(ObjectStore& store, std::string_view ns,
                                      std::string_view key) {
  Result<ReadHandle> r = store.Lookup(ns, key);
  if (!r.ok()) return std::nullopt;
  return std::string(reinterpret_cast<const char*>(r->data()), r->size());
}

// `blocks` blocks of byte `fill`.
inline std::string Blocks(uint64_t blocks, char fill) {
  return std::string(blocks * kBlock, fill);
}

}  // namespace kvport::store::testing
