// SPDX-License-Identifier: Apache-2.0
#include "store/disk_tier.h"

#include <fmt/core.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <utility>

#include "kvport/log.h"
#include "store/index_checkpoint.h"
#include "store/superblock.h"

namespace kvport::store {

// Fields other than number and file change under the tier's mu_ only; those two never do, so a
// compaction or a get reads the file without it.
struct DiskTier::Segment {
  uint64_t number = 0;
  std::unique_ptr<File> file;
  std::unique_ptr<SegmentWriter> writer;  // the newest segment's; null for older ones
  uint64_t end = 0;                       // bytes written (scanned, for a restored one)
  std::vector<std::string> ids;           // objects written here (some may have moved since)
  uint64_t ids_heap_bytes = 0;            // the ids' heap blocks (index_bytes)
  uint64_t live_bytes = 0;                // record_bytes of the index entries pointing here
  uint64_t tombstone_bytes = 0;           // record_bytes of the tombstones written here
  bool damaged = false;  // its scan stopped at a damaged record: never appended to again
};

namespace {

// A heap block of `bytes` as glibc's malloc sizes it: an 8-byte header, 16-byte granules, 32
// bytes at least. An estimate elsewhere, which is what index_bytes promises.
uint64_t HeapBlock(uint64_t bytes) {
  return std::max<uint64_t>(32, (bytes + 8 + 15) / 16 * 16);
}

// The heap a std::string of `size` characters holds: none while it fits in the string's own
// buffer (15 characters in libstdc++, 22 in libc++: what an empty string's capacity says).
uint64_t StringHeap(size_t size) {
  static const size_t inline_chars = std::string().capacity();
  return size <= inline_chars ? 0 : HeapBlock(size + 1);
}

// Reads the record of `bytes` bytes at `offset` of `file` whole into `buffer` and checks all of
// it: its fixed part, its names and its value against their checksums, and that it is still the
// record of `sequence` that the scan saw. Corruption when it does not check out (a flipped bit
// since the scan, a file cut short); the file's errors as they are.
Status ReadWholeRecord(File& file, uint64_t offset, uint64_t bytes, uint64_t sequence,
                       std::vector<char>& buffer, DiskRecordHeader* header) {
  buffer.resize(bytes);
  KVPORT_ASSIGN_OR_RETURN(size_t got, file.ReadAt(offset, buffer.data(), buffer.size()));
  if (got < bytes) {
    return Status::Corruption(fmt::format("disk record {}: the file ends inside it", sequence));
  }
  const std::span<const char> record(buffer);
  const std::span<const char> fixed = record.first(kFixedBytes);
  if (ParseFixedPart(fixed, bytes, header) != FixedPart::kValid || header->record_bytes != bytes ||
      header->sequence != sequence) {
    return Status::Corruption(
        fmt::format("disk record {}: its header no longer checks out", sequence));
  }
  KVPORT_RETURN_IF_ERROR(
      ParseNames(fixed, record.subspan(kFixedBytes, header->names_bytes), header));
  if (header->tombstone) return Status::Ok();  // a killed record's value is never read
  return CheckValue(*header, record.subspan(header->value_offset(), header->value_bytes));
}

}  // namespace

DiskTier::DiskTier(std::unique_ptr<SegmentFolder> folder, const DiskTierOptions& options)
    : folder_(std::move(folder)), options_(options) {}

DiskTier::~DiskTier() {
  UnlinkRemoved();
  if (!superblock_written_) return;  // Open failed: the superblock is as it found it
  // A clean stop: what the segments hold is made durable first, so that the flag never claims
  // more than is on disk.
  Status synced = Status::Ok();
  {
    MutexLock lock(mu_);
    for (const auto& [number, segment] : segments_) {
      synced = segment->file->Sync();
      if (!synced.ok()) break;
    }
  }
  // Then the index, so that the next start need not scan; the superblock names it last, so that
  // a stop cut short anywhere before leaves the flag clear and the checkpoint unused.
  uint32_t stamp = 0;
  if (synced.ok()) {
    stamp = last_stamp_ + 1 == 0 ? 1 : last_stamp_ + 1;
    if (Status written = WriteCheckpoint(stamp); !written.ok()) {
      if (written.code() != StatusCode::kNotSupported) {
        log::Warn(
            "disk tier {}: no index checkpoint written ({}): the next start scans the "
            "segments",
            folder_->dir(), written.ToString());
      }
      stamp = 0;
    }
  }
  if (synced.ok()) synced = WriteSuperblock(/*clean=*/true, stamp);
  if (!synced.ok()) {
    log::Warn("disk tier {}: the stop is not marked clean: {}", folder_->dir(), synced.ToString());
  }
}

Status DiskTier::WriteSuperblock(bool clean, uint32_t checkpoint_stamp) {
  Superblock superblock;
  superblock.block_bytes = kDiskBlock;
  superblock.segment_bytes = options_.segment_bytes;
  superblock.clean = clean;
  superblock.checkpoint_stamp = checkpoint_stamp;
  return folder_->WriteSuperblock(EncodeSuperblock(superblock));
}

Status DiskTier::WriteCheckpoint(uint32_t stamp) {
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<File> file, folder_->CreateCheckpoint());
  CheckpointWriter writer(file.get());
  {
    // Held across the writes: only the destructor calls this, with no other caller left.
    MutexLock lock(mu_);
    CheckpointHeader header;
    header.stamp = stamp;
    header.segment_bytes = options_.segment_bytes;
    header.last_sequence = last_sequence_;
    header.next_segment =
        std::max(next_segment_, segments_.empty() ? 1 : segments_.rbegin()->first + 1);
    header.segment_count = segments_.size();
    header.entry_count = index_.size();
    KVPORT_RETURN_IF_ERROR(writer.Begin(header));
    for (const auto& [number, segment] : segments_) {
      CheckpointSegment described;
      described.number = number;
      described.end = segment->end;
      KVPORT_ASSIGN_OR_RETURN(described.file_bytes, segment->file->Size());
      described.tombstone_bytes = segment->tombstone_bytes;
      KVPORT_RETURN_IF_ERROR(writer.AddSegment(described));
    }
    for (const auto& [id, entry] : index_)
      KVPORT_RETURN_IF_ERROR(writer.AddEntry(entry.segment->number, entry.record));
  }
  KVPORT_RETURN_IF_ERROR(writer.Finish());
  KVPORT_RETURN_IF_ERROR(file->Sync());
  file.reset();
  KVPORT_RETURN_IF_ERROR(folder_->PublishCheckpoint());
  return folder_->SyncDir();
}

