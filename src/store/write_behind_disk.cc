// SPDX-License-Identifier: Apache-2.0
#include "store/write_behind_disk.h"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "kvport/log.h"
#include "kvport/size.h"

namespace kvport::store {

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

std::mutex test_opener_mu;
WriteBehindDiskOptions::FolderOpener test_opener;  // SetFolderOpenerForTesting's

}  // namespace

void SetFolderOpenerForTesting(WriteBehindDiskOptions::FolderOpener opener) {
  std::lock_guard lock(test_opener_mu);
  test_opener = std::move(opener);
}

WriteBehindDisk::WriteBehindDisk(const WriteBehindDiskOptions& options,
                                 std::unique_ptr<DiskTier> tier)
    : options_(options), tier_(std::move(tier)) {}

Result<std::unique_ptr<WriteBehindDisk>> WriteBehindDisk::Open(
    const WriteBehindDiskOptions& options) {
  if (options.dir.empty()) return Status::InvalidArgument("disk_dir is empty");
  if (options.capacity_bytes < (uint64_t{64} << 10)) {
    return Status::InvalidArgument(fmt::format("disk_capacity {} is below the least, 64 KiB",
                                               FormatSize(options.capacity_bytes)));
  }
  DiskTierOptions tier_options;
  tier_options.capacity_bytes = options.capacity_bytes;
  // At least four segments, so that evicting the oldest gives back a quarter at most.
  tier_options.segment_bytes =
      std::min(options.segment_bytes,
               std::max<uint64_t>(options.capacity_bytes / 4 / kDiskBlock, 1) * kDiskBlock);
  WriteBehindDiskOptions::FolderOpener opener = options.open_folder_for_testing;
  if (!opener) {
    std::lock_guard lock(test_opener_mu);
    opener = test_opener;
  }
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<SegmentFolder> folder,
                          opener ? opener(options.dir) : OpenSegmentFolder(options.dir));
  const std::string io_mode = folder->io_mode();
  if (!options.restore) {
    KVPORT_ASSIGN_OR_RETURN(std::vector<uint64_t> numbers, folder->List());
    for (uint64_t number : numbers)
      KVPORT_RETURN_IF_ERROR(folder->Remove(number));
    // Durable before the tier starts over: a power loss must not bring back segments of the
    // old size under a superblock of the new one.
    if (!numbers.empty()) KVPORT_RETURN_IF_ERROR(folder->SyncDir());
    if (!numbers.empty()) {
      log::Info("disk tier {}: disk_restore is off: removed {} segments", options.dir,
                numbers.size());
    }
  }
  KVPORT_ASSIGN_OR_RETURN(const uint64_t free_bytes, folder->FreeBytes());
  const auto started = std::chrono::steady_clock::now();
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<DiskTier> tier,
                          DiskTier::Open(std::move(folder), tier_options, UnixMs()));
  // The capacity must fit the filesystem as it is now: what the tier already holds plus what
  // is free (a tier that cannot grow to its capacity fails its writes instead of evicting).
  const uint64_t held = tier->stats().disk_bytes;
  if (options.capacity_bytes > free_bytes + held) {
    return Status::NoSpace(
        fmt::format("disk_capacity {} does not fit in {}: its filesystem has {} free{}; lower "
                    "disk_capacity or free space",
                    FormatSize(options.capacity_bytes), options.dir, FormatSize(free_bytes),
                    held == 0 ? std::string()
                              : fmt::format(" beside the {} the tier holds", FormatSize(held))));
  }
  std::unique_ptr<WriteBehindDisk> offload(new WriteBehindDisk(options, std::move(tier)));
  offload->io_mode_ = io_mode;
  offload->index_bytes_.store(offload->tier_->stats().index_bytes, std::memory_order_relaxed);
  offload->stats_.restore_ms =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now() - started)
                                .count());
  offload->writer_ = std::thread([raw = offload.get()] { raw->WriterLoop(); });
  for (int i = 0; i < kReaders; ++i)
    offload->readers_.emplace_back([raw = offload.get()] { raw->ReaderLoop(); });
  return offload;
}

