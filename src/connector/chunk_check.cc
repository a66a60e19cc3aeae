// SPDX-License-Identifier: Apache-2.0
#include "connector/chunk_check.h"

#include <fmt/core.h>

namespace kvport {

Status CheckChunkToStore(std::string_view key, const KvChunkView& chunk) {
  if (chunk.meta == nullptr) {
    return Status::InvalidArgument(fmt::format("chunk '{}' has no metadata", key));
  }
  Status valid = chunk.meta->Validate();
  if (!valid.ok()) return valid.WithContext(fmt::format("chunk '{}'", key));
  if (chunk.data.size() != static_cast<uint64_t>(chunk.meta->length)) {
    return Status::InvalidArgument(
        fmt::format("chunk '{}': payload is {} bytes but its metadata describes {} bytes", key,
                    chunk.data.size(), chunk.meta->length));
  }
  return Status::Ok();
}

Result<RemoteMetadata> DecodeStoredMetadata(std::string_view key, std::span<const uint8_t> blob,
                                            uint64_t value_size) {
  Result<RemoteMetadata> meta = RemoteMetadata::Decode(blob);
  if (!meta.ok()) {
    return Status::Corruption(
        fmt::format("stored object '{}' is not a chunk: {}", key, meta.status().message()));
  }
  if (static_cast<uint64_t>(meta->length) != value_size) {
    return Status::Corruption(
        fmt::format("stored object '{}' is not a chunk: {} payload bytes, metadata says {}", key,
                    value_size, meta->length));
  }
  return meta;
}

}  // namespace kvport
