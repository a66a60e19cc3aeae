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

size_t OutputQueue::HeapOf(const Segment& seg) {
  // A borrowed segment's (empty) string is inline; an owned one's allocation is its capacity.
  size_t heap = kSegmentOverhead + (seg.borrowed != nullptr ? 0 : seg.owned.capacity());
  if (seg.keep_alive != nullptr) heap += kKeepAliveOverhead;
  return heap;
}

void OutputQueue::Count(const Segment& seg, int sign) {
  const size_t heap = HeapOf(seg);
  const size_t borrowed = seg.borrowed != nullptr ? seg.size : 0;
  if (sign > 0) {
    heap_ += heap;
    borrowed_ += borrowed;
  } else {
    heap_ -= heap;
    borrowed_ -= borrowed;
  }
}

void OutputQueue::Append(std::string bytes) {
  if (bytes.empty()) return;
  Segment seg;
  seg.size = bytes.size();
  seg.owned = std::move(bytes);
  bytes_ += seg.size;
  Count(seg, +1);
  Push(std::move(seg));
}

void OutputQueue::AppendPassingDescriptors(std::string bytes, std::vector<int> pass_fds) {
  if (bytes.empty()) return;  // a descriptor needs a byte to ride on
  Append(std::move(bytes));
  segments_.back().pass_fds = std::move(pass_fds);
}

void OutputQueue::AppendBorrowed(const void* data, size_t size,
                                 std::shared_ptr<const void> keep_alive) {
  if (size == 0) return;
  Segment seg;
  seg.borrowed = static_cast<const uint8_t*>(data);
  seg.size = size;
  seg.keep_alive = std::move(keep_alive);
  bytes_ += size;
  Count(seg, +1);
  Push(std::move(seg));
}

void OutputQueue::Push(Segment seg) {
  if (front_ > 0 && front_ * 2 >= segments_.size()) {
    // Half or more of the vector is written segments (empty slots): close the gap before it
    // grows, so a queue that never quite empties stays as long as what it holds.
    segments_.erase(segments_.begin(), segments_.begin() + static_cast<ptrdiff_t>(front_));
    front_ = 0;
  }
  segments_.push_back(std::move(seg));
}

Result<IoProgress> OutputQueue::WriteTo(Stream& stream, size_t budget) {
  IoProgress total;
  while (front_ < segments_.size() && total.bytes < budget) {
    iovec iov[kMaxIovecsPerWrite];
    int count = 0;
    for (size_t i = front_; i < segments_.size() && count < kMaxIovecsPerWrite; ++i) {
      const Segment& seg = segments_[i];
      iov[count].iov_base = const_cast<uint8_t*>(seg.data() + seg.written);
      iov[count].iov_len = seg.size - seg.written;
      ++count;
    }
    // A segment carrying a descriptor starts its own sendmsg, so the descriptor lands on its
    // first byte (the receiver reads the frame it belongs to with recvmsg).
    Segment& front = segments_[front_];
    if (front.pass_fds.empty()) {
      for (int i = 1; i < count; ++i) {
        if (!segments_[front_ + static_cast<size_t>(i)].pass_fds.empty()) {
          count = i;
          break;
        }
      }
    }
    Result<IoProgress> r = !front.pass_fds.empty()
                               ? WriteVWithDescriptors(stream.fd(), iov, count, front.pass_fds)
                               : stream.WriteV(iov, count);
    if (!r.ok()) return r.status();
    if (r->bytes > 0) front.pass_fds.clear();
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
    Segment& front = segments_[front_];
    size_t take = std::min(n, front.size - front.written);
    front.written += take;
    n -= take;
    if (front.written == front.size) {
      Count(front, -1);
      if (front.borrowed == nullptr && front.owned.capacity() <= kMaxSpareBytes &&
          front.owned.capacity() > spare_.capacity()) {
        spare_ = std::move(front.owned);
        spare_.clear();
      }
      front = Segment();                   // releases its keep_alive and owned bytes now
      if (++front_ == segments_.size()) {  // all written: reuse the vector from its start
        segments_.clear();
        front_ = 0;
      }
    }
  }
}

std::string OutputQueue::TakeSpare() {
  std::string spare;
  spare.swap(spare_);
  return spare;
}

void OutputQueue::Clear() {
  segments_.clear();
  front_ = 0;
  bytes_ = 0;
  heap_ = 0;
  borrowed_ = 0;
}

}  // namespace kvport::net