Result<std::unique_ptr<DiskTier>> DiskTier::Open(std::unique_ptr<SegmentFolder> folder,
                                                 const DiskTierOptions& options, uint64_t now_ms) {
  if (options.segment_bytes < kDiskBlock || options.segment_bytes % kDiskBlock != 0) {
    return Status::InvalidArgument(
        fmt::format("disk segment size {} is not a positive multiple of {}", options.segment_bytes,
                    kDiskBlock));
  }
  DiskTierOptions used = options;
  bool clean_start = true;
  uint32_t stamp = 0;  // of the checkpoint the last stop wrote, if it was clean
  bool stored_size = false;
  const std::string superblock_path = folder->dir() + "/SUPERBLOCK";
  KVPORT_ASSIGN_OR_RETURN(const std::vector<uint64_t> listed, folder->List());
  Result<std::string> stored = folder->ReadSuperblock();
  if (stored.ok()) {
    Result<Superblock> superblock = DecodeSuperblock(*stored);
    if (!superblock.ok()) {
      return Status(superblock.status().code(),
                    fmt::format("the disk tier's superblock {}: {}. The tier was not opened and "
                                "its segments were left as they are: restore the superblock, "
                                "move it aside (the segments are then read with the configured "
                                "segment size), or point disk_dir at another folder",
                                superblock_path, superblock.status().message()));
    }
    clean_start = superblock->clean;
    stamp = superblock->clean ? superblock->checkpoint_stamp : 0;
    // The segments were written at the stored size: read at another, the scan would cut the
    // newest short (or run past a segment's end). An empty folder starts at the options'.
    if (!listed.empty()) {
      stored_size = true;
      if (superblock->segment_bytes != options.segment_bytes) {
        log::Info(
            "disk tier {}: its segments are of {} bytes (its superblock), kept rather than the "
            "{} the options ask for; empty the folder to change it",
            folder->dir(), superblock->segment_bytes, options.segment_bytes);
      }
      used.segment_bytes = superblock->segment_bytes;
    }
  } else if (stored.status().code() == StatusCode::kNotFound) {
    if (!listed.empty()) {
      clean_start = false;  // not recorded
      log::Info(
          "disk tier {}: {} segments and no superblock (an earlier version's folder): adopted "
          "with segments of {} bytes",
          folder->dir(), listed.size(), options.segment_bytes);
    }
  } else {
    return stored.status().WithContext("reading the disk tier's superblock");
  }
  if (used.capacity_bytes / used.segment_bytes < 2) {
    if (stored_size) {
      return Status::InvalidArgument(fmt::format(
          "disk capacity {} holds fewer than two segments of {} bytes, the size the segments "
          "in {} were written with ({}): raise the capacity to at least {}, or start the folder "
          "over (disk_restore off) at the configured size",
          used.capacity_bytes, used.segment_bytes, folder->dir(), superblock_path,
          2 * used.segment_bytes));
    }
    return Status::InvalidArgument(
        fmt::format("disk capacity {} holds fewer than two segments of {} bytes",
                    used.capacity_bytes, used.segment_bytes));
  }
  std::unique_ptr<DiskTier> tier(new DiskTier(std::move(folder), used));
  KVPORT_RETURN_IF_ERROR(tier->Restore(now_ms, stamp));
  {
    MutexLock lock(tier->mu_);
    tier->stats_.clean_start = clean_start;
  }
  // The checkpoint describes the folder as the last stop left it: the superblock's flag and
  // stamp are cleared (synced) before anything is written, so that a crash from now on reads as
  // one and no later start believes the checkpoint. It is removed too, made durable by the
  // superblock's own folder sync (one fsync fewer at every start; should a power loss bring it
  // back, the superblock names no stamp), so that none is left behind for a build that does not
  // know it.
  SegmentFolder& dir = *tier->folder_;
  if (Status removed = dir.RemoveCheckpoint(); !removed.ok()) {
    log::Warn(
        "disk tier {}: removing the index checkpoint: {} (the superblock's clean flag, "
        "cleared now, keeps it from being used)",
        dir.dir(), removed.ToString());
  }
  KVPORT_RETURN_IF_ERROR(tier->WriteSuperblock(/*clean=*/false));
  tier->last_stamp_ = stamp;
  KVPORT_RETURN_IF_ERROR(tier->PrepareAppends());
  tier->superblock_written_ = true;
  return tier;
}

Status DiskTier::PrepareAppends() {
  {
    // Too many segments for the capacity (it was lowered): the oldest go.
    MutexLock lock(mu_);
    while (segments_.size() > options_.capacity_bytes / options_.segment_bytes)
      EvictOldest();
  }
  // Unlinked, and durable before a tombstone relies on their being gone.
  if (Status synced = SyncRemovals(); !synced.ok()) {
    log::Warn("disk tier: removing segments over the capacity: {}", synced.ToString());
  }
  MutexLock lock(mu_);
  // The next record goes to a new segment when the newest one is damaged: what lies after its
  // damaged record is kept for a look, not written over.
  if (segments_.empty() || segments_.rbegin()->second->damaged) return Status::Ok();
  Segment& newest = *segments_.rbegin()->second;
  // The next record goes where the scan stopped; a torn tail after it goes now, or every
  // restart would stop at what is left of it behind a shorter record. The space after it is
  // reserved again (best effort: writes there find a full disk as they would have anyway).
  // (Under mu_: nothing else runs before Open returns.)
  KVPORT_ASSIGN_OR_RETURN(uint64_t size, newest.file->Size());
  if (size > newest.end) {
    KVPORT_RETURN_IF_ERROR(newest.file->Truncate(newest.end));
    if (Status reserved = newest.file->Allocate(newest.end, options_.segment_bytes - newest.end);
        !reserved.ok()) {
      log::Warn("disk tier: {}", reserved.ToString());
    }
  }
  newest.writer =
      std::make_unique<SegmentWriter>(newest.file.get(), options_.segment_bytes, newest.end);
  return Status::Ok();
}

