// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the frame decoder.
//
// Every input is decoded as one complete frame with two sets of limits (the defaults, and tiny
// limits so that limit checks are reached by short inputs). A decode may fail, but only with a
// clean Status (sanitizers catch any crash, overflow or UB); a decode that succeeds must
// re-encode to exactly the input bytes, because every field has a single encoding.
//
// Build (clang only): cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang
//   -DCMAKE_CXX_COMPILER=clang++ -DKVPORT_FUZZ=ON && ninja -C build-fuzz fuzz_frame
//   protocol_fuzz_seeds; seeds: build-fuzz/bin/protocol_fuzz_seeds DIR.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "frame_samples.h"
#include "protocol/limits.h"

namespace {

kvport::protocol::Limits TinyLimits() {
  kvport::protocol::Limits l;
  l.max_key_bytes = 8;
  l.max_namespace_bytes = 4;
  l.max_meta_bytes = 8;
  l.max_value_bytes = 64;
  l.max_batch_keys = 4;
  l.max_frame_bytes = 128;
  return l;
}

void Check(std::string_view input, const kvport::protocol::Limits& limits, const char* which) {
  std::string reencoded;
  kvport::Status s = kvport::protocol::testing::DecodeAndReencode(input, limits, &reencoded);
  if (s.code() == kvport::StatusCode::kInternal) {
    std::fprintf(stderr, "[%s limits] %s\n", which, s.ToString().c_str());
    std::abort();
  }
  if (s.ok() && reencoded != input) {
    std::fprintf(stderr, "[%s limits] decoded frame of %zu bytes re-encodes to %zu other bytes\n",
                 which, input.size(), reencoded.size());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  static const kvport::protocol::Limits kDefault;
  static const kvport::protocol::Limits kTiny = TinyLimits();
  Check(input, kDefault, "default");
  Check(input, kTiny, "tiny");
  return 0;
}
