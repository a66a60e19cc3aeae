// SPDX-License-Identifier: Apache-2.0
// Checks shared by every connector: what makes a chunk storable, and what makes stored bytes a
// chunk.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "kvport/connector.h"

namespace kvport {

// OK when `chunk` can be stored: it has metadata that validates and exactly meta->length payload
// bytes. InvalidArgument naming the key otherwise.
Status CheckChunkToStore(std::string_view key, const KvChunkView& chunk);

// Decodes the metadata blob stored with a value of `value_size` bytes. Corruption naming the key
// when the blob does not decode or describes another payload size: such an object is not a
// chunk (a foreign writer, or damage) and must read as a miss.
Result<RemoteMetadata> DecodeStoredMetadata(std::string_view key, std::span<const uint8_t> blob,
                                            uint64_t value_size);

}  // namespace kvport
