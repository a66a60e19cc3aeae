// SPDX-License-Identifier: Apache-2.0
// ExtentAllocator: hands out contiguous, block-aligned byte ranges (extents) of an arena.
//
// Values are large (LLM KV chunks of 100 KiB to 16 MiB) and of a few recurring sizes, metadata
// is tiny and lives on the heap, so the allocator only ever sees big requests. It is a
// best-fit free list over 4 KiB blocks:
//   - free extents are kept twice: by offset (to find neighbours) and by (length, offset)
//     (to find the smallest extent that fits, lowest offset first);
//   - Allocate takes the best-fitting free extent and splits off the tail it does not need;
//   - Free merges the extent with its free neighbours on both sides, so adjacent holes always
//     form one extent and the free list never holds two touching extents.
// Waste is internal rounding only (< 4 KiB per value, < 4% at 100 KiB); external fragmentation
// is visible in Stats() (free_extents, largest_free_bytes) and resolved by the store's
// eviction, which frees objects until a large enough hole forms (see docs/store.md for why
// best-fit with coalescing rather than a buddy allocator).
//
// Offsets are relative to the start of the managed range; the allocator never touches the
// arena's memory. Thread-safe: one internal mutex, held only for the O(log n) list update.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "common/thread_annotations.h"
#include "kvport/status.h"

namespace kvport::store {

// A range [offset, offset + length) of the arena. length is a multiple of the block size,
// except the empty extent {0, 0} that zero-byte values get.
struct Extent {
  uint64_t offset = 0;
  uint64_t length = 0;
};

struct AllocatorStats {
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;          // sum of live extents' lengths (rounded to blocks)
  uint64_t free_bytes = 0;          // capacity_bytes - used_bytes
  uint64_t free_extents = 0;        // number of maximal free holes
  uint64_t largest_free_bytes = 0;  // the biggest request that would succeed now
  uint64_t live_extents = 0;
};

class ExtentAllocator {
 public:
  // Manages [0, capacity_bytes). InvalidArgument unless block_bytes is a power of two and
  // capacity_bytes a positive multiple of it (an Arena's size always is).
  static Result<std::unique_ptr<ExtentAllocator>> Create(uint64_t capacity_bytes,
                                                         uint64_t block_bytes);

  ExtentAllocator(const ExtentAllocator&) = delete;
  ExtentAllocator& operator=(const ExtentAllocator&) = delete;

  // Returns an extent of at least `bytes` (rounded up to the block size), or nullopt when no
  // free extent is large enough right now. Zero bytes gives the empty extent {0, 0}, always.
  // `room` > bytes asks for the last `room` bytes of a free extent of at least `room` bytes when
  // there is one (best fit for `room`), so that Extend can later grow the extent in place up to
  // `room` while the blocks before it stay free for what precedes the hole (a reservation
  // growing into it); otherwise the last blocks of the best fit for `bytes` (so as not to block
  // such a reservation either), unless `room_required` (then nullopt). Without `room`: the
  // front of the best fit for `bytes`.
  std::optional<Extent> Allocate(uint64_t bytes, uint64_t room = 0, bool room_required = false)
      EXCLUDES(mu_);

  // Grows `*extent` (obtained from Allocate) in place to at least `bytes` (rounded up), taking
  // the free blocks right after it: true when they were free and large enough, false (nothing
  // changed) otherwise. Never moves the extent.
  bool Extend(Extent* extent, uint64_t bytes) EXCLUDES(mu_);

  // Returns an extent obtained from Allocate. Freeing the empty extent is a no-op. Freeing
  // something that overlaps free space or lies outside the range is a caller bug: it is
  // refused with Internal and changes nothing.
  Status Free(Extent extent) EXCLUDES(mu_);

  // The size Allocate(bytes) would actually take.
  uint64_t RoundUp(uint64_t bytes) const {
    return (bytes + block_bytes_ - 1) & ~(block_bytes_ - 1);
  }

  uint64_t capacity_bytes() const { return capacity_bytes_; }
  uint64_t block_bytes() const { return block_bytes_; }
  uint64_t used_bytes() const EXCLUDES(mu_);
  AllocatorStats Stats() const EXCLUDES(mu_);

 private:
  ExtentAllocator(uint64_t capacity_bytes, uint64_t block_bytes);
  void InsertFreeLocked(uint64_t offset, uint64_t length) REQUIRES(mu_);
  void EraseFreeLocked(std::map<uint64_t, uint64_t>::iterator it) REQUIRES(mu_);

  const uint64_t capacity_bytes_;
  const uint64_t block_bytes_;
  // The innermost lock of the store (object_store_impl.h gives the order): held for the list update
  // only, never while calling out.
  mutable Mutex mu_;
  std::map<uint64_t, uint64_t> free_by_offset_ GUARDED_BY(mu_);           // offset -> length
  std::set<std::pair<uint64_t, uint64_t>> free_by_size_ GUARDED_BY(mu_);  // (length, offset)
  uint64_t used_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t live_extents_ GUARDED_BY(mu_) = 0;
};

}  // namespace kvport::store
