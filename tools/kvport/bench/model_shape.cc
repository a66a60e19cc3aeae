// SPDX-License-Identifier: Apache-2.0
#include "bench/model_shape.h"

#include <fmt/core.h>

#include <cstdint>

namespace kvport::bench {

std::string ModelShape::ToString() const {
  return fmt::format("{} layers x {} KV heads x {} head dim, {}, {} tokens per chunk", layers,
                     kv_heads, head_dim, dtype, tokens_per_chunk);
}

Result<size_t> DtypeBytes(std::string_view dtype) {
  if (dtype == "bf16" || dtype == "bfloat16" || dtype == "fp16" || dtype == "float16" ||
      dtype == "half") {
    return size_t{2};
  }
  if (dtype == "fp32" || dtype == "float32" || dtype == "float") return size_t{4};
  if (dtype == "fp8" || dtype == "fp8_e4m3fn" || dtype == "fp8_e5m2" || dtype == "uint8" ||
      dtype == "int8") {
    return size_t{1};
  }
  return Status::InvalidArgument(
      fmt::format("unknown dtype '{}': expected bf16, fp16, fp32 or fp8 (also bfloat16, float16, "
                  "half, float32, float, fp8_e4m3fn, fp8_e5m2, uint8, int8)",
                  dtype));
}

Result<uint64_t> ChunkBytes(const ModelShape& shape) {
  struct Dim {
    const char* name;
    int value;
  };
  for (const Dim& d :
       {Dim{"layers", shape.layers}, Dim{"KV heads", shape.kv_heads},
        Dim{"head dim", shape.head_dim}, Dim{"tokens per chunk", shape.tokens_per_chunk}}) {
    if (d.value <= 0) {
      return Status::InvalidArgument(
          fmt::format("model shape: {} must be a positive number, got {}", d.name, d.value));
    }
  }
  KVPORT_ASSIGN_OR_RETURN(size_t element, DtypeBytes(shape.dtype));
  // Checked after each multiplication: the running product stays below 2^31 and each factor is
  // below 2^31, so no product overflows 64 bits.
  uint64_t bytes = 2 * static_cast<uint64_t>(element);
  for (int f : {shape.layers, shape.tokens_per_chunk, shape.kv_heads, shape.head_dim}) {
    bytes *= static_cast<uint64_t>(f);
    if (bytes > INT32_MAX) {
      return Status::InvalidArgument(fmt::format(
          "model shape {} makes chunks over 2 GiB - 1 byte, the most LMCache metadata can "
          "describe; use fewer tokens per chunk or fewer layers",
          shape.ToString()));
    }
  }
  return bytes;
}

}  // namespace kvport::bench
