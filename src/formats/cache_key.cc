// SPDX-License-Identifier: Apache-2.0
#include "kvport/cache_key.h"

#include <fmt/core.h>

#include <array>
#include <limits>
#include <utility>

namespace kvport {
namespace {

constexpr std::array<std::pair<KeyDtype, std::string_view>, 14> kDtypeNames = {{
    {KeyDtype::kHalf, "half"},
    {KeyDtype::kBfloat16, "bfloat16"},
    {KeyDtype::kFloat, "float"},
    {KeyDtype::kDouble, "double"},
    {KeyDtype::kInt8, "int8"},
    {KeyDtype::kUint8, "uint8"},
    {KeyDtype::kInt16, "int16"},
    {KeyDtype::kInt32, "int32"},
    {KeyDtype::kInt64, "int64"},
    {KeyDtype::kBool, "bool"},
    {KeyDtype::kFp8E4m3fn, "fp8_e4m3fn"},
    {KeyDtype::kFp8E4m3fnuz, "fp8_e4m3fnuz"},
    {KeyDtype::kFp8E5m2, "fp8_e5m2"},
    {KeyDtype::kFp8E5m2fnuz, "fp8_e5m2fnuz"},
}};

std::string KnownDtypeList() {
  std::string out;
  for (const auto& [dtype, name] : kDtypeNames) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

bool IsDtypeName(std::string_view s) {
  for (const auto& entry : kDtypeNames) {
    if (entry.second == s) return true;
  }
  return false;
}

bool IsAllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::vector<std::string_view> SplitFields(std::string_view text) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    size_t at = text.find('@', start);
    if (at == std::string_view::npos) {
      fields.push_back(text.substr(start));
      return fields;
    }
    fields.push_back(text.substr(start, at - start));
    start = at + 1;
  }
}

// Keys are short; a pathological input is cut so that the message stays one readable line.
std::string Quote(std::string_view text) {
  constexpr size_t kMax = 200;
  if (text.size() <= kMax) return fmt::format("'{}'", text);
  return fmt::format("'{}...' ({} bytes)", text.substr(0, kMax), text.size());
}

// Reads the fields of one key; each failure names the field by its 1-based position.
class KeyParser {
 public:
  explicit KeyParser(std::string_view text) : text_(text) {}

  Status Error(size_t index, std::string_view what, std::string_view field,
               std::string_view expected) const {
    return Status::InvalidArgument(fmt::format("cache key {}: field {} ({}) is {}: expected {}",
                                               Quote(text_), index + 1, what, Quote(field),
                                               expected));
  }

  // A canonical decimal integer in [min, INT32_MAX].
  Result<int32_t> Int(size_t index, std::string_view what, std::string_view field,
                      int32_t min) const {
    std::string expected =
        fmt::format("a decimal integer from {} to {} without sign or leading zeros", min,
                    std::numeric_limits<int32_t>::max());
    if (!IsAllDigits(field) || (field.size() > 1 && field[0] == '0') || field.size() > 10) {
      return Error(index, what, field, expected);
    }
    int64_t v = 0;
    for (char c : field)
      v = v * 10 + (c - '0');
    if (v < min || v > std::numeric_limits<int32_t>::max()) {
      return Error(index, what, field, expected);
    }
    return static_cast<int32_t>(v);
  }

