// SPDX-License-Identifier: Apache-2.0
#include "server/disk_offload.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "kvport/log.h"
#include "kvport/size.h"

namespace kvport::server {

namespace {

uint64_t UnixMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// The TTL an object with this unix expiry has left (0: none; 1 at least while not expired).
uint64_t TtlLeft(uint64_t expiry_ms, uint64_t now_ms) {
  if (expiry_ms == 0) return 0;
  return expiry_ms > now_ms ? expiry_ms - now_ms : 1;
}

}  // namespace

DiskOffload::DiskOffload(const DiskOffloadOptions& options, std::unique_ptr<store::DiskTier> tier)
    : options_(options), tier_(std::move(tier)), writing_(queue_.end()) {}

Result<std::unique_ptr<DiskOffload>> DiskOffload::Open(const DiskOffloadOptions& options) {
  if (options.dir.empty()) return Status::InvalidArgument("disk_dir is empty");
  if (options.capacity_bytes < (uint64_t{64} << 10)) {
    return Status::InvalidArgument(fmt::format("disk_capacity {} is below the least, 64 KiB",
                                               FormatSize(options.capacity_bytes)));
  }
  store::DiskTierOptions tier_options;
  tier_options.capacity_bytes = options.capacity_bytes;
  // At least four segments, so that evicting the oldest gives back a quarter at most.
  tier_options.segment_bytes = std::min(
      options.segment_bytes,
      std::max<uint64_t>(options.capacity_bytes / 4 / store::kDiskBlock, 1) * store::kDiskBlock);
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<store::SegmentFolder> folder,
                          store::OpenSegmentFolder(options.dir));
  const auto started = std::chrono::steady_clock::now();
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<store::DiskTier> tier,
                          store::DiskTier::Open(std::move(folder), tier_options, UnixMs()));
  std::unique_ptr<DiskOffload> offload(new DiskOffload(options, std::move(tier)));
  offload->stats_.restore_ms =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now() - started)
                                .count());
  offload->writer_ = std::thread([raw = offload.get()] { raw->WriterLoop(); });
  return offload;
}

DiskOffload::~DiskOffload() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (writer_.joinable()) writer_.join();
}

void DiskOffload::Offer(const store::EvictedObject& object) {
  Pending item;
  item.ns = object.ns;
  item.key = object.key;
  item.meta = object.meta;
  item.expiry_ms = object.ttl_left_ms == 0 ? 0 : UnixMs() + object.ttl_left_ms;
  {
    std::lock_guard lock(mu_);
    if (pending_bytes_ + object.value.size() > options_.max_pending_bytes) {
      ++stats_.queue_drops;
      return;
    }
    pending_bytes_ += object.value.size();
  }
  // The copy outside the lock: the object's bytes stay valid until Offer returns.
  item.value.assign(object.value.begin(), object.value.end());
  std::string id = store::DiskObjectId(item.ns, item.key);
  {
    std::lock_guard lock(mu_);
    // An older version still waiting is superseded (one being written is followed by this one,
    // whose higher sequence number wins on disk).
    if (auto older = queued_.find(id); older != queued_.end() && older->second != writing_) {
      pending_bytes_ -= older->second->value.size();
      queue_.erase(older->second);
    }
    queue_.push_back(std::move(item));
    queued_[std::move(id)] = std::prev(queue_.end());
  }
  wake_.notify_one();
}

void DiskOffload::WriterLoop() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything is written
    writing_ = queue_.begin();
    const Pending& item = *writing_;
    lock.unlock();
    Status written = tier_->Put(item.ns, item.key, item.meta, item.value, item.expiry_ms);
    lock.lock();
    if (written.ok()) {
      ++stats_.written;
    } else {
      log::Warn("disk tier: an evicted object ({} bytes) was not written: {}", item.value.size(),
                written.ToString());
    }
    if (auto it = queued_.find(store::DiskObjectId(item.ns, item.key));
        it != queued_.end() && it->second == writing_) {
      queued_.erase(it);
    }
    pending_bytes_ -= item.value.size();
    queue_.erase(writing_);
    writing_ = queue_.end();
    wake_.notify_all();  // an Erase may wait for this item
  }
}

Result<DiskOffload::Found> DiskOffload::Get(std::string_view ns, std::string_view key) {
  const uint64_t now = UnixMs();
  {
    std::lock_guard lock(mu_);
    if (auto it = queued_.find(store::DiskObjectId(ns, key)); it != queued_.end()) {
      const Pending& item = *it->second;
      if (item.expiry_ms != 0 && item.expiry_ms <= now) return Status::NotFound("expired");
      ++stats_.hits;
      return Found{item.meta, item.value, TtlLeft(item.expiry_ms, now)};
    }
  }
  KVPORT_ASSIGN_OR_RETURN(store::DiskObject object, tier_->Get(ns, key, now));
  std::lock_guard lock(mu_);
  ++stats_.hits;
  return Found{std::move(object.meta), std::move(object.value), TtlLeft(object.expiry_ms, now)};
}

bool DiskOffload::Contains(std::string_view ns, std::string_view key, uint64_t* value_bytes) {
  const uint64_t now = UnixMs();
  {
    std::lock_guard lock(mu_);
    if (auto it = queued_.find(store::DiskObjectId(ns, key)); it != queued_.end()) {
      const Pending& item = *it->second;
      if (item.expiry_ms != 0 && item.expiry_ms <= now) return false;
      if (value_bytes != nullptr) *value_bytes = item.value.size();
      return true;
    }
  }
  return tier_->Contains(ns, key, now, value_bytes);
}

Status DiskOffload::Erase(std::string_view ns, std::string_view key) {
  const std::string id = store::DiskObjectId(ns, key);
  {
    std::unique_lock lock(mu_);
    if (auto it = queued_.find(id); it != queued_.end() && it->second != writing_) {
      pending_bytes_ -= it->second->value.size();
      queue_.erase(it->second);
      queued_.erase(it);
    }
    // A version being written is waited for (one record's write), or it would land on disk
    // after the tombstone below.
    wake_.wait(lock, [&] {
      return writing_ == queue_.end() || store::DiskObjectId(writing_->ns, writing_->key) != id;
    });
  }
  return tier_->Erase(ns, key);
}

DiskOffloadStats DiskOffload::stats() const {
  std::lock_guard lock(mu_);
  DiskOffloadStats s = stats_;
  s.tier = tier_->stats();
  s.pending_bytes = pending_bytes_;
  return s;
}

std::string DiskOffload::Describe() const {
  const DiskOffloadStats s = stats();
  return fmt::format("disk tier {}: {}, {} objects restored in {} ms{}", options_.dir,
                     FormatSize(options_.capacity_bytes), s.tier.restored, s.restore_ms,
                     s.tier.dropped_records + s.tier.torn_tails > 0
                         ? fmt::format(" ({} records dropped, {} torn tails cut off)",
                                       s.tier.dropped_records, s.tier.torn_tails)
                         : std::string());
}

}  // namespace kvport::server
