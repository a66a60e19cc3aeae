// SPDX-License-Identifier: Apache-2.0
#include "protocol/wire.h"

#include <fmt/core.h>

namespace kvport::protocol {

Status WireReader::Truncated(std::string_view field, uint64_t need) const {
  return Status::Corruption(fmt::format("{}: truncated at {}: need {} bytes at offset {}, {} left",
                                        context_, field, need, pos_, remaining()));
}

Status WireReader::Error(StatusCode code, std::string_view message) const {
  return Status(code, fmt::format("{}: {}", context_, message));
}

Status WireReader::ReadU8(std::string_view field, uint8_t* v) {
  if (remaining() < 1) return Truncated(field, 1);
  *v = static_cast<uint8_t>(bytes_[pos_]);
  pos_ += 1;
  return Status::Ok();
}

Status WireReader::ReadU16(std::string_view field, uint16_t* v) {
  if (remaining() < 2) return Truncated(field, 2);
  *v = LoadLE16(bytes_.data() + pos_);
  pos_ += 2;
  return Status::Ok();
}

Status WireReader::ReadU32(std::string_view field, uint32_t* v) {
  if (remaining() < 4) return Truncated(field, 4);
  *v = LoadLE32(bytes_.data() + pos_);
  pos_ += 4;
  return Status::Ok();
}

Status WireReader::ReadU64(std::string_view field, uint64_t* v) {
  if (remaining() < 8) return Truncated(field, 8);
  *v = LoadLE64(bytes_.data() + pos_);
  pos_ += 8;
  return Status::Ok();
}

Status WireReader::ReadBytes(std::string_view field, uint64_t n, std::string_view* v) {
  if (remaining() < n) return Truncated(field, n);
  *v = bytes_.substr(pos_, static_cast<size_t>(n));
  pos_ += static_cast<size_t>(n);
  return Status::Ok();
}

Status WireReader::ExpectEnd() const {
  if (remaining() == 0) return Status::Ok();
  return Status::Corruption(
      fmt::format("{}: {} trailing bytes after offset {}", context_, remaining(), pos_));
}

}  // namespace kvport::protocol