WriteBehindDisk::~WriteBehindDisk() {
  {
    std::lock_guard lock(read_mu_);
    readers_stopping_ = true;
  }
  read_wake_.notify_all();
  for (std::thread& reader : readers_)
    reader.join();
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (writer_.joinable()) writer_.join();
}

void WriteBehindDisk::ReadMany(std::span<ValueRead> reads) {
  if (reads.size() <= 1) {
    for (ValueRead& read : reads)
      read.status = ReadValue(read.ns, read.key, read.sequence, read.out);
    return;
  }
  {
    std::lock_guard lock(mu_);
    stats_.batch_reads += reads.size();
  }
  ReadJob job;
  job.reads = reads;
  {
    std::lock_guard lock(read_mu_);
    read_jobs_.push_back(&job);
  }
  read_wake_.notify_all();
  ReadSome(job);
  std::unique_lock lock(read_mu_);
  // Every value read, and no reader still holding the job (it lives on this stack).
  read_done_.wait(lock, [&] { return job.done == reads.size() && job.readers == 0; });
  std::erase(read_jobs_, &job);
}

void WriteBehindDisk::ReadSome(ReadJob& job) {
  for (size_t i; (i = job.next.fetch_add(1, std::memory_order_relaxed)) < job.reads.size();) {
    ValueRead& read = job.reads[i];
    read.status = ReadValue(read.ns, read.key, read.sequence, read.out);
    std::lock_guard lock(read_mu_);
    if (++job.done == job.reads.size()) read_done_.notify_all();
  }
}

void WriteBehindDisk::ReaderLoop() {
  std::unique_lock lock(read_mu_);
  for (;;) {
    read_wake_.wait(lock, [this] {
      return readers_stopping_ || !read_jobs_.empty() || (!tasks_.empty() && !tasks_stopped_);
    });
    if (readers_stopping_) return;
    if (!read_jobs_.empty()) {
      ReadJob* job = read_jobs_.front();
      if (job->next.load(std::memory_order_relaxed) >= job->reads.size()) {
        read_jobs_.pop_front();  // every value taken: the others finish it
        continue;
      }
      ++job->readers;
      lock.unlock();
      ReadSome(*job);
      lock.lock();
      --job->readers;
      read_done_.notify_all();
      continue;
    }
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    ++tasks_running_;
    lock.unlock();
    task();
    lock.lock();
    --tasks_running_;
    read_done_.notify_all();
  }
}

void WriteBehindDisk::RunOnReader(std::function<void()> task) {
  {
    std::lock_guard lock(read_mu_);
    if (tasks_stopped_) return;
    tasks_.push_back(std::move(task));
  }
  read_wake_.notify_one();
}

void WriteBehindDisk::StopTasks() {
  std::unique_lock lock(read_mu_);
  tasks_stopped_ = true;
  tasks_.clear();
  read_done_.wait(lock, [this] { return tasks_running_ == 0; });
}

bool WriteBehindDisk::Holds(std::string_view ns, std::string_view key, uint64_t sequence) const {
  if (sequence == 0) return false;
  {
    std::lock_guard lock(mu_);
    if (Fenced(ObjectId(ns, key), sequence)) return false;
  }
  return tier_->Holds(ns, key, sequence);
}

bool WriteBehindDisk::Fenced(const std::string& id, uint64_t sequence) const {
  auto fence = fences_.find(id);
  return fence != fences_.end() && sequence < fence->second;
}

bool WriteBehindDisk::AnyFence() const {
  std::lock_guard lock(mu_);
  return !fences_.empty();
}

bool WriteBehindDisk::FencedOnDisk(std::string_view ns, std::string_view key, uint64_t now) {
  const std::string id = ObjectId(ns, key);
  {
    std::lock_guard lock(mu_);
    if (!fences_.contains(id)) return false;
  }
  Result<DiskEntry> entry = tier_->Find(ns, key, now);
  if (!entry.ok()) return true;  // gone meanwhile
  std::lock_guard lock(mu_);
  return Fenced(id, entry->sequence);
}