bool DiskTier::LoadCheckpoint(const std::vector<std::shared_ptr<Segment>>& opened, uint32_t stamp,
                              uint64_t now_ms) {
  auto unusable = [&](const Status& why) {
    log::Warn(
        "disk tier {}: its index checkpoint cannot be used ({}): the segments are scanned "
        "instead",
        folder_->dir(), why.ToString());
    return false;
  };
  Result<std::unique_ptr<File>> file = folder_->OpenCheckpoint();
  if (!file.ok()) return unusable(file.status());
  Result<IndexCheckpoint> read = ReadCheckpoint(**file);
  if (!read.ok()) return unusable(read.status());
  IndexCheckpoint& checkpoint = *read;
  if (checkpoint.header.stamp != stamp) {
    return unusable(Status::Corruption(
        fmt::format("it carries stamp {} where the superblock names {}: another stop's",
                    checkpoint.header.stamp, stamp)));
  }
  if (checkpoint.header.segment_bytes != options_.segment_bytes) {
    return unusable(
        Status::Corruption(fmt::format("it describes segments of {} bytes, the folder's are of {}",
                                       checkpoint.header.segment_bytes, options_.segment_bytes)));
  }
  // Exactly the segments there, each of the size it had: any other file, or one cut, grown or
  // gone since, and what the checkpoint says of the folder is no longer known to be true.
  if (checkpoint.segments.size() != opened.size()) {
    return unusable(Status::Corruption(fmt::format("it describes {} segments, the folder has {}",
                                                   checkpoint.segments.size(), opened.size())));
  }
  for (size_t i = 0; i < opened.size(); ++i) {
    const CheckpointSegment& described = checkpoint.segments[i];
    if (described.number != opened[i]->number) {
      return unusable(
          Status::Corruption(fmt::format("it describes segment {} where the folder has {}",
                                         described.number, folder_->PathOf(opened[i]->number))));
    }
    Result<uint64_t> size = opened[i]->file->Size();
    if (!size.ok()) return unusable(size.status());
    if (*size != described.file_bytes) {
      return unusable(Status::Corruption(fmt::format("{} is of {} bytes, {} when it was written",
                                                     folder_->PathOf(described.number), *size,
                                                     described.file_bytes)));
    }
  }
  MutexLock lock(mu_);
  for (size_t i = 0; i < opened.size(); ++i) {
    opened[i]->end = checkpoint.segments[i].end;
    opened[i]->tombstone_bytes = checkpoint.segments[i].tombstone_bytes;
    disk_bytes_ += opened[i]->end;
    segments_[opened[i]->number] = opened[i];
  }
  last_sequence_ = checkpoint.header.last_sequence;
  next_segment_ = std::max(next_segment_, checkpoint.header.next_segment);
  index_.reserve(checkpoint.entries.size());  // no rehash on the way (the count is the file's)
  for (CheckpointEntry& entry : checkpoint.entries) {
    const DiskRecordHeader& h = entry.record.header;
    std::string id = ObjectId(h.ns, h.key);
    if (index_.count(id) != 0) {
      ClearIndex();
      return unusable(Status::Corruption("it lists one object twice"));
    }
    if (h.expiry_ms != 0 && h.expiry_ms <= now_ms) continue;  // as the scan skips it
    // ReadCheckpoint checked that the segment is one it lists, and so one of `opened`.
    const auto at = std::lower_bound(
        checkpoint.segments.begin(), checkpoint.segments.end(), entry.segment,
        [](const CheckpointSegment& s, uint64_t number) { return s.number < number; });
    Index(std::move(id), opened[static_cast<size_t>(at - checkpoint.segments.begin())],
          std::move(entry.record));
  }
  stats_.restored = index_.size();
  stats_.restored_from_checkpoint = true;
  return true;
}

void DiskTier::ClearIndex() {
  for (const auto& [number, segment] : segments_) {
    segment->end = 0;
    segment->tombstone_bytes = 0;
    segment->live_bytes = 0;
    segment->ids.clear();
    segment->ids_heap_bytes = 0;
  }
  segments_.clear();
  index_.clear();
  namespaces_of_.clear();
  disk_bytes_ = 0;
  last_sequence_ = 0;
  entries_heap_bytes_ = 0;
  stats_.object_bytes = 0;
}

void DiskTier::QuarantineSegment(uint64_t number, const Status& why) {
  const Status moved = folder_->Quarantine(number);
  if (moved.ok()) {
    log::Warn(
        "disk tier: {} cannot be read ({}): moved aside to {}.quarantined (or .quarantined.N) "
        "for a look; the tier opens without its objects",
        folder_->PathOf(number), why.ToString(), folder_->PathOf(number));
  } else {
    log::Warn("disk tier: {} cannot be read ({}) nor moved aside ({}): skipped",
              folder_->PathOf(number), why.ToString(), moved.ToString());
  }
}

Status DiskTier::Restore(uint64_t now_ms, uint32_t checkpoint_stamp) {
  KVPORT_ASSIGN_OR_RETURN(std::vector<uint64_t> numbers, folder_->List());
  struct Found {
    std::shared_ptr<Segment> segment;
    ScannedRecord record;
  };
  std::vector<Found> found;
  // The segments are scanned side by side (a scan is one small read per record, each waiting for
  // the disk): up to kRestoreThreads at once.
  // A segment that cannot be opened or scanned is moved aside rather than stopping the open:
  // a node that refused to start over one bad file would refuse at every restart.
  uint64_t quarantined = 0;
  std::vector<std::shared_ptr<Segment>> opened;
  for (uint64_t number : numbers) {  // opened in order, the newest last
    Result<std::unique_ptr<File>> file = folder_->Open(number, /*create=*/false);
    if (!file.ok()) {
      if (file.status().code() == StatusCode::kNotFound) continue;  // gone since the listing
      QuarantineSegment(number, file.status());
      ++quarantined;
      continue;
    }
    auto segment = std::make_shared<Segment>();
    segment->number = number;
    segment->file = std::move(file).value();
    opened.push_back(std::move(segment));
  }
  if (!numbers.empty()) {
    MutexLock lock(mu_);
    next_segment_ = numbers.back() + 1;
  }
  if (checkpoint_stamp != 0 && LoadCheckpoint(opened, checkpoint_stamp, now_ms)) {
    MutexLock lock(mu_);
    stats_.quarantined = quarantined;
    return Status::Ok();
  }
  std::vector<Result<SegmentScan>> scans(opened.size(), Status::Internal("not scanned"));
  {
    std::atomic<size_t> next{0};
    auto scan_some = [&] {
      for (size_t i; (i = next.fetch_add(1)) < opened.size();)
        scans[i] = ScanSegment(*opened[i]->file, options_.segment_bytes);
    };
    std::vector<std::thread> threads;
    for (size_t t = 1; t < std::min<size_t>(opened.size(), kRestoreThreads); ++t)
      threads.emplace_back(scan_some);
    scan_some();
    for (std::thread& thread : threads)
      thread.join();
  }
  for (size_t i = 0; i < opened.size(); ++i) {
    if (scans[i].ok()) continue;
    const uint64_t number = opened[i]->number;
    opened[i] = nullptr;  // closed before it is moved
    QuarantineSegment(number, scans[i].status());
    ++quarantined;
  }
  if (quarantined > 0) {
    if (Status synced = folder_->SyncDir(); !synced.ok()) {
      log::Warn("disk tier: syncing the folder after moving segments aside: {}", synced.ToString());
    }
  }
  MutexLock lock(mu_);
  stats_.quarantined = quarantined;
  for (size_t i = 0; i < opened.size(); ++i) {
    if (opened[i] == nullptr) continue;
    Result<SegmentScan>& scan = scans[i];
    std::shared_ptr<Segment>& segment = opened[i];
    const uint64_t number = segment->number;
    segment->end = scan->end;
    stats_.dropped_records += scan->dropped;
    if (scan->torn) {
      ++stats_.torn_tails;
      log::Warn("disk tier: {} ends in a torn record at byte {}: cut off there",
                folder_->PathOf(number), scan->end);
    }
    if (scan->damaged) {
      ++stats_.damaged_segments;
      segment->damaged = true;
      log::Warn(
          "disk tier: {} has a damaged record at byte {} with records after it (a bad disk or a "
          "file changed under the node, not a crash): those records are lost; the segment is "
          "not written again",
          folder_->PathOf(number), scan->end);
    }
    disk_bytes_ += segment->end;
    for (ScannedRecord& record : scan->records) {
      if (record.header.tombstone) segment->tombstone_bytes += record.header.record_bytes;
      found.push_back({segment, std::move(record)});
    }
    segments_[number] = std::move(segment);
  }
  // In sequence order; at one sequence a tombstone first: it ends what is below it, not the
  // version it was written for.
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    const DiskRecordHeader& x = a.record.header;
    const DiskRecordHeader& y = b.record.header;
    return x.sequence != y.sequence ? x.sequence < y.sequence : x.tombstone > y.tombstone;
  });
  for (Found& f : found) {
    const DiskRecordHeader& h = f.record.header;
    last_sequence_ = std::max(last_sequence_, h.sequence);
    std::string id = ObjectId(h.ns, h.key);
    // Superseded, deleted, or about to be replaced (two copies of one sequence number, from a
    // crash in the middle of a compaction, are the same record: either is right).
    Forget(id);
    if (h.tombstone || (h.expiry_ms != 0 && h.expiry_ms <= now_ms)) continue;
    Index(std::move(id), std::move(f.segment), std::move(f.record));
  }
  stats_.restored = index_.size();
  return Status::Ok();
}

