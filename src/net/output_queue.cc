// SPDX-License-Identifier: Apache-2.0
#include "net/output_queue.h"

#include <algorithm>
#include <iterator>

namespace kvport::net {

namespace {
// Segments per writev: large enough to send a whole batch response at once, small enough to live
// on the stack (IOV_MAX is 1024 on Linux).
constexpr int kMaxIovecsPerWrite = 64;
}  // namespace

size_t OutputQueue::MemoryOf(const Segment& seg) {
  // A borrowed segment's (empty) string is inline; an owned one's allocation is its capacity.
  size_t memory = kSegmentOverhead + (seg.borrowed != nullptr ? seg.size : seg.owned.capacity());
  if (seg.keep_alive != nullptr) memory += kKeepAliveOverhead;
  return memory;
}

void OutputQueue::Append(std::string bytes) {
  if (bytes.empty()) return;
  Segment seg;
  seg.size = bytes.size();
  seg.owned = std::move(bytes);
  bytes_ += seg.size;
  memory_ += MemoryOf(seg);
  segments_.push_back(std::move(seg));
}

void OutputQueue::AppendPassingDescriptor(std::string bytes, int pass_fd) {
  if (bytes.empty()) return;  // a descriptor needs a byte to ride on
  Append(std::move(bytes));
  segments_.back().pass_fd = pass_fd;
}

void OutputQueue::AppendBorrowed(const void* data, size_t size,
                                 std::shared_ptr<const void> keep_alive) {
  if (size == 0) return;
  Segment seg;
  seg.borrowed = static_cast<const uint8_t*>(data);
  seg.size = size;
  seg.keep_alive = std::move(keep_alive);
  bytes_ += size;
  memory_ += MemoryOf(seg);
  segments_.push_back(std::move(seg));
}

Result<IoProgress> OutputQueue::WriteTo(int fd) {
  IoProgress total;
  while (!segments_.empty()) {
    iovec iov[kMaxIovecsPerWrite];
    int count = 0;
    for (auto it = segments_.begin(); it != segments_.end() && count < kMaxIovecsPerWrite; ++it) {
      iov[count].iov_base = const_cast<uint8_t*>(it->data() + it->written);
      iov[count].iov_len = it->size - it->written;
      ++count;
    }
    // A segment carrying a descriptor starts its own sendmsg, so the descriptor lands on its
    // first byte (the receiver reads the frame it belongs to with recvmsg).
    Segment& front = segments_.front();
    if (front.pass_fd < 0) {
      for (int i = 1; i < count; ++i) {
        if (std::next(segments_.begin(), i)->pass_fd >= 0) {
          count = i;
          break;
        }
      }
    }
    Result<IoProgress> r = front.pass_fd >= 0 ? WriteVWithDescriptor(fd, iov, count, front.pass_fd)
                                              : WriteV(fd, iov, count);
    if (!r.ok()) return r.status();
    if (r->bytes > 0) front.pass_fd = -1;
    Consume(r->bytes);
    total.bytes += r->bytes;
    if (r->would_block) {
      total.would_block = true;
      break;
    }
  }
  return total;
}

void OutputQueue::Consume(size_t n) {
  bytes_ -= n;
  while (n > 0) {
    Segment& front = segments_.front();
    size_t take = std::min(n, front.size - front.written);
    front.written += take;
    n -= take;
    if (front.written == front.size) {
      memory_ -= MemoryOf(front);
      segments_.pop_front();  // releases its keep_alive now
    }
  }
}

void OutputQueue::Clear() {
  segments_.clear();
  bytes_ = 0;
  memory_ = 0;
}

}  // namespace kvport::net