bool WriteBehindDisk::GoesToDisk(std::string_view ns) const {
  const std::map<std::string, bool>& tiers = options_.namespace_on_disk;
  if (auto it = tiers.find(std::string(ns)); it != tiers.end()) return it->second;
  if (auto it = tiers.find("*"); it != tiers.end()) return it->second;
  return true;
}

bool WriteBehindDisk::Leaving(const EvictedObject& object) {
  if (!GoesToDisk(object.ns)) return false;
  // This very version is on disk already: it was promoted from there.
  if (tier_->Holds(object.ns, object.key, object.sequence)) return false;
  Pending item;
  item.ns = object.ns;
  item.key = object.key;
  item.expiry_ms = object.ttl_left_ms == 0 ? 0 : UnixMs() + object.ttl_left_ms;
  item.sequence = object.sequence;
  item.checksum = object.checksum;
  item.bytes = object.value.size();
  item.filling = true;
  std::lock_guard lock(mu_);
  if (pending_bytes_ + item.bytes > options_.max_pending_bytes) {
    ++stats_.queue_drops;
    return false;
  }
  pending_bytes_ += item.bytes;
  const uint64_t sequence = item.sequence;
  filling_[sequence] = Enqueue(std::move(item));
  return true;
}

void WriteBehindDisk::Evicted(const EvictedObject& object) {
  Queue::iterator item;
  {
    std::lock_guard lock(mu_);
    auto it = filling_.find(object.sequence);
    if (it == filling_.end()) return;  // never: Leaving registered it
    item = it->second;
  }
  // The copy without mu_: a filling item is its filler's alone (Pending::filling).
  item->meta = object.meta;
  item->value.assign(object.value.begin(), object.value.end());
  {
    std::lock_guard lock(mu_);
    filling_.erase(object.sequence);
    item->filling = false;
    if (item->ended) {
      Unqueue(item);
      return;
    }
  }
  wake_.notify_one();
}

WriteBehindDisk::Queue::iterator WriteBehindDisk::Enqueue(Pending item) {
  std::string id = ObjectId(item.ns, item.key);
  EndBelow(id, item.sequence);
  queue_.push_back(std::move(item));
  const Queue::iterator added = std::prev(queue_.end());
  queued_[std::move(id)].push_back(added);
  return added;
}

bool WriteBehindDisk::EndBelow(const std::string& id, uint64_t sequence) {
  auto found = queued_.find(id);
  if (found == queued_.end()) return false;
  bool ended = false;
  // Copied: Unqueue edits the list.
  const std::vector<Queue::iterator> items = found->second;
  for (const Queue::iterator& item : items) {
    // A queued tombstone stays: its waiter is told when it is synced.
    if (item->tombstone || item->sequence >= sequence || item->ended) continue;
    ended = true;
    if (item->filling) {
      item->ended = true;  // its filler takes it out
    } else if (!item->writing) {
      Unqueue(item);
    }
  }
  return ended;
}

void WriteBehindDisk::Unqueue(Queue::iterator item) {
  const std::string id = ObjectId(item->ns, item->key);
  if (auto found = queued_.find(id); found != queued_.end()) {
    std::erase(found->second, item);
    if (found->second.empty()) queued_.erase(found);
  }
  pending_bytes_ -= item->bytes;
  if (item->tombstone) --pending_tombstones_;
  queue_.erase(item);
}

WriteBehindDisk::Queue::iterator WriteBehindDisk::NewestQueued(const std::string& id) {
  Queue::iterator newest = queue_.end();
  auto found = queued_.find(id);
  if (found == queued_.end()) return newest;
  for (const Queue::iterator& item : found->second) {
    if (!item->readable()) continue;
    if (newest == queue_.end() || item->sequence > newest->sequence) newest = item;
  }
  return newest;
}