uint64_t DiskTier::EntryHeap(const std::string& id, const DiskRecordHeader& h) {
  // libstdc++'s node: the next link, the pair, and the hash it caches for a std::string key.
  using Node = decltype(index_)::value_type;
  using KeyNode = decltype(namespaces_of_)::value_type;
  // namespaces_of_: a key's node and its vector's block, counted for each of its entries (a key
  // is in one namespace nearly always), and the namespace's copy in it.
  return HeapBlock(sizeof(Node) + sizeof(void*) + sizeof(size_t)) + StringHeap(id.size()) +
         StringHeap(h.ns.size()) + StringHeap(h.key.size()) + StringHeap(h.meta.size()) +
         HeapBlock(sizeof(KeyNode) + sizeof(void*) + sizeof(size_t)) + StringHeap(h.key.size()) +
         HeapBlock(sizeof(std::string)) + StringHeap(h.ns.size());
}

void DiskTier::Index(std::string id, std::shared_ptr<Segment> segment, ScannedRecord record) {
  Forget(id);
  segment->ids.push_back(id);
  segment->ids_heap_bytes += StringHeap(id.size());
  segment->live_bytes += record.header.record_bytes;
  stats_.object_bytes += record.header.record_bytes;
  entries_heap_bytes_ += EntryHeap(id, record.header);
  std::vector<std::string>& namespaces = namespaces_of_[std::string(record.header.key)];
  namespaces.insert(std::upper_bound(namespaces.begin(), namespaces.end(), record.header.ns),
                    std::string(record.header.ns));
  index_.emplace(std::move(id), Entry{std::move(segment), std::move(record)});
}

void DiskTier::Drop(const std::string& id, Entry entry, const Status& why) {
  Forget(id);
  if (why.code() == StatusCode::kCorruption) {
    ++stats_.dropped_records;
  } else {
    ++stats_.read_errors;
  }
  log::Warn("disk tier: {} of {}: {}: dropped", entry.record.offset,
            folder_->PathOf(entry.segment->number), why.ToString());
  to_kill_.push_back(std::move(entry));
}

void DiskTier::KillDropped() {
  std::vector<Entry> entries;
  {
    MutexLock lock(mu_);
    entries.swap(to_kill_);
  }
  uint64_t killed = 0;
  for (const Entry& entry : entries)
    killed += KillRecord(*entry.segment->file, entry.record.offset).ok() ? 1 : 0;
  MutexLock lock(mu_);
  stats_.killed_records += killed;
}

void DiskTier::Forget(const std::string& id) {
  auto it = index_.find(id);
  if (it == index_.end()) return;
  const DiskRecordHeader& h = it->second.record.header;
  it->second.segment->live_bytes -= h.record_bytes;
  stats_.object_bytes -= h.record_bytes;
  entries_heap_bytes_ -= EntryHeap(id, h);
  if (auto key = namespaces_of_.find(std::string(h.key)); key != namespaces_of_.end()) {
    std::erase(key->second, h.ns);
    if (key->second.empty()) namespaces_of_.erase(key);
  }
  index_.erase(it);
}

uint64_t DiskTier::RemoveSegment(const std::shared_ptr<Segment>& segment) {
  segments_.erase(segment->number);
  uint64_t forgotten = 0;
  for (const std::string& id : segment->ids) {
    auto it = index_.find(id);
    if (it == index_.end() || it->second.segment != segment) continue;  // moved on, or gone
    Forget(id);
    ++forgotten;
  }
  disk_bytes_ -= segment->end;
  // Readers holding the segment keep reading its file, unlinked or not, until they let it go.
  to_unlink_.push_back(segment->number);
  ++removals_;
  return forgotten;
}

void DiskTier::UnlinkRemoved() {
  std::vector<uint64_t> numbers;
  {
    MutexLock lock(mu_);
    numbers.swap(to_unlink_);
  }
  for (uint64_t number : numbers) {
    Status removed = folder_->Remove(number);
    if (!removed.ok()) log::Warn("disk tier: removing a segment: {}", removed.ToString());
  }
  MutexLock lock(mu_);
  unlinked_ += numbers.size();
}

Status DiskTier::SyncRemovals() {
  UnlinkRemoved();
  uint64_t unlinked = 0;
  {
    MutexLock lock(mu_);
    if (synced_removals_ == removals_) return Status::Ok();
    unlinked = unlinked_;
  }
  // Without the lock (a sync waits for the disk); a removal meanwhile stays unsynced.
  KVPORT_RETURN_IF_ERROR(folder_->SyncDir());
  MutexLock lock(mu_);
  synced_removals_ = std::max(synced_removals_, unlinked);
  return Status::Ok();
}

void DiskTier::EvictOldest() {
  const std::shared_ptr<Segment> oldest = segments_.begin()->second;
  stats_.evicted_objects += RemoveSegment(oldest);
  ++stats_.evicted_segments;
}