  // Fills key.chunk_hash and key.chunk_hash_signed.
  Status Hash(size_t index, std::string_view field, CacheKey& key) const {
    constexpr std::string_view kExpected =
        "lowercase hex without 0x or leading zeros, at most 16 digits (64 bits), optionally "
        "negative ('-' then at most 2^63 in hex)";
    std::string_view digits = field;
    bool negative = !digits.empty() && digits[0] == '-';
    if (negative) digits.remove_prefix(1);
    if (digits.empty()) return Error(index, "chunk hash", field, kExpected);
    for (char c : digits) {
      bool lower_hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
      if (!lower_hex) {
        bool upper_hex = c >= 'A' && c <= 'F';
        return Error(index, "chunk hash", field,
                     upper_hex ? std::string(kExpected) + " (uppercase is not LMCache's form)"
                               : std::string(kExpected));
      }
    }
    if (digits.size() > 16) {
      return Error(index, "chunk hash", field,
                   std::string(kExpected) +
                       "; a longer hash (e.g. vLLM's 256-bit sha256) is "
                       "not a kvport chunk hash");
    }
    if (digits.size() > 1 && digits[0] == '0') {
      return Error(index, "chunk hash", field,
                   std::string(kExpected) + " (a zero-padded hash would not round-trip)");
    }
    uint64_t magnitude = 0;
    for (char c : digits) {
      magnitude = (magnitude << 4) | static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    if (negative) {
      if (magnitude == 0 || magnitude > (uint64_t{1} << 63)) {
        return Error(index, "chunk hash", field, kExpected);
      }
      key.chunk_hash = ~magnitude + 1;  // two's complement of -magnitude
      key.chunk_hash_signed = true;
    } else {
      key.chunk_hash = magnitude;
      key.chunk_hash_signed = false;
    }
    return Status::Ok();
  }

  Result<KeyDtype> Dtype(size_t index, std::string_view field) const {
    Result<KeyDtype> dtype = ParseKeyDtype(field);
    if (!dtype.ok()) return Error(index, "dtype", field, "one of " + KnownDtypeList());
    return dtype;
  }

  Status Tag(size_t index, std::string_view field, CacheKey& key) const {
    size_t percent = field.find('%');
    if (percent == std::string_view::npos) {
      return Error(index, "tag", field, "name%value (a tag needs a '%')");
    }
    if (percent == 0) return Error(index, "tag", field, "a non-empty name before '%'");
    key.tags.push_back(
        CacheKeyTag{std::string(field.substr(0, percent)), std::string(field.substr(percent + 1))});
    return Status::Ok();
  }

 private:
  std::string_view text_;
};

}  // namespace

std::string_view KeyDtypeName(KeyDtype dtype) {
  for (const auto& [d, name] : kDtypeNames) {
    if (d == dtype) return name;
  }
  return "unknown";
}

Result<KeyDtype> ParseKeyDtype(std::string_view name) {
  for (const auto& [dtype, n] : kDtypeNames) {
    if (n == name) return dtype;
  }
  return Status::InvalidArgument(
      fmt::format("unknown dtype {}: expected one of {}", Quote(name), KnownDtypeList()));
}

std::string CacheKey::HashToHex(uint64_t hash) {
  return fmt::format("{:x}", hash);
}

Status CacheKey::Validate() const {
  auto bad = [](std::string_view what, std::string_view value, std::string_view why) {
    return Status::InvalidArgument(
        fmt::format("cache key {} {} cannot be written: {}", what, Quote(value), why));
  };
  if (model_name.empty()) return bad("model name", model_name, "it is empty");
  if (model_name.find('@') != std::string::npos) {
    return bad("model name", model_name, "it contains '@', the key's field separator");
  }
  if (world_size < 1) return bad("world_size", std::to_string(world_size), "it must be >= 1");
  if (worker_id < 0) return bad("worker_id", std::to_string(worker_id), "it must be >= 0");
  if (KeyDtypeName(dtype) == "unknown") {
    return bad("dtype", std::to_string(static_cast<int>(dtype)), "not a KeyDtype value");
  }
  if (layer_id.has_value() && *layer_id < 0) {
    return bad("layer id", std::to_string(*layer_id), "it must be >= 0");
  }
  for (const CacheKeyTag& tag : tags) {
    if (tag.name.empty()) return bad("tag name", tag.name, "it is empty");
    if (tag.name.find_first_of("@%") != std::string::npos) {
      return bad("tag name", tag.name, "it contains '@' or '%'");
    }
    if (tag.value.find('@') != std::string::npos) {
      return bad("tag value", tag.value, "it contains '@', the key's field separator");
    }
  }
  return Status::Ok();
}

std::string CacheKey::ToString() const {
  std::string hash;
  if (chunk_hash_signed && static_cast<int64_t>(chunk_hash) < 0) {
    hash = "-" + HashToHex(~chunk_hash + 1);  // magnitude of the negative value
  } else {
    hash = HashToHex(chunk_hash);
  }
  std::string out =
      fmt::format("{}@{}@{}@{}@{}", model_name, world_size, worker_id, hash, KeyDtypeName(dtype));
  if (layer_id.has_value()) out += fmt::format("@{}", *layer_id);
  for (const CacheKeyTag& tag : tags) {
    out += '@';
    out += tag.name;
    out += '%';
    out += tag.value;
  }
  return out;
}

std::string CacheKey::ToLegacyString(std::string_view fmt) const {
  return std::string(fmt) + "@" + ToString();
}

Result<CacheKey> CacheKey::Parse(std::string_view text) {
  KeyParser p(text);
  const std::vector<std::string_view> fields = SplitFields(text);
  CacheKey key;

  // The legacy form has one more leading field; its dtype is field 6 rather than 5.
  size_t i = 0;
  if (fields.size() >= 6 && IsDtypeName(fields[5])) {
    if (fields[0].empty()) return p.Error(0, "format", fields[0], "a non-empty format name");
    key.legacy_fmt = std::string(fields[0]);
    i = 1;
  }
  if (fields.size() < i + 5) {
    return Status::InvalidArgument(
        fmt::format("cache key {} has {} '@'-separated fields: expected at least 5, "
                    "model@world_size@worker_id@chunk_hash@dtype (optionally a format name first)",
                    Quote(text), fields.size()));
  }

  if (fields[i].empty()) return p.Error(i, "model name", fields[i], "a non-empty model name");
  key.model_name = std::string(fields[i]);
  KVPORT_ASSIGN_OR_RETURN(key.world_size, p.Int(i + 1, "world_size", fields[i + 1], 1));
  KVPORT_ASSIGN_OR_RETURN(key.worker_id, p.Int(i + 2, "worker_id", fields[i + 2], 0));
  KVPORT_RETURN_IF_ERROR(p.Hash(i + 3, fields[i + 3], key));
  KVPORT_ASSIGN_OR_RETURN(key.dtype, p.Dtype(i + 4, fields[i + 4]));

  size_t next = i + 5;
  if (next < fields.size() && fields[next].find('%') == std::string_view::npos) {
    // Not a tag, so it must be the layer id (LMCache: a field of digits right after dtype).
    if (!IsAllDigits(fields[next])) {
      return p.Error(next, "layer id or tag", fields[next],
                     "a layer id (decimal integer) or a name%value tag");
    }
    KVPORT_ASSIGN_OR_RETURN(int32_t layer, p.Int(next, "layer id", fields[next], 0));
    key.layer_id = layer;
    ++next;
  }
  for (; next < fields.size(); ++next)
    KVPORT_RETURN_IF_ERROR(p.Tag(next, fields[next], key));
  return key;
}

bool CacheKey::operator==(const CacheKey& other) const {
  auto printed_negative = [](const CacheKey& k) {
    return k.chunk_hash_signed && static_cast<int64_t>(k.chunk_hash) < 0;
  };
  return model_name == other.model_name && world_size == other.world_size &&
         worker_id == other.worker_id && chunk_hash == other.chunk_hash &&
         printed_negative(*this) == printed_negative(other) && dtype == other.dtype &&
         layer_id == other.layer_id && tags == other.tags;
}

}  // namespace kvport