void WriteBehindDisk::FlushAtStop(ObjectStore& store,
                                  std::chrono::steady_clock::time_point deadline) {
  const auto started = std::chrono::steady_clock::now();
  uint64_t objects = 0, queued = 0;
  bool out_of_time = false;
  for (const NamespaceUsage& usage : store.NamespaceUsages()) {
    if (!GoesToDisk(usage.ns)) continue;
    objects += usage.objects;
    std::string cursor;
    while (!out_of_time) {
      Result<KeyListing> page = store.ListKeys(usage.ns, cursor, 1024);
      if (!page.ok()) break;
      for (const std::string& key : page->keys) {
        Result<ReadHandle> object = store.Lookup(usage.ns, key);
        if (!object.ok()) continue;  // expired meanwhile
        // This very version is on disk (it was promoted from there): nothing to write.
        if (tier_->Holds(usage.ns, key, object->sequence())) continue;
        const uint64_t bytes = object->size();
        // What the object says of itself, before mu_: its expiry is read under its shard's
        // mutex, and an eviction takes mu_ under that one (Leaving).
        Pending item;
        item.ns = usage.ns;
        item.key = key;
        item.meta = object->meta();
        const uint64_t ttl_left = object->ttl_left_ms();
        item.expiry_ms = ttl_left == 0 ? 0 : UnixMs() + ttl_left;
        item.sequence = object->sequence();
        item.checksum = object->checksum();
        item.bytes = bytes;
        std::unique_lock lock(mu_);
        // Room in the queue (an object larger than the whole queue waits for an empty one).
        out_of_time = !wake_.wait_until(lock, deadline, [&] {
          return pending_bytes_ == 0 || pending_bytes_ + bytes <= options_.max_pending_bytes;
        });
        if (out_of_time) break;
        pending_bytes_ += bytes;
        item.value.assign(object->data(), object->data() + bytes);
        Enqueue(std::move(item));
        ++stats_.stop_flushed;
        lock.unlock();
        wake_.notify_all();
        ++queued;
      }
      if (page->next_cursor.empty()) break;
      cursor = std::move(page->next_cursor);
    }
  }
  log::Info("disk tier: stopping: {} objects from memory queued for disk in {} ms{}", queued,
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  started)
                .count(),
            out_of_time ? fmt::format("; disk_stop_flush_secs ran out: about {} more are not "
                                      "written",
                                      objects > queued ? objects - queued : 0)
                        : std::string());
}

void WriteBehindDisk::LogWriteError(std::string_view what, const Status& error) {
  // Rate-limited: a full disk fails every eviction, and the log may be on that disk.
  if (uint64_t held_back = 0; write_error_log_.Allow(&held_back)) {
    log::Warn("disk tier: {} was not written: {}{}", what, error.ToString(),
              held_back == 0
                  ? std::string()
                  : fmt::format(" ({} more failed writes since the last such line)", held_back));
  }
}