bool DiskTier::Holds(const std::shared_ptr<Segment>& segment) const {
  auto it = segments_.find(segment->number);
  return it != segments_.end() && it->second == segment;
}

Status DiskTier::StartSegment() {
  // A name is used once: one that could not be made (taken by something planted there) is not
  // tried again.
  const uint64_t number =
      std::max(next_segment_, segments_.empty() ? 1 : segments_.rbegin()->first + 1);
  next_segment_ = number + 1;
  while (segments_.size() >= options_.capacity_bytes / options_.segment_bytes)
    EvictOldest();
  // The file's I/O without mu_, so that reads of the index never wait for it; append_mu_ keeps
  // the other appenders (the only ones that start segments or evict) out meanwhile.
  mu_.Unlock();
  UnlinkRemoved();  // what the capacity evicted: its space back before the new one's
  Result<std::unique_ptr<File>> file = folder_->Open(number, /*create=*/true);
  Status made = file.status();
  uint64_t evicted = 0;
  if (made.ok()) {
    for (;;) {
      made = (*file)->Allocate(0, options_.segment_bytes);
      if (made.code() != StatusCode::kNoSpace) break;
      // The disk is full: the tier makes room for itself from its own oldest segments, as it
      // does at its capacity, and fails only when it has none left to give.
      mu_.Lock();
      const bool older = !segments_.empty();
      if (older) EvictOldest();
      mu_.Unlock();
      if (!older) break;
      UnlinkRemoved();  // the space comes back with the unlink (and its last reader)
      ++evicted;
    }
  }
  uint64_t removals = 0;
  if (made.ok()) {
    {
      MutexLock lock(mu_);
      removals = unlinked_;
    }
    // The new file's name, and the evictions before it, durable before anything is written
    // there (a record in a file whose name a power loss takes is lost with it).
    made = folder_->SyncDir();
  }
  if (!made.ok() && file.ok()) {
    file->reset();
    (void)folder_->Remove(number);  // an empty file, if a power loss brings it back
  }
  mu_.Lock();
  if (evicted > 0) {
    log::Warn(
        "disk tier: the disk was full: {} of the tier's oldest segments evicted to make "
        "room for {}",
        evicted, folder_->PathOf(number));
  }
  if (!made.ok()) {
    ++stats_.write_errors;
    return made.WithContext("starting a disk segment");
  }
  synced_removals_ = std::max(synced_removals_, removals);
  auto segment = std::make_shared<Segment>();
  segment->number = number;
  segment->file = std::move(file).value();
  segment->writer = std::make_unique<SegmentWriter>(segment->file.get(), options_.segment_bytes, 0);
  if (!segments_.empty()) segments_.rbegin()->second->writer = nullptr;  // no longer written
  segments_[number] = std::move(segment);
  return Status::Ok();
}

Result<std::pair<std::shared_ptr<DiskTier::Segment>, uint64_t>> DiskTier::Append(
    std::span<const DiskRecord> records) {
  uint64_t bytes = 0;
  for (const DiskRecord& r : records)
    bytes += DiskRecordBytes(r.ns.size(), r.key.size(), r.meta.size(), r.value.size());
  if (bytes > options_.segment_bytes) {
    return Status::NoSpace(fmt::format("a record of {} bytes does not fit in a segment of {}",
                                       bytes, options_.segment_bytes));
  }
  if (segments_.empty() || segments_.rbegin()->second->writer == nullptr ||
      segments_.rbegin()->second->writer->end() + bytes > options_.segment_bytes) {
    KVPORT_RETURN_IF_ERROR(StartSegment());
  }
  std::shared_ptr<Segment> segment = segments_.rbegin()->second;
  const uint64_t end = segment->end;
  // The write without mu_, so that reads of the index never wait for the disk; append_mu_ keeps
  // every other appender (and so the segment's writer and end) out meanwhile.
  mu_.Unlock();
  Result<uint64_t> offset = segment->writer->AppendAll(records);
  // What part of a failed write reached the file goes (best effort: a restart would cut it
  // off).
  if (!offset.ok()) (void)segment->file->Truncate(end);
  mu_.Lock();
  if (!offset.ok()) {
    ++stats_.write_errors;
    return offset.status();
  }
  disk_bytes_ += segment->writer->end() - segment->end;
  segment->end = segment->writer->end();
  return std::make_pair(std::move(segment), *offset);
}

Status DiskTier::Put(std::string_view ns, std::string_view key, std::string_view meta,
                     std::span<const char> value, uint64_t expiry_ms, uint64_t sequence,
                     uint64_t checksum) {
  const DiskPut put{ns, key, meta, value, expiry_ms, sequence, checksum};
  return PutMany({&put, 1})[0];
}

std::vector<Status> DiskTier::PutMany(std::span<const DiskPut> puts) {
  auto record_bytes = [](const DiskPut& p) {
    return DiskRecordBytes(p.ns.size(), p.key.size(), p.meta.size(), p.value.size());
  };
  std::vector<Status> statuses(puts.size(), Status::Ok());
  std::vector<DiskRecord> run;
  MutexLock append(append_mu_);
  MutexLock lock(mu_);
  for (size_t i = 0; i < puts.size();) {
    if (record_bytes(puts[i]) > options_.segment_bytes) {
      statuses[i] =
          Status::NoSpace(fmt::format("a record of {} bytes does not fit in a segment of {}",
                                      record_bytes(puts[i]), options_.segment_bytes));
      ++i;
      continue;
    }
    // A run: from puts[i], what fits in the newest segment's room (a fresh segment's when not
    // even puts[i] does), written in one call.
    uint64_t room = 0;
    if (!segments_.empty() && segments_.rbegin()->second->writer != nullptr) {
      room = options_.segment_bytes - segments_.rbegin()->second->writer->end();
    }
    if (record_bytes(puts[i]) > room) room = options_.segment_bytes;
    run.clear();
    uint64_t bytes = 0;
    size_t j = i;
    for (; j < puts.size() && bytes + record_bytes(puts[j]) <= room; ++j) {
      const DiskPut& p = puts[j];
      DiskRecord record;
      record.sequence = p.sequence;
      record.expiry_ms = p.expiry_ms;
      record.ns = p.ns;
      record.key = p.key;
      record.meta = p.meta;
      record.value = std::string_view(p.value.data(), p.value.size());
      // The writer's checksum, or one computed here once (the index keeps it too).
      record.value_checksum =
          p.checksum != 0 ? p.checksum : XXH3_64bits(p.value.data(), p.value.size());
      run.push_back(record);
      bytes += record_bytes(p);
    }
    Result<std::pair<std::shared_ptr<Segment>, uint64_t>> placed = Append(run);
    if (!placed.ok()) {
      for (size_t k = i; k < j; ++k)
        statuses[k] = placed.status();
      i = j;
      continue;
    }
    uint64_t offset = placed->second;
    for (size_t k = i; k < j; ++k) {
      const DiskPut& p = puts[k];
      ScannedRecord scanned;
      scanned.offset = offset;
      DiskRecordHeader& h = scanned.header;
      h.sequence = p.sequence;
      h.record_bytes = record_bytes(p);
      h.expiry_ms = p.expiry_ms;
      h.value_bytes = p.value.size();
      h.value_checksum = run[k - i].value_checksum;
      h.names_bytes = static_cast<uint32_t>(p.ns.size() + p.key.size() + p.meta.size());
      h.ns = p.ns;
      h.key = p.key;
      h.meta = p.meta;
      offset += h.record_bytes;
      last_sequence_ = std::max(last_sequence_, p.sequence);
      std::string id = ObjectId(p.ns, p.key);
      // A newer version got here first: this record is dead from the start (a restart sees the
      // same: the higher sequence wins).
      if (auto it = index_.find(id);
          it != index_.end() && it->second.record.header.sequence > p.sequence) {
        continue;
      }
      Index(std::move(id), placed->first, std::move(scanned));
    }
    i = j;
  }
  return statuses;
}

