// SPDX-License-Identifier: Apache-2.0
// OutputQueue: the bytes a connection still has to send, written with scatter-gather I/O.
//
// A response is a few owned bytes (a frame header and its descriptor section) followed by
// borrowed ranges that live elsewhere (values pinned in the store's arena). Borrowed ranges are
// sent straight from where they are: the queue keeps a `keep_alive` reference for each one and
// drops it as soon as that range's last byte has been handed to the kernel, so a pin is held
// exactly as long as its bytes are needed. Partial writes resume where they stopped.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvport/status.h"
#include "net/stream.h"

namespace kvport::net {

class OutputQueue {
 public:
  OutputQueue() = default;
  OutputQueue(const OutputQueue&) = delete;
  OutputQueue& operator=(const OutputQueue&) = delete;

  // Queues owned bytes. Empty strings are ignored.
  void Append(std::string bytes);
  // Queues owned bytes whose first byte carries copies of the descriptors `pass_fds` (SCM_RIGHTS:
  // plain Unix streams only; at most kMaxPassedDescriptors). They are borrowed: each must stay
  // open until the bytes are written.
  void AppendPassingDescriptors(std::string bytes, std::vector<int> pass_fds);
  // Queues [data, data + size) without copying. The range must stay valid while `keep_alive`
  // is referenced; the queue releases its reference right after the range is fully written, or
  // on Clear()/destruction. Several ranges may share one keep_alive.
  void AppendBorrowed(const void* data, size_t size, std::shared_ptr<const void> keep_alive);

  // Bytes queued and not yet written.
  size_t bytes() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }
  // What the queue costs, which backpressure limits, for every segment not yet fully written:
  //   heap_bytes: its bookkeeping (kSegmentOverhead), its owned bytes' allocation (capacity,
  //     not size) and, for a borrowed range, kKeepAliveOverhead for the reference that pins it.
  //     An estimate of heap, exact in the bytes that dominate it.
  //   borrowed_bytes: the borrowed ranges (pinned: their bytes cannot be freed or reused while
  //     queued), each range counted, so a range queued twice counts twice.
  // memory_bytes is both together.
  size_t heap_bytes() const { return heap_; }
  size_t borrowed_bytes() const { return borrowed_; }
  size_t memory_bytes() const { return heap_ + borrowed_; }
  static constexpr size_t kSegmentOverhead = 96;
  static constexpr size_t kKeepAliveOverhead = 64;

  // Writes as much as `stream` accepts right now, several segments per system call, stopping once
  // `budget` bytes or more are written (so one connection's large answer cannot hold its I/O
  // loop while others wait). Returns the progress (would_block when the socket buffer filled
  // before the queue emptied; neither would_block nor empty when the budget ran out), or an
  // IoError if the peer is gone.
  Result<IoProgress> WriteTo(Stream& stream, size_t budget = SIZE_MAX);

  // Drops everything queued, releasing every keep_alive (e.g. when the connection closes).
  void Clear();

  // An owned string the queue has written (its capacity kept, at most kMaxSpareBytes), for the
  // owner to fill again instead of allocating; empty when there is none.
  std::string TakeSpare();
  static constexpr size_t kMaxSpareBytes = 16 * 1024;

 private:
  struct Segment {
    std::string owned;  // used when borrowed == nullptr
    const uint8_t* borrowed = nullptr;
    size_t size = 0;
    size_t written = 0;
    std::vector<int> pass_fds;  // sent with the segment's first byte, then cleared
    std::shared_ptr<const void> keep_alive;

    const uint8_t* data() const {
      return borrowed ? borrowed : reinterpret_cast<const uint8_t*>(owned.data());
    }
  };
  void Push(Segment seg);
  void Consume(size_t n);
  static size_t HeapOf(const Segment& seg);
  void Count(const Segment& seg, int sign);

  // Segments [front_, size()) are queued; those before front_ are written (emptied). A vector
  // rather than a deque: once it has grown to a connection's usual depth, queueing a response
  // allocates nothing.
  std::vector<Segment> segments_;
  size_t front_ = 0;
  std::string spare_;  // see TakeSpare
  size_t bytes_ = 0;
  size_t heap_ = 0;
  size_t borrowed_ = 0;
};

}  // namespace kvport::net