void WriteBehindDisk::WriterLoop() {
  std::unique_lock lock(mu_);
  bool compact = true;  // whether a compaction step may make progress
  for (;;) {
    if (queue_.empty()) {
      if (stopping_) return;  // everything is written
      if (!compact) {
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        continue;
      }
      // Idle: a bounded step of compaction, then a pause that keeps it under kCompactRate
      // (evicted objects end the pause: they go first).
      lock.unlock();
      Result<CompactionProgress> step = tier_->CompactStep(kCompactStepBytes, UnixMs());
      index_bytes_.store(tier_->stats().index_bytes, std::memory_order_relaxed);
      lock.lock();
      if (!step.ok()) {
        log::Warn("disk tier: compaction: {}", step.status().ToString());
        compact = false;  // until the next write
        continue;
      }
      compact = step->more;
      const auto pause = std::chrono::microseconds(step->moved_bytes * 1000000 / kCompactRate);
      wake_.wait_for(lock, pause, [this] { return stopping_ || !queue_.empty(); });
      continue;
    }
    // A batch from the front of the queue, written in as few writes as the segments allow (a
    // disk takes one large write far faster than many small ones in a row). The index may take
    // half of max_index_bytes (the store keeps the other half): near that share a batch holds
    // only as many objects as the room left takes at the index's average entry, so that the
    // write that reaches it goes past by about one entry, not a whole batch.
    const uint64_t index_share = options_.max_index_bytes / 2;
    size_t max_objects = kWriteBatchObjects;
    if (index_share != 0) {
      const DiskTierStats tier = tier_->stats();
      if (tier.objects > 0 && tier.index_bytes < index_share) {
        const uint64_t per_entry = std::max<uint64_t>(tier.index_bytes / tier.objects, 1);
        max_objects = static_cast<size_t>(std::clamp<uint64_t>(
            (index_share - tier.index_bytes) / per_entry, 1, kWriteBatchObjects));
      }
    }
    std::vector<Queue::iterator> batch;
    uint64_t batch_bytes = 0;
    for (auto it = queue_.begin(); it != queue_.end() && batch.size() < max_objects; ++it) {
      if (it->filling) continue;  // its bytes are still on their way
      if (!batch.empty() && batch_bytes + it->value.size() > kWriteBatchBytes) break;
      it->writing = true;
      writing_ids_.push_back(ObjectId(it->ns, it->key));
      batch.push_back(it);
      batch_bytes += it->value.size();
    }
    if (batch.empty()) {  // everything queued is still being filled: Evicted wakes the writer
      wake_.wait(lock, [this] {
        return stopping_ || std::any_of(queue_.begin(), queue_.end(),
                                        [](const Pending& item) { return !item.filling; });
      });
      if (stopping_ && std::all_of(queue_.begin(), queue_.end(),
                                   [](const Pending& item) { return item.filling; })) {
        return;
      }
      continue;
    }
    const bool index_full =
        index_share != 0 && index_bytes_.load(std::memory_order_relaxed) >= index_share;
    lock.unlock();
    // The objects first, then the tombstones: a tombstone ends what is below its number, so
    // it may follow a version of its key written in the same batch (which it ends, or which is
    // newer than it), never the other way round.
    std::vector<Status> written(batch.size(), Status::Ok());
    std::vector<DiskPut> puts;
    std::vector<size_t> put_items;
    for (size_t k = 0; k < batch.size(); ++k) {
      const Queue::iterator item = batch[k];
      if (item->tombstone || index_full) continue;
      puts.push_back({item->ns, item->key, item->meta, item->value, item->expiry_ms, item->sequence,
                      item->checksum});
      put_items.push_back(k);
    }
    if (!puts.empty()) {
      const std::vector<Status> put = tier_->PutMany(puts);
      for (size_t j = 0; j < put.size(); ++j)
        written[put_items[j]] = put[j];
    }
    // The batch's tombstones in one group commit: one sync for all of them.
    std::vector<DiskErase> erases;
    std::vector<size_t> erase_items;
    for (size_t k = 0; k < batch.size(); ++k) {
      const Queue::iterator item = batch[k];
      if (!item->tombstone) continue;
      erases.push_back({item->ns, item->key, item->sequence});
      erase_items.push_back(k);
    }
    if (!erases.empty()) {
      const std::vector<Status> erased = tier_->EraseMany(erases);
      for (size_t j = 0; j < erased.size(); ++j)
        written[erase_items[j]] = erased[j];
    }
    index_bytes_.store(tier_->stats().index_bytes, std::memory_order_relaxed);
    lock.lock();
    std::vector<std::pair<std::shared_ptr<DurabilityWaiter>, Status>> durable;
    for (size_t k = 0; k < batch.size(); ++k) {
      const Queue::iterator item = batch[k];
      if (item->tombstone) {
        const std::string id = ObjectId(item->ns, item->key);
        if (auto fence = fences_.find(id);
            fence != fences_.end() && fence->second == item->sequence) {
          fences_.erase(fence);  // the tier has ended the record itself
        }
        if (!written[k].ok())
          LogWriteError("the tombstone of a replaced or deleted version", written[k]);
        if (item->waiter != nullptr) durable.emplace_back(item->waiter, written[k]);
      } else if (index_full) {
        if (stats_.index_drops++ == 0) {
          log::Warn(
              "disk tier: its index takes half of max_index_bytes ({}): evicted objects are "
              "dropped until it shrinks (raise max_index_bytes for more)",
              FormatSize(options_.max_index_bytes));
        }
      } else if (written[k].ok()) {
        ++stats_.written;
      } else {
        LogWriteError(fmt::format("an evicted object ({} bytes)", item->value.size()), written[k]);
      }
      Unqueue(item);
    }
    writing_ids_.clear();
    compact = true;      // what this write evicted or replaced may have left a segment mostly dead
    wake_.notify_all();  // FlushAtStop may wait for room in the queue
    if (!durable.empty()) {
      lock.unlock();
      for (auto& [waiter, status] : durable)
        waiter->End(status);
      lock.lock();
    }
  }
}