Result<DiskEntry> DiskTier::Find(std::string_view ns, std::string_view key, uint64_t now_ms) const {
  MutexLock lock(mu_);
  auto it = index_.find(ObjectId(ns, key));
  if (it == index_.end()) return Status::NotFound("not on disk");
  const DiskRecordHeader& h = it->second.record.header;
  if (h.expiry_ms != 0 && h.expiry_ms <= now_ms) return Status::NotFound("expired on disk");
  return DiskEntry{h.meta, h.expiry_ms, h.value_bytes, h.sequence, h.value_checksum};
}

Status DiskTier::ReadValue(std::string_view ns, std::string_view key, uint64_t sequence,
                           std::span<char> out) {
  const std::string id = ObjectId(ns, key);
  Entry entry;
  {
    MutexLock lock(mu_);
    auto it = index_.find(id);
    if (it == index_.end() || it->second.record.header.sequence != sequence) {
      return Status::NotFound("that version is no longer on disk");
    }
    entry = it->second;
  }
  if (out.size() < entry.record.header.value_bytes) {
    return Status::InvalidArgument(fmt::format("a value of {} bytes read into {}",
                                               entry.record.header.value_bytes, out.size()));
  }
  Status read = ReadRecordValue(*entry.segment->file, entry.record, out);
  if (read.ok()) return read;
  {
    MutexLock lock(mu_);
    auto it = index_.find(id);
    if (it != index_.end() && it->second.record.header.sequence == sequence) Drop(id, entry, read);
  }
  KillDropped();
  return Status::NotFound("dropped from disk: " + read.message());
}

Result<DiskObject> DiskTier::Get(std::string_view ns, std::string_view key, uint64_t now_ms) {
  {
    MutexLock lock(mu_);
    const std::string id = ObjectId(ns, key);
    auto it = index_.find(id);
    const uint64_t expiry = it == index_.end() ? 0 : it->second.record.header.expiry_ms;
    if (expiry != 0 && expiry <= now_ms) {
      Forget(id);  // its record stays until its segment goes; a restart skips it too
      return Status::NotFound("expired on disk");
    }
  }
  KVPORT_ASSIGN_OR_RETURN(DiskEntry entry, Find(ns, key, now_ms));
  DiskObject object;
  object.meta = std::move(entry.meta);
  object.expiry_ms = entry.expiry_ms;
  object.sequence = entry.sequence;
  object.value_checksum = entry.value_checksum;
  object.value.resize(entry.value_bytes);
  KVPORT_RETURN_IF_ERROR(ReadValue(ns, key, entry.sequence, object.value));
  return object;
}

bool DiskTier::Contains(std::string_view ns, std::string_view key, uint64_t now_ms,
                        uint64_t* value_bytes, uint64_t* meta_bytes) const {
  MutexLock lock(mu_);
  auto it = index_.find(ObjectId(ns, key));
  if (it == index_.end()) return false;
  const DiskRecordHeader& h = it->second.record.header;
  if (h.expiry_ms != 0 && h.expiry_ms <= now_ms) return false;
  if (value_bytes != nullptr) *value_bytes = h.value_bytes;
  if (meta_bytes != nullptr) *meta_bytes = h.meta.size();
  return true;
}

std::vector<std::string> DiskTier::KeysOf(std::string_view ns) const {
  MutexLock lock(mu_);
  std::vector<std::string> keys;
  for (const auto& [id, entry] : index_) {
    if (entry.record.header.ns == ns) keys.push_back(entry.record.header.key);
  }
  return keys;
}

bool DiskTier::Holds(std::string_view ns, std::string_view key, uint64_t sequence) const {
  MutexLock lock(mu_);
  auto it = index_.find(ObjectId(ns, key));
  return it != index_.end() && it->second.record.header.sequence == sequence;
}

std::vector<std::string> DiskTier::NamespacesOf(std::string_view key, uint64_t now_ms) const {
  MutexLock lock(mu_);
  std::vector<std::string> live;
  auto it = namespaces_of_.find(std::string(key));
  if (it == namespaces_of_.end()) return live;
  for (const std::string& ns : it->second) {
    const auto entry = index_.find(ObjectId(ns, key));
    if (entry == index_.end()) continue;  // never: the two maps change together
    const uint64_t expiry = entry->second.record.header.expiry_ms;
    if (expiry == 0 || expiry > now_ms) live.push_back(ns);
  }
  return live;
}

Status DiskTier::Erase(std::string_view ns, std::string_view key, uint64_t sequence) {
  const DiskErase erase{ns, key, sequence};
  return EraseMany({&erase, 1})[0];
}

