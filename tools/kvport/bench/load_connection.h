// SPDX-License-Identifier: Apache-2.0
// LoadConnection: one engine worker's connection to a system under load (kvport through its
// client, redis-server through hiredis), with the four calls the engines' sequences make, each
// one round trip in the system's best pattern.
//
// kvport: MExist, MGetMeta, MGet and MSet (with each page's metadata) of the batch, one client
// per connection (InitOptions::connections = 1, TCP).
// redis: one pipeline of EXISTS per key (EXISTS of several keys answers a count, not which),
// MGET of the metadata keys, MGET of the batch, MSET of the batch's pages and metadata keys.
//
// Each call answers per key (KeyAnswer); a non-OK Status means the call as a whole failed (the
// connection is then unusable for redis: the caller stops using it).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvport/status.h"

namespace kvport::bench {

enum class KeyAnswer : uint8_t {
  kFound,    // exists / read / stored
  kMissing,  // not stored
  kFailed,   // any other answer (an error code, a reply of the wrong type)
};

class LoadConnection {
 public:
  virtual ~LoadConnection() = default;

  virtual Status Exists(const std::vector<std::string>& keys, std::vector<KeyAnswer>* answers) = 0;
  // The metadata of each key (empty where not kFound).
  virtual Status GetMeta(const std::vector<std::string>& keys, std::vector<KeyAnswer>* answers,
                         std::vector<std::string>* metas) = 0;
  // Reads key i into buffers[i] (each the size of a page); lengths[i] is the bytes it holds.
  virtual Status Get(const std::vector<std::string>& keys,
                     std::span<const std::span<uint8_t>> buffers, std::vector<KeyAnswer>* answers,
                     std::vector<uint64_t>* lengths) = 0;
  // `metas`: one per key, or empty to store no metadata (redis then writes no metadata keys).
  virtual Status Put(const std::vector<std::string>& keys,
                     std::span<const std::span<uint8_t>> values,
                     const std::vector<std::string>& metas, std::vector<KeyAnswer>* answers) = 0;
};

// A kvport client of its own, one TCP connection to `endpoint`; keys in namespace `ns`.
Result<std::unique_ptr<LoadConnection>> ConnectKvport(const std::string& endpoint,
                                                      const std::string& ns);
// A hiredis connection to redis-server on 127.0.0.1:`port`.
Result<std::unique_ptr<LoadConnection>> ConnectRedis(uint16_t port);

}  // namespace kvport::bench
