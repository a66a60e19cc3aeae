// SPDX-License-Identifier: Apache-2.0
// ReadHandle and WriteHandle: a pin on one committed version, and the space reserved for one
// write, as objects the caller holds (declared in object_store.h).
#include <algorithm>
#include <cstdint>
#include <string_view>
#include <utility>

#include "common/thread_annotations.h"
#include "store/object_store.h"
#include "store/object_store_impl.h"
#include "store/stored_object.h"

namespace kvport::store {

ReadHandle::ReadHandle(const ReadHandle& other) : object_(other.object_) {
  if (object_) {
    object_->refs.fetch_add(1, std::memory_order_relaxed);
    object_->store->impl_->admission.AddPin(object_, /*admitted=*/false);
  }
}

ReadHandle& ReadHandle::operator=(const ReadHandle& other) {
  if (this != &other) {
    ReadHandle copy(other);
    *this = std::move(copy);
  }
  return *this;
}

ReadHandle::ReadHandle(ReadHandle&& other) noexcept
    : object_(std::exchange(other.object_, nullptr)) {}

ReadHandle& ReadHandle::operator=(ReadHandle&& other) noexcept {
  if (this != &other) {
    Reset();
    object_ = std::exchange(other.object_, nullptr);
  }
  return *this;
}

ReadHandle::~ReadHandle() {
  Reset();
}

void ReadHandle::Reset() {
  if (!object_) return;
  StoredObject* o = std::exchange(object_, nullptr);
  o->store->impl_->admission.DropPin(o);
  o->store->impl_->Unref(o);
}

const uint8_t* ReadHandle::data() const {
  return object_->data;
}
uint64_t ReadHandle::size() const {
  return object_->value_len;
}
uint64_t ReadHandle::arena_offset() const {
  return object_->extent.offset;
}
std::string_view ReadHandle::meta() const {
  return object_->Meta();
}
std::string_view ReadHandle::ns() const {
  return object_->ns();
}
std::string_view ReadHandle::key() const {
  return object_->key();
}
uint64_t ReadHandle::ttl_left_ms() const {
  ObjectStore::Impl& impl = *object_->store->impl_;
  const uint64_t now_ms = impl.clock->NowMillis();
  uint64_t expires_at_ms = 0;
  {
    // Under its shard's mutex: SetExpiry may change it while the object is pinned.
    MutexLock lock(impl.ShardOf(*object_).mu);
    expires_at_ms = object_->expires_at_ms;
  }
  return TtlLeftMs(expires_at_ms, now_ms);
}

uint64_t ReadHandle::sequence() const {
  return object_->sequence.load(std::memory_order_relaxed);
}
uint64_t ReadHandle::checksum() const {
  return object_->checksum;
}

WriteHandle::WriteHandle(WriteHandle&& other) noexcept
    : object_(std::exchange(other.object_, nullptr)) {}

WriteHandle& WriteHandle::operator=(WriteHandle&& other) noexcept {
  if (this != &other) {
    if (object_) object_->store->Abort(std::move(*this));
    object_ = std::exchange(other.object_, nullptr);
  }
  return *this;
}

WriteHandle::~WriteHandle() {
  if (object_) object_->store->Abort(std::move(*this));
}

uint8_t* WriteHandle::data() const {
  return object_->data;
}
uint64_t WriteHandle::size() const {
  return object_->value_len;
}
uint64_t WriteHandle::capacity() const {
  return std::min(object_->value_len, object_->extent.length);
}
void WriteHandle::SetTtlSeconds(uint32_t ttl_seconds) {
  object_->ttl_seconds = ttl_seconds;
}
void WriteHandle::SetSequence(uint64_t sequence) {
  object_->sequence.store(sequence, std::memory_order_relaxed);
}
void WriteHandle::SetChecksum(uint64_t checksum) {
  object_->checksum = checksum;
}
void WriteHandle::MarkWritten(uint64_t bytes) {
  // The last block's rounding counts as written with the value's last byte.
  const uint64_t written = bytes >= object_->value_len ? object_->extent.length
                                                       : std::min(bytes, object_->extent.length);
  if (written <= object_->written) return;
  object_->store->impl_->admission.unwritten_bytes.fetch_sub(written - object_->written,
                                                             std::memory_order_relaxed);
  object_->written = written;
}
uint64_t WriteHandle::arena_offset() const {
  return object_->extent.offset;
}
std::string_view WriteHandle::ns() const {
  return object_->ns();
}
std::string_view WriteHandle::key() const {
  return object_->key();
}

}  // namespace kvport::store