std::vector<Status> DiskTier::EraseMany(std::span<const DiskErase> erases) {
  std::vector<Status> statuses(erases.size(), Status::Ok());
  MutexLock append(append_mu_);
  MutexLock lock(mu_);
  // The versions each erase ends, forgotten by the index now (every reader stops seeing them),
  // and their tombstones.
  struct Ending {
    size_t erase;  // index into `erases`
    Entry ended;
  };
  std::vector<Ending> endings;
  std::vector<DiskRecord> tombstones;
  for (size_t i = 0; i < erases.size(); ++i) {
    const DiskErase& e = erases[i];
    const std::string id = ObjectId(e.ns, e.key);
    auto it = index_.find(id);
    if (it == index_.end() || it->second.record.header.sequence >= e.sequence) continue;
    endings.push_back({i, it->second});
    Forget(id);
    last_sequence_ = std::max(last_sequence_, e.sequence);
    DiskRecord tombstone;
    tombstone.tombstone = true;
    tombstone.sequence = e.sequence;
    tombstone.ns = e.ns;
    tombstone.key = e.key;
    tombstones.push_back(tombstone);
  }
  // Appended in runs that fit a segment (nearly always one), then each segment written to is
  // synced once: durable before the changes they record are acknowledged, since after a power
  // loss an ended version must not be back (a lost put is only a miss; a lost tombstone is a
  // wrong answer).
  const auto bytes_of = [](const DiskRecord& r) {
    return DiskRecordBytes(r.ns.size(), r.key.size(), 0, 0);
  };
  std::vector<std::shared_ptr<Segment>> placed_in(endings.size());
  for (size_t i = 0; i < tombstones.size();) {
    uint64_t room = 0;
    if (!segments_.empty() && segments_.rbegin()->second->writer != nullptr) {
      room = options_.segment_bytes - segments_.rbegin()->second->writer->end();
    }
    if (bytes_of(tombstones[i]) > room) room = options_.segment_bytes;
    size_t j = i;
    for (uint64_t bytes = 0; j < tombstones.size() && bytes + bytes_of(tombstones[j]) <= room; ++j)
      bytes += bytes_of(tombstones[j]);
    Result<std::pair<std::shared_ptr<Segment>, uint64_t>> placed =
        Append(std::span<const DiskRecord>(tombstones).subspan(i, j - i));
    for (size_t k = i; k < j; ++k) {
      if (placed.ok()) {
        placed->first->tombstone_bytes += bytes_of(tombstones[k]);
        placed_in[k] = placed->first;
      } else {
        statuses[endings[k].erase] = placed.status();
      }
    }
    i = j;
  }
  std::vector<std::shared_ptr<Segment>> to_sync;
  for (const std::shared_ptr<Segment>& segment : placed_in) {
    if (segment != nullptr && std::find(to_sync.begin(), to_sync.end(), segment) == to_sync.end())
      to_sync.push_back(segment);
  }
  // Synced and killed without mu_, as Append writes.
  mu_.Unlock();
  uint64_t failed_syncs = 0;  // (a failed append is counted by Append)
  for (const std::shared_ptr<Segment>& segment : to_sync) {
    const Status synced = segment->file->Sync();
    if (synced.ok()) continue;
    ++failed_syncs;
    for (size_t k = 0; k < endings.size(); ++k) {
      if (placed_in[k] != segment) continue;
      statuses[endings[k].erase] = synced.WithContext(
          "the tombstone of a replaced or deleted version was not synced, so a power loss may "
          "bring that version back");
    }
  }
  // No room for a tombstone (or its write failed): the ended record is killed where it lies,
  // which takes no new block. Older records of the key are below it, so its kill ends them too.
  std::vector<bool> killed(endings.size(), false);
  for (size_t k = 0; k < endings.size(); ++k) {
    if (placed_in[k] != nullptr) continue;
    Status& status = statuses[endings[k].erase];
    const Entry& ended = endings[k].ended;
    const Status kill = KillRecord(*ended.segment->file, ended.record.offset);
    if (kill.ok()) {
      killed[k] = true;
      status = Status::Ok();
    } else {
      status = status.WithContext(
          "neither a tombstone nor a kill in place (" + kill.ToString() +
          ") could be written, so the replaced or deleted version may come back at a restart");
    }
  }
  mu_.Lock();
  stats_.write_errors += failed_syncs;
  for (size_t k = 0; k < endings.size(); ++k) {
    if (!killed[k]) continue;
    ++stats_.killed_records;
    endings[k].ended.segment->tombstone_bytes += endings[k].ended.record.header.record_bytes;
  }
  return statuses;
}

uint64_t DiskTier::last_sequence() const {
  MutexLock lock(mu_);
  return last_sequence_;
}

bool DiskTier::RoomWithoutEviction(uint64_t bytes) const {
  if (!segments_.empty()) {
    const Segment& newest = *segments_.rbegin()->second;
    if (newest.writer != nullptr && newest.writer->end() + bytes <= options_.segment_bytes) {
      return true;
    }
  }
  return segments_.size() < options_.capacity_bytes / options_.segment_bytes;
}

std::shared_ptr<DiskTier::Segment> DiskTier::PickCompaction() const {
  std::shared_ptr<Segment> best;
  double best_fraction = kCompactBelowFraction;
  for (const auto& [number, segment] : segments_) {
    if (segment->writer != nullptr) continue;  // being written
    // The oldest segment's tombstones are not copied: nothing older is left for them to hide.
    const bool oldest = number == segments_.begin()->first;
    const uint64_t needed = segment->live_bytes + (oldest ? 0 : segment->tombstone_bytes);
    const double fraction =
        segment->end == 0 ? 0.0 : static_cast<double>(needed) / static_cast<double>(segment->end);
    if (fraction < best_fraction) {  // strictly: of equals, the oldest
      best = segment;
      best_fraction = fraction;
    }
  }
  return best;
}

Status DiskTier::StartCompaction(uint64_t now_ms) {
  std::shared_ptr<Segment> segment;
  uint64_t end = 0;
  {
    MutexLock lock(mu_);
    segment = PickCompaction();
    if (segment == nullptr) return Status::Ok();
    end = segment->end;
  }
  // A sealed segment's bytes no longer change, so its headers are read without the lock; up to
  // its end only (a torn tail after it was never trusted).
  Result<SegmentScan> scan = ScanSegment(*segment->file, end);
  if (!scan.ok()) {
    return scan.status().WithContext("compacting " + folder_->PathOf(segment->number));
  }
  MutexLock lock(mu_);
  if (!Holds(segment)) return Status::Ok();  // evicted meanwhile
  std::vector<CompactionItem> items;
  uint64_t heap = 0;
  for (const ScannedRecord& record : scan->records) {
    const DiskRecordHeader& h = record.header;
    std::string id = ObjectId(h.ns, h.key);
    if (!h.tombstone) {
      auto it = index_.find(id);
      if (it == index_.end() || it->second.segment != segment ||
          it->second.record.offset != record.offset ||
          it->second.record.header.sequence != h.sequence) {
        continue;  // dead: overwritten, deleted, dropped or evicted
      }
      if (h.expiry_ms != 0 && h.expiry_ms <= now_ms) {
        Forget(id);  // it would be a miss, and a restart skips it: not worth a copy
        continue;
      }
    }
    heap += StringHeap(id.size());
    items.push_back({std::move(id), record.offset, h.record_bytes, h.sequence, h.tombstone});
  }
  compaction_heap_bytes_ = heap + items.capacity() * sizeof(CompactionItem);
  compaction_.segment = std::move(segment);
  compaction_.items = std::move(items);
  compaction_.next = 0;
  compaction_.targets.clear();
  return Status::Ok();
}

