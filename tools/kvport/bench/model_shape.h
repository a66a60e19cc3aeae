// SPDX-License-Identifier: Apache-2.0
// ModelShape: the KV-cache layout of a model, and the bytes of one chunk of it.
//
// A chunk of `tokens_per_chunk` tokens holds keys and values for every layer (LMCache's KV_2LTD
// layout, [2, layers, tokens, kv_heads * head_dim]), so its payload is
//   2 * layers * tokens_per_chunk * kv_heads * head_dim * bytes_per_element.
// Llama-3-8B (32 layers, 8 KV heads, head dim 128, bf16) at 256 tokens is 32 MiB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvport/status.h"

namespace kvport::bench {

struct ModelShape {
  int layers = 32;
  int kv_heads = 8;
  int head_dim = 128;
  std::string dtype = "bf16";  // see DtypeBytes
  int tokens_per_chunk = 256;

  // KV heads x head dim: the hidden size of one of K or V for one layer and token.
  int64_t hidden() const { return int64_t{kv_heads} * head_dim; }
  // "32 layers x 8 KV heads x 128 head dim, bf16, 256 tokens per chunk".
  std::string ToString() const;
};

// Bytes per element of a dtype name: bf16/bfloat16, fp16/float16/half (2), fp32/float32/float
// (4), fp8/fp8_e4m3fn/fp8_e5m2/uint8/int8 (1). InvalidArgument listing them otherwise.
Result<size_t> DtypeBytes(std::string_view dtype);

// The payload bytes of one chunk. InvalidArgument when a dimension is not positive, the dtype is
// unknown, or the size exceeds 2^31 - 1 bytes (LMCache's metadata stores it in an int32).
Result<uint64_t> ChunkBytes(const ModelShape& shape);

}  // namespace kvport::bench
