// SPDX-License-Identifier: Apache-2.0
// CacheKey: the name of one chunk of KV cache, in LMCache's CacheEngineKey string form.
//
// Current form (LMCache v1, 0.4.x), fields separated by '@':
//
//   model@world_size@worker_id@chunk_hash@dtype[@layer_id][@name%value ...]
//
// e.g. "meta-llama/Llama-3.1-8B@8@3@1f2e3d4c5b6a7988@bfloat16@12@lora%a1". Older releases put a
// format name first ("vllm@model@world_size@..."): Parse() reads both, ToString() writes the
// current form and ToLegacyString() the old one. docs/formats.md has the grammar.
//
// The chunk hash is 64 bits (uint64_t, what ChunkHasher produces), written as lowercase hex
// without "0x" and without leading zeros, as LMCache prints a Python int with "{:x}". LMCache
// hashing with Python's builtin hash() (signed 64-bit) writes a negative hash as "-" + hex of
// the magnitude ("-1a2b"): Parse() accepts it (magnitude up to 2^63), stores the two's complement
// in chunk_hash and sets chunk_hash_signed so that ToString() writes the same text back. Hashes
// longer than 64 bits (vLLM's 256-bit sha256 bytes hashes) are rejected: kvport does not make
// them, and a connector passes LMCache's key strings through as opaque text anyway.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvport/export.h"
#include "kvport/status.h"

namespace kvport {

// The dtype names LMCache writes into keys (its TORCH_DTYPE_TO_STR_DTYPE values).
enum class KeyDtype : uint8_t {
  kHalf,         // "half" (torch.float16)
  kBfloat16,     // "bfloat16"
  kFloat,        // "float" (torch.float32)
  kDouble,       // "double"
  kInt8,         // "int8"
  kUint8,        // "uint8"
  kInt16,        // "int16"
  kInt32,        // "int32"
  kInt64,        // "int64"
  kBool,         // "bool"
  kFp8E4m3fn,    // "fp8_e4m3fn"
  kFp8E4m3fnuz,  // "fp8_e4m3fnuz"
  kFp8E5m2,      // "fp8_e5m2"
  kFp8E5m2fnuz,  // "fp8_e5m2fnuz"
};

// "half", "bfloat16", ... as written in a key.
KVPORT_API std::string_view KeyDtypeName(KeyDtype dtype);
// The KeyDtype named `name` (exact, case-sensitive, as LMCache writes it); InvalidArgument
// listing the known names otherwise.
KVPORT_API Result<KeyDtype> ParseKeyDtype(std::string_view name);

// One "@name%value" tag (LMCache's request_configs entries "lmcache.tag.<name>").
struct KVPORT_API CacheKeyTag {
  std::string name;   // non-empty; no '@' or '%'
  std::string value;  // may be empty; no '@' (a '%' is allowed: the first '%' splits)
  bool operator==(const CacheKeyTag&) const = default;
};

struct KVPORT_API CacheKey {
  std::string model_name;  // non-empty; no '@'
  int32_t world_size = 1;  // >= 1
  int32_t worker_id = 0;   // >= 0 (not checked against world_size: LMCache does not either)
  uint64_t chunk_hash = 0;
  // When true, chunk_hash is a signed 64-bit value and ToString() writes a negative one as
  // "-<hex of magnitude>" (LMCache with Python's builtin hash()). Non-negative values print the
  // same either way.
  bool chunk_hash_signed = false;
  KeyDtype dtype = KeyDtype::kBfloat16;
  std::optional<int32_t> layer_id;  // set: a LayerCacheEngineKey; >= 0
  std::vector<CacheKeyTag> tags;    // in order of appearance
  // The leading format field ("vllm", ...) of a key parsed from the legacy form; empty for a
  // key in the current form. ToString() ignores it; equality ignores it.
  std::string legacy_fmt;

  // InvalidArgument naming the first field that cannot be written so that Parse() reads it
  // back: empty model name, '@' inside a field, world_size < 1, negative worker or layer id,
  // a bad tag name or value.
  Status Validate() const;

  // The current form. Only meaningful for a key that passes Validate(); for such a key
  // Parse(ToString()) returns an equal key.
  std::string ToString() const;
  // The legacy form: `fmt` + "@" + ToString(). `fmt` must be non-empty, without '@', and not a
  // dtype name (which would make the key read as the current form).
  std::string ToLegacyString(std::string_view fmt) const;

  // Reads either form. A key is in the legacy form exactly when its sixth field is a dtype
  // name (in the current form that field is a layer id or a tag, never a dtype). Errors are
  // InvalidArgument and name the field (number and meaning), its text, and what was expected.
  // Numbers must be canonical (no sign, no leading zeros) so that the text round-trips.
  static Result<CacheKey> Parse(std::string_view text);

  // The hash as written in a key: lowercase hex, no leading zeros ("0" for zero).
  static std::string HashToHex(uint64_t hash);

  // Equal when ToString() is equal (legacy_fmt is not compared).
  bool operator==(const CacheKey& other) const;
};

}  // namespace kvport