void DiskTier::EndCompaction() {
  compaction_ = Compaction();
  MutexLock lock(mu_);
  compaction_heap_bytes_ = 0;
}

Result<DiskTier::Copied> DiskTier::CopyForward(const CompactionItem& item, uint64_t now_ms,
                                               std::vector<char>& buffer) {
  const std::shared_ptr<Segment>& from = compaction_.segment;
  // Read and checked without the lock; whether it is still worth copying is decided with it.
  DiskRecordHeader h;
  const Status read =
      ReadWholeRecord(*from->file, item.offset, item.record_bytes, item.sequence, buffer, &h);
  MutexLock append(append_mu_);
  MutexLock lock(mu_);
  if (!Holds(from)) return Copied::kSegmentGone;
  auto it = index_.find(item.id);
  const bool live = it != index_.end() && it->second.segment == from &&
                    it->second.record.offset == item.offset &&
                    it->second.record.header.sequence == item.sequence;
  if (!item.tombstone && !live) return Copied::kSkipped;  // a put or a delete won meanwhile
  if (!read.ok()) {
    // Never copied: a copy would carry the damage. A live record goes as a get would drop it; a
    // tombstone that does not check out would not be believed at a restart either.
    if (live) {
      Drop(item.id, it->second, read.WithContext("compacting"));
    } else {
      ++stats_.dropped_records;
    }
    return Copied::kSkipped;
  }
  if (item.tombstone) {
    // It hides older records of its key; those can only be in this segment or older ones.
    // Dropped only when none is left, durably: a removed segment's name comes back after a
    // power loss until the folder is synced, and its records with it.
    if (segments_.begin()->first >= from->number && synced_removals_ == removals_) {
      return Copied::kSkipped;
    }
  } else if (h.expiry_ms != 0 && h.expiry_ms <= now_ms) {
    Forget(item.id);
    return Copied::kSkipped;
  }
  if (!RoomWithoutEviction(item.record_bytes)) return Copied::kNoRoom;
  DiskRecord record;
  record.sequence = h.sequence;  // its own: a newer record of the key elsewhere still wins
  record.expiry_ms = h.expiry_ms;
  record.ns = h.ns;
  record.key = h.key;
  record.tombstone = h.tombstone;
  if (!h.tombstone) {  // a killed record moves as the plain tombstone it counts as
    record.meta = h.meta;
    record.value = std::string_view(buffer.data() + h.value_offset(), h.value_bytes);
    record.value_checksum = h.value_checksum;  // checked above: not computed again
  }
  const uint64_t copied_bytes =
      DiskRecordBytes(record.ns.size(), record.key.size(), record.meta.size(), record.value.size());
  KVPORT_ASSIGN_OR_RETURN(auto placed, Append({&record, 1}));
  stats_.compacted_bytes += copied_bytes;
  if (std::find(compaction_.targets.begin(), compaction_.targets.end(), placed.first) ==
      compaction_.targets.end()) {
    compaction_.targets.push_back(placed.first);
  }
  if (item.tombstone) {
    placed.first->tombstone_bytes += copied_bytes;
  } else {
    ScannedRecord scanned;
    scanned.offset = placed.second;
    scanned.header = std::move(h);
    Index(item.id, std::move(placed.first), std::move(scanned));
  }
  return Copied::kMoved;
}

Result<CompactionProgress> DiskTier::CompactStep(uint64_t max_bytes, uint64_t now_ms) {
  MutexLock compact_lock(compact_mu_);
  CompactionProgress progress;
  // Removals durable first, so that the tombstones of a segment with nothing older left can be
  // dropped (CopyForward carries them forward otherwise).
  if (Status synced = SyncRemovals(); !synced.ok()) {
    log::Warn("disk tier: syncing the folder before compaction: {}", synced.ToString());
  }
  if (compaction_.segment == nullptr) {
    KVPORT_RETURN_IF_ERROR(StartCompaction(now_ms));
    if (compaction_.segment == nullptr) return progress;  // nothing worth compacting
  }
  std::vector<char> buffer;
  while (compaction_.next < compaction_.items.size()) {
    if (progress.moved_bytes > 0 && progress.moved_bytes >= max_bytes) {
      progress.more = true;
      return progress;
    }
    KVPORT_ASSIGN_OR_RETURN(Copied copied,
                            CopyForward(compaction_.items[compaction_.next], now_ms, buffer));
    KillDropped();  // what the copy found damaged
    switch (copied) {
      case Copied::kMoved:
        progress.moved_bytes += compaction_.items[compaction_.next].record_bytes;
        ++compaction_.next;
        break;
      case Copied::kSkipped:
        ++compaction_.next;
        break;
      case Copied::kNoRoom:
        return progress;
      case Copied::kSegmentGone: {
        // Evicted meanwhile, with what was not copied yet: as without compaction.
        EndCompaction();
        MutexLock lock(mu_);
        progress.more = PickCompaction() != nullptr;
        return progress;
      }
    }
  }
  // Every record is in its new place: make the copies durable before the originals go, or a
  // power cut could lose both. (A failed sync is retried by the next step, nothing recopied.)
  for (const std::shared_ptr<Segment>& target : compaction_.targets) {
    KVPORT_RETURN_IF_ERROR(target->file->Sync());
  }
  const std::shared_ptr<Segment> done = compaction_.segment;
  EndCompaction();
  {
    MutexLock lock(mu_);
    if (Holds(done)) {
      // Nothing should point here any more; what does was past a header that stopped the scan
      // (damaged since the restart), so it goes as a damaged record does.
      const uint64_t lost = RemoveSegment(done);
      if (lost > 0) {
        stats_.dropped_records += lost;
        log::Warn("disk tier: compacting {}: {} records past a damaged header dropped",
                  folder_->PathOf(done->number), lost);
      }
      ++stats_.compacted_segments;
      progress.finished_segment = true;
    }
    progress.more = PickCompaction() != nullptr;
  }
  // The removal made durable, without mu_.
  if (Status synced = SyncRemovals(); !synced.ok()) {
    log::Warn("disk tier: syncing the folder after compaction: {}", synced.ToString());
  }
  return progress;
}

DiskTierStats DiskTier::stats() const {
  MutexLock lock(mu_);
  DiskTierStats s = stats_;
  s.objects = index_.size();
  s.segments = segments_.size();
  s.disk_bytes = disk_bytes_;
  s.index_bytes =
      entries_heap_bytes_ + compaction_heap_bytes_ + index_.bucket_count() * sizeof(void*);
  for (const auto& [number, segment] : segments_) {
    s.index_bytes += HeapBlock(sizeof(Segment)) + HeapBlock(sizeof(*segments_.begin()) + 32) +
                     segment->ids.capacity() * sizeof(std::string) + segment->ids_heap_bytes;
  }
  return s;
}

}  // namespace kvport::store
