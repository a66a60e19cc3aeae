// SPDX-License-Identifier: Apache-2.0
#include "net/read_buffer.h"

#include <algorithm>

namespace kvport::net {

namespace {
constexpr int kMaxIovecsPerRead = 64;
constexpr size_t kScratchBytes = 64 * 1024;
constexpr size_t kFirstGrowth = ReadBuffer::kMinAllocation;
}  // namespace

Result<IoProgress> ReadBuffer::FillTo(Stream& stream, size_t target, size_t max_allocation) {
  IoProgress total;
  while (size_ < target) {
    if (size_ == bytes_.size()) {
      // Full: grow by what has arrived (doubling), never straight to the target a peer claims,
      // and not past what the caller allows now.
      const size_t grown = std::min(
          {target, std::max(kFirstGrowth, 2 * size_), std::max(kFirstGrowth, max_allocation)});
      if (grown <= bytes_.size()) break;
      bytes_.reserve(grown);  // exactly: resize alone may round the capacity up
      bytes_.resize(grown);
    }
    iovec iov{bytes_.data() + size_, std::min(target, bytes_.size()) - size_};
    Result<IoProgress> r = stream.ReadV(&iov, 1);
    if (!r.ok()) return r.status();
    size_ += r->bytes;
    total.bytes += r->bytes;
    if (r->eof || r->would_block) {
      total.eof = r->eof;
      total.would_block = r->would_block;
      break;
    }
  }
  return total;
}

void ReadBuffer::Clear(size_t keep_capacity) {
  size_ = 0;
  if (bytes_.capacity() > keep_capacity) {
    std::vector<uint8_t>().swap(bytes_);
  }
}

void ScatterReader::Add(void* data, size_t size) {
  if (size == 0) return;
  ranges_.push_back(Range{static_cast<uint8_t*>(data), size});
  remaining_ += size;
}

void ScatterReader::AddDiscard(size_t size) {
  if (size == 0) return;
  ranges_.push_back(Range{nullptr, size});
  remaining_ += size;
}

void ScatterReader::ReplaceLast(void* data, size_t size) {
  Range& last = ranges_.back();
  if (current_ == ranges_.size()) {  // it was full: reading resumes in it
    current_ = ranges_.size() - 1;
    offset_ = last.size;
  }
  remaining_ += size - last.size;
  last = Range{static_cast<uint8_t*>(data), size};
}

void ScatterReader::Clear() {
  ranges_.clear();
  current_ = 0;
  offset_ = 0;
  remaining_ = 0;
}

Result<IoProgress> ScatterReader::ReadFrom(Stream& stream) {
  IoProgress total;
  while (remaining_ > 0) {
    iovec iov[kMaxIovecsPerRead];
    int count = 0;
    size_t offset = offset_;
    for (size_t i = current_; i < ranges_.size() && count < kMaxIovecsPerRead; ++i) {
      const Range& range = ranges_[i];
      size_t left = range.size - offset;
      if (range.data != nullptr) {
        iov[count] = iovec{range.data + offset, left};
      } else {
        if (scratch_.empty()) scratch_.resize(kScratchBytes);
        iov[count] = iovec{scratch_.data(), std::min(left, scratch_.size())};
      }
      ++count;
      offset = 0;
      // A discard range longer than the scratch buffer takes several reads; stop the vector
      // there so the next range's bytes are not read into the wrong place.
      if (range.data == nullptr && left > scratch_.size()) break;
    }
    Result<IoProgress> r = stream.ReadV(iov, count);
    if (!r.ok()) return r.status();
    size_t n = r->bytes;
    total.bytes += n;
    remaining_ -= n;
    while (n > 0) {
      size_t left = ranges_[current_].size - offset_;
      size_t take = std::min(n, left);
      offset_ += take;
      n -= take;
      if (offset_ == ranges_[current_].size) {
        ++current_;
        offset_ = 0;
      }
    }
    if (r->eof || r->would_block) {
      total.eof = r->eof;
      total.would_block = r->would_block;
      break;
    }
  }
  return total;
}

}  // namespace kvport::net
