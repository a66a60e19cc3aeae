// SPDX-License-Identifier: Apache-2.0
#include "store/extent_allocator.h"

#include <string>

namespace kvport::store {

Result<std::unique_ptr<ExtentAllocator>> ExtentAllocator::Create(uint64_t capacity_bytes,
                                                                 uint64_t block_bytes) {
  if (block_bytes == 0 || (block_bytes & (block_bytes - 1)) != 0) {
    return Status::InvalidArgument("allocator block size " + std::to_string(block_bytes) +
                                   " is not a power of two");
  }
  if (capacity_bytes == 0 || capacity_bytes % block_bytes != 0) {
    return Status::InvalidArgument("allocator capacity " + std::to_string(capacity_bytes) +
                                   " is not a positive multiple of the block size " +
                                   std::to_string(block_bytes));
  }
  return std::unique_ptr<ExtentAllocator>(new ExtentAllocator(capacity_bytes, block_bytes));
}

ExtentAllocator::ExtentAllocator(uint64_t capacity_bytes, uint64_t block_bytes)
    : capacity_bytes_(capacity_bytes), block_bytes_(block_bytes) {
  InsertFreeLocked(0, capacity_bytes);
}

void ExtentAllocator::InsertFreeLocked(uint64_t offset, uint64_t length) {
  free_by_offset_.emplace(offset, length);
  free_by_size_.emplace(length, offset);
}

void ExtentAllocator::EraseFreeLocked(std::map<uint64_t, uint64_t>::iterator it) {
  free_by_size_.erase({it->second, it->first});
  free_by_offset_.erase(it);
}

std::optional<Extent> ExtentAllocator::Allocate(uint64_t bytes, uint64_t room, bool room_required) {
  if (bytes == 0) return Extent{0, 0};
  if (bytes > capacity_bytes_) return std::nullopt;  // also keeps RoundUp from overflowing
  const uint64_t need = RoundUp(bytes);
  MutexLock lock(mu_);
  // Best fit: the smallest hole that is large enough (for the room wanted, when there is such a
  // hole); among equals, the lowest offset.
  auto fit = free_by_size_.end();
  const uint64_t room_need = room > bytes && room <= capacity_bytes_ ? RoundUp(room) : 0;
  if (room_need > need) fit = free_by_size_.lower_bound({room_need, 0});
  if (fit == free_by_size_.end() && room_required && room_need > need) return std::nullopt;
  const bool with_room = fit != free_by_size_.end();
  if (!with_room) fit = free_by_size_.lower_bound({need, 0});
  if (fit == free_by_size_.end()) return std::nullopt;
  const uint64_t hole_length = fit->first;
  const uint64_t hole_offset = fit->second;
  free_by_size_.erase(fit);
  free_by_offset_.erase(hole_offset);
  // A whole extent: the front of the hole, the rest stays free where it is. One meant to grow:
  // the last `room` bytes of the hole (so that it grows in place to the hole's end), or where no
  // hole has that room, the hole's last blocks; either way the blocks before it stay free for
  // what precedes the hole (another reservation growing into it).
  const uint64_t offset = with_room          ? hole_offset + hole_length - room_need
                          : room_need > need ? hole_offset + hole_length - need
                                             : hole_offset;
  if (offset > hole_offset) InsertFreeLocked(hole_offset, offset - hole_offset);
  const uint64_t end = hole_offset + hole_length;
  if (end > offset + need) InsertFreeLocked(offset + need, end - offset - need);
  used_bytes_ += need;
  ++live_extents_;
  return Extent{offset, need};
}

bool ExtentAllocator::Extend(Extent* extent, uint64_t bytes) {
  if (bytes > capacity_bytes_ || extent->length == 0) return false;
  const uint64_t want = RoundUp(bytes);
  if (want <= extent->length) return true;
  const uint64_t more = want - extent->length;
  MutexLock lock(mu_);
  auto next = free_by_offset_.find(extent->offset + extent->length);
  if (next == free_by_offset_.end() || next->second < more) return false;
  const uint64_t hole_offset = next->first;
  const uint64_t hole_length = next->second;
  EraseFreeLocked(next);
  if (hole_length > more) InsertFreeLocked(hole_offset + more, hole_length - more);
  used_bytes_ += more;
  extent->length = want;
  return true;
}

Status ExtentAllocator::Free(Extent extent) {
  if (extent.length == 0) return Status::Ok();
  if (extent.length % block_bytes_ != 0 || extent.offset % block_bytes_ != 0 ||
      extent.offset > capacity_bytes_ || extent.length > capacity_bytes_ - extent.offset) {
    return Status::Internal("freeing a malformed extent [" + std::to_string(extent.offset) + ", +" +
                            std::to_string(extent.length) + ")");
  }
  MutexLock lock(mu_);
  uint64_t offset = extent.offset;
  uint64_t length = extent.length;
  // The first free hole at or after the extent, and the one before it.
  auto next = free_by_offset_.lower_bound(offset);
  if (next != free_by_offset_.end() && next->first < offset + length) {
    return Status::Internal("double free: extent at " + std::to_string(offset) +
                            " overlaps free space at " + std::to_string(next->first));
  }
  if (next != free_by_offset_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second > offset) {
      return Status::Internal("double free: extent at " + std::to_string(offset) +
                              " overlaps free space at " + std::to_string(prev->first));
    }
    if (prev->first + prev->second == offset) {  // merge with the hole before
      offset = prev->first;
      length += prev->second;
      EraseFreeLocked(prev);
    }
  }
  if (next != free_by_offset_.end() && next->first == extent.offset + extent.length) {
    length += next->second;  // merge with the hole after
    EraseFreeLocked(next);
  }
  InsertFreeLocked(offset, length);
  used_bytes_ -= extent.length;
  --live_extents_;
  return Status::Ok();
}

uint64_t ExtentAllocator::used_bytes() const {
  MutexLock lock(mu_);
  return used_bytes_;
}

AllocatorStats ExtentAllocator::Stats() const {
  MutexLock lock(mu_);
  AllocatorStats s;
  s.capacity_bytes = capacity_bytes_;
  s.used_bytes = used_bytes_;
  s.free_bytes = capacity_bytes_ - used_bytes_;
  s.free_extents = free_by_offset_.size();
  s.largest_free_bytes = free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
  s.live_extents = live_extents_;
  return s;
}

}  // namespace kvport::store