Result<WriteBehindDisk::Found> WriteBehindDisk::Find(std::string_view ns, std::string_view key) {
  const uint64_t now = UnixMs();
  {
    std::lock_guard lock(mu_);
    if (auto item = NewestQueued(ObjectId(ns, key)); item != queue_.end()) {
      if (item->expiry_ms != 0 && item->expiry_ms <= now) return Status::NotFound("expired");
      ++stats_.hits;
      return Found{item->meta,     item->value,        TtlLeft(item->expiry_ms, now),
                   item->sequence, item->value.size(), /*queued=*/true,
                   item->checksum};
    }
  }
  KVPORT_ASSIGN_OR_RETURN(DiskEntry entry, tier_->Find(ns, key, now));
  {
    std::lock_guard lock(mu_);
    if (Fenced(ObjectId(ns, key), entry.sequence)) return Status::NotFound("replaced or deleted");
  }
  return Found{std::move(entry.meta), {},    TtlLeft(entry.expiry_ms, now), entry.sequence,
               entry.value_bytes,     false, entry.value_checksum};
}

Status WriteBehindDisk::ReadValue(std::string_view ns, std::string_view key, uint64_t sequence,
                                  std::span<char> out) {
  KVPORT_RETURN_IF_ERROR(tier_->ReadValue(ns, key, sequence, out));
  std::lock_guard lock(mu_);
  ++stats_.hits;
  return Status::Ok();
}

