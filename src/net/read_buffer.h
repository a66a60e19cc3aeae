// SPDX-License-Identifier: Apache-2.0
// ReadBuffer and ScatterReader: the two ways a connection reads.
//
// ReadBuffer collects a known number of bytes (a frame header, then its descriptor section) in
// memory the connection owns. It never reads past the amount asked for, because the bytes after
// belong to payloads that ScatterReader reads straight into their final destination (the
// store's arena). (A stream with read-ahead, net/stream.h, takes up to its read-ahead size more
// per readv; only those bytes of a value, 16 KiB at most on the node, are copied once more.) Its
// memory grows with the bytes that actually arrived (doubling, from 4 KiB), never with the amount
// asked for: a header that announces a 16 MiB descriptor costs nothing until those bytes come.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvport/status.h"
#include "net/stream.h"

namespace kvport::net {

class ReadBuffer {
 public:
  // The allocation FillTo always allows, whatever max_allocation says: a frame header and a
  // small descriptor.
  static constexpr size_t kMinAllocation = 4096;

  // Reads from `stream` until size() == target, or the socket has nothing more (would_block), or
  // the peer closed (eof), or the buffer is full and growing it would take its allocation past
  // `max_allocation` (then neither flag is set and full() is true; the first 4 KiB are always
  // allowed). Never reads beyond `target`. target < size() is a no-op.
  Result<IoProgress> FillTo(Stream& stream, size_t target, size_t max_allocation = SIZE_MAX);

  const uint8_t* data() const { return bytes_.data(); }
  size_t size() const { return size_; }
  // Bytes of memory the buffer holds now: at most max(4 KiB, 2 x size()), and at most the
  // largest target asked for (or the kept allocation, see Clear).
  size_t allocated_bytes() const { return bytes_.capacity(); }
  // The next byte needs a larger allocation.
  bool full() const { return size_ == bytes_.size(); }
  // Forgets the contents; keeps the allocation up to `keep_capacity` bytes so that one huge
  // descriptor section does not pin memory for the connection's lifetime.
  void Clear(size_t keep_capacity = 64 * 1024);

 private:
  std::vector<uint8_t> bytes_;
  size_t size_ = 0;
};

// A list of destination ranges filled in order by successive reads (readv), resuming where the
// previous read stopped. A range added with AddDiscard() consumes bytes into a scratch buffer
// (payloads the server refused must still be drained from the stream).
class ScatterReader {
 public:
  void Add(void* data, size_t size);
  void AddDiscard(size_t size);
  // Replaces the last range (one added with Add) by [data, data + size), size >= its old size:
  // a destination that grew, in place or elsewhere, with the bytes filled so far already copied
  // there by the caller. Reading goes on into it after those bytes.
  void ReplaceLast(void* data, size_t size);
  void Clear();

  // Reads as much as is available into the remaining ranges.
  Result<IoProgress> ReadFrom(Stream& stream);

  bool done() const { return remaining_ == 0; }
  size_t remaining() const { return remaining_; }
  // Number of ranges (in Add/AddDiscard order) completely filled so far.
  size_t completed_ranges() const { return current_; }

 private:
  struct Range {
    uint8_t* data;  // nullptr: discard
    size_t size;
  };
  std::vector<Range> ranges_;
  size_t current_ = 0;  // first range not yet complete
  size_t offset_ = 0;   // bytes already filled in ranges_[current_]
  size_t remaining_ = 0;
  std::vector<uint8_t> scratch_;
};

}  // namespace kvport::net
