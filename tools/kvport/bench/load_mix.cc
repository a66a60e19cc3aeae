// SPDX-License-Identifier: Apache-2.0
#include "bench/load_mix.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstring>

namespace kvport::bench {
namespace {

// FNV-1a: enough to tell one key's stamp from another's.
uint64_t KeyHash(std::string_view key) {
  uint64_t h = 14695981039346656037ull;
  for (char c : key) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ull;
  }
  return h;
}

void PutStamp(uint8_t* out, uint64_t hash, uint64_t length) {
  std::memcpy(out, &hash, 8);
  std::memcpy(out + 8, &length, 8);
}

}  // namespace

std::string_view LoadSequenceName(LoadSequence s) {
  switch (s) {
    case LoadSequence::kLmcache:
      return "lmcache";
    case LoadSequence::kHicache:
      return "hicache";
    case LoadSequence::kWrite:
      return "write";
  }
  return "?";
}

LoadMix::LoadMix(const LoadOptions& options) : options_(options) {}

LoadSequence LoadMix::Pick(std::mt19937_64& random) const {
  const double total = options_.lmcache_weight + options_.hicache_weight + options_.write_weight;
  const double u = std::uniform_real_distribution<double>(0.0, total)(random);
  if (u < options_.lmcache_weight) return LoadSequence::kLmcache;
  if (u < options_.lmcache_weight + options_.hicache_weight) return LoadSequence::kHicache;
  return LoadSequence::kWrite;
}

std::string LoadMix::PageKey(uint64_t prompt, int page) {
  return fmt::format("p{}.{}", prompt, page);
}

std::string LoadMix::NewKey(uint64_t slot) {
  return fmt::format("n{}", slot);
}

int LoadMix::CachedPages(uint64_t prompt) const {
  const int quarters = static_cast<int>((prompt * 0x9E3779B97F4A7C15ull) >> 62) + 1;  // 1..4
  return std::max(1, options_.prompt_pages * quarters / 4);
}

void LoadMix::Stamp(std::string_view key, std::span<uint8_t> value) {
  const uint64_t hash = KeyHash(key);
  PutStamp(value.data(), hash, value.size());
  PutStamp(value.data() + value.size() - 16, hash, value.size());
}

bool LoadMix::Verify(std::string_view key, std::span<const uint8_t> value, uint64_t page_bytes) {
  if (value.size() != page_bytes || value.size() < 32) return false;
  uint8_t want[16];
  PutStamp(want, KeyHash(key), page_bytes);
  return std::memcmp(value.data(), want, 16) == 0 &&
         std::memcmp(value.data() + value.size() - 16, want, 16) == 0;
}

std::string LoadMix::Meta(std::string_view key, uint64_t page_bytes) {
  return fmt::format("{}:{}", key, page_bytes);
}

}  // namespace kvport::bench