std::vector<std::string> WriteBehindDisk::KeysOf(std::string_view ns) {
  std::vector<std::string> keys = tier_->KeysOf(ns);
  if (AnyFence()) {
    const uint64_t now = UnixMs();
    std::erase_if(keys, [&](const std::string& key) { return FencedOnDisk(ns, key, now); });
  }
  {
    std::lock_guard lock(mu_);
    for (const Pending& item : queue_) {
      if (item.ns == ns && item.readable()) keys.push_back(item.key);
    }
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

std::vector<std::string> WriteBehindDisk::KeysAfter(std::string_view ns, std::string_view after,
                                                    size_t limit) {
  std::vector<std::string> keys = KeysOf(ns);
  std::vector<std::string> live;
  for (auto it = std::upper_bound(keys.begin(), keys.end(), after);
       it != keys.end() && live.size() < limit; ++it) {
    // The index keeps an expired record until it is compacted away; a get would miss it.
    if (Contains(ns, *it, nullptr, nullptr)) live.push_back(std::move(*it));
  }
  return live;
}

std::vector<std::string> WriteBehindDisk::NamespacesOf(std::string_view key) {
  const uint64_t now = UnixMs();
  std::vector<std::string> namespaces = tier_->NamespacesOf(key, now);
  if (AnyFence()) {
    std::erase_if(namespaces, [&](const std::string& ns) { return FencedOnDisk(ns, key, now); });
  }
  {
    // The queue is at most max_pending_bytes of objects: a scan, on an any-namespace miss only.
    std::lock_guard lock(mu_);
    for (const Pending& item : queue_) {
      if (item.key == key && item.readable() && (item.expiry_ms == 0 || item.expiry_ms > now)) {
        namespaces.push_back(item.ns);
      }
    }
  }
  std::sort(namespaces.begin(), namespaces.end());
  namespaces.erase(std::unique(namespaces.begin(), namespaces.end()), namespaces.end());
  return namespaces;
}

bool WriteBehindDisk::Contains(std::string_view ns, std::string_view key, uint64_t* value_bytes,
                               uint64_t* meta_bytes) {
  const uint64_t now = UnixMs();
  {
    std::lock_guard lock(mu_);
    if (auto item = NewestQueued(ObjectId(ns, key)); item != queue_.end()) {
      if (item->expiry_ms != 0 && item->expiry_ms <= now) return false;
      if (value_bytes != nullptr) *value_bytes = item->value.size();
      if (meta_bytes != nullptr) *meta_bytes = item->meta.size();
      return true;
    }
  }
  return tier_->Contains(ns, key, now, value_bytes, meta_bytes) && !FencedOnDisk(ns, key, now);
}

bool WriteBehindDisk::Erase(std::string_view ns, std::string_view key, uint64_t sequence,
                            const std::shared_ptr<DurabilityWaiter>& waiter) {
  std::string id = ObjectId(ns, key);
  std::lock_guard lock(mu_);
  bool ended = EndBelow(id, sequence);
  // Whether a version below `sequence` is on disk or on its way there in the write under way
  // (and not ended by a fence already). Most commits meet none (every commit of a node with a
  // disk tier comes here): the index lookup takes the tier's index lock, never its append lock,
  // so a stalled disk write does not hold it.
  bool below_on_disk = false;
  if (auto queued = queued_.find(id); queued != queued_.end()) {
    for (const Queue::iterator& item : queued->second) {
      if (item->writing && !item->tombstone && item->sequence < sequence) {
        below_on_disk = true;
        ended = ended || !Fenced(id, item->sequence);
      }
    }
  }
  if (!fences_.contains(id)) {
    if (tier_->Contains(ns, key, 0)) below_on_disk = ended = true;
  } else if (Result<DiskEntry> entry = tier_->Find(ns, key, 0);
             entry.ok() && entry->sequence < sequence) {
    below_on_disk = true;
    ended = ended || !Fenced(id, entry->sequence);
  }
  if (!below_on_disk) return ended;
  uint64_t& fence = fences_[id];
  fence = std::max(fence, sequence);
  Pending tombstone;
  tombstone.ns = ns;
  tombstone.key = key;
  tombstone.sequence = sequence;
  tombstone.tombstone = true;
  tombstone.waiter = waiter;
  queue_.push_back(std::move(tombstone));
  ++pending_tombstones_;
  queued_[std::move(id)].push_back(std::prev(queue_.end()));
  if (waiter != nullptr) waiter->Begin();
  wake_.notify_one();
  return ended;
}

WriteBehindDiskStats WriteBehindDisk::stats() const {
  std::lock_guard lock(mu_);
  WriteBehindDiskStats s = stats_;
  s.tier = tier_->stats();
  s.pending_bytes = pending_bytes_;
  s.pending_tombstones = pending_tombstones_;
  return s;
}

std::string WriteBehindDisk::Describe() const {
  const WriteBehindDiskStats s = stats();
  std::string notes;
  if (!s.tier.clean_start) notes += "; the last stop was not clean (a crash or a power loss)";
  if (s.tier.dropped_records + s.tier.torn_tails > 0) {
    notes += fmt::format("; {} records dropped, {} torn tails cut off", s.tier.dropped_records,
                         s.tier.torn_tails);
  }
  if (s.tier.damaged_segments > 0) {
    notes += fmt::format("; {} segments with a damaged record (what follows it is lost)",
                         s.tier.damaged_segments);
  }
  if (s.tier.quarantined > 0) {
    notes +=
        fmt::format("; {} unreadable segments moved aside (*.quarantined)", s.tier.quarantined);
  }
  return fmt::format("disk tier {}: {} ({}), {} objects restored in {} ms{}", options_.dir,
                     FormatSize(options_.capacity_bytes), io_mode_, s.tier.restored, s.restore_ms,
                     notes);
}

}  // namespace kvport::store
