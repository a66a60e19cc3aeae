// SPDX-License-Identifier: Apache-2.0
// The engines' sequences `kvport load` replays, and the keys and values they use.
//
// The key space is `prompts` prompts of `prompt_pages` pages each (LoadOptions). Before the
// load, each prompt's leading CachedPages(prompt) pages are written (a quarter, half,
// three quarters or all of it, varying by prompt), so a probe finds a run of hits and then
// misses, as an engine's prefix lookup does. A request picks its prompt from a Zipf
// distribution and is one of:
//   - kLmcache: LMCache's retrieve. A prefix probe of every page of the prompt (one exists
//     call), then the metadata of the leading hits (one meta-only get), then their data in
//     gets of at most get_batch pages.
//   - kHicache: SGLang HiCache's prefetch. batch_exists of the prompt's first probe_pages pages,
//     then batch_get of the leading hits (in gets of at most get_batch pages).
//   - kWrite: an engine storing freshly computed chunks: one put of write_batch new pages (the
//     new-page slots are reused in turn, so the data set stays bounded).
// Prompt pages are never rewritten after the prefill, so the answer to every probe is known:
// a hit for a page that was never written is wrong (whatever eviction did), a miss for one that
// was is a miss (counted; zero unless the node evicted).
//
// Every value is page_bytes long and starts and ends with a 16-byte stamp (a hash of its key,
// then its length), so a read is checked cheaply: a value of another key, shifted or cut short
// fails. Each page's metadata (stored with it in kvport, under KEY#m in redis as LMCache's
// redis connector does) names its key and length.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <string_view>

#include "bench/load_options.h"

namespace kvport::bench {

enum class LoadSequence { kLmcache, kHicache, kWrite };

std::string_view LoadSequenceName(LoadSequence s);

class LoadMix {
 public:
  explicit LoadMix(const LoadOptions& options);

  // A sequence drawn by the options' weights.
  LoadSequence Pick(std::mt19937_64& random) const;

  static std::string PageKey(uint64_t prompt, int page);  // "p<prompt>.<page>"
  static std::string NewKey(uint64_t slot);               // "n<slot>"
  // Pages of `prompt` written by the prefill: 1/4, 2/4, 3/4 or all of prompt_pages (at least
  // 1), by a hash of the prompt.
  int CachedPages(uint64_t prompt) const;

  // Writes the stamps of `key` at both ends of `value` (value.size() >= 32); the bytes between
  // are left as they are (the caller fills them once).
  static void Stamp(std::string_view key, std::span<uint8_t> value);
  // True when `value` is exactly what Stamp wrote for `key` into a page of `page_bytes`.
  static bool Verify(std::string_view key, std::span<const uint8_t> value, uint64_t page_bytes);
  // The metadata stored with `key`'s page.
  static std::string Meta(std::string_view key, uint64_t page_bytes);

  const LoadOptions& options() const { return options_; }

 private:
  LoadOptions options_;
};

}  // namespace kvport::bench
