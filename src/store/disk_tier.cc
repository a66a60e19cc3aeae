// SPDX-License-Identifier: Apache-2.0
#include "store/disk_tier.h"

#include <fmt/core.h>
#include <xxhash.h>

#include <algorithm>
#include <utility>

#include "kvport/log.h"

namespace kvport::store {

struct DiskTier::Segment {
  uint64_t number = 0;
  std::unique_ptr<File> file;
  std::unique_ptr<SegmentWriter> writer;  // the newest segment's; null for older ones
  uint64_t end = 0;                       // bytes written (scanned, for a restored one)
  std::vector<std::string> ids;           // objects written here (some may have moved since)
};

std::string DiskObjectId(std::string_view ns, std::string_view key) {
  std::string id;
  id.reserve(ns.size() + 1 + key.size());
  id.append(ns);
  id.push_back('\0');
  id.append(key);
  return id;
}

DiskTier::DiskTier(std::unique_ptr<SegmentFolder> folder, const DiskTierOptions& options)
    : folder_(std::move(folder)), options_(options) {}

DiskTier::~DiskTier() = default;

Result<std::unique_ptr<DiskTier>> DiskTier::Open(std::unique_ptr<SegmentFolder> folder,
                                                 const DiskTierOptions& options, uint64_t now_ms) {
  if (options.segment_bytes < kDiskBlock || options.segment_bytes % kDiskBlock != 0) {
    return Status::InvalidArgument(
        fmt::format("disk segment size {} is not a positive multiple of {}", options.segment_bytes,
                    kDiskBlock));
  }
  if (options.capacity_bytes / options.segment_bytes < 2) {
    return Status::InvalidArgument(
        fmt::format("disk capacity {} holds fewer than two segments of {} bytes",
                    options.capacity_bytes, options.segment_bytes));
  }
  std::unique_ptr<DiskTier> tier(new DiskTier(std::move(folder), options));
  KVPORT_RETURN_IF_ERROR(tier->Restore(now_ms));
  return tier;
}

Status DiskTier::Restore(uint64_t now_ms) {
  KVPORT_ASSIGN_OR_RETURN(std::vector<uint64_t> numbers, folder_->List());
  struct Found {
    std::shared_ptr<Segment> segment;
    ScannedRecord record;
  };
  std::vector<Found> found;
  MutexLock lock(mu_);
  for (uint64_t number : numbers) {
    auto segment = std::make_shared<Segment>();
    segment->number = number;
    KVPORT_ASSIGN_OR_RETURN(segment->file, folder_->Open(number, /*create=*/false));
    Result<SegmentScan> scan = ScanSegment(*segment->file, options_.segment_bytes);
    if (!scan.ok()) return scan.status().WithContext("restoring " + folder_->PathOf(number));
    segment->end = scan->end;
    stats_.dropped_records += scan->dropped;
    if (scan->torn) {
      ++stats_.torn_tails;
      log::Warn("disk tier: {} ends in a torn record at byte {}: cut off there",
                folder_->PathOf(number), scan->end);
    }
    disk_bytes_ += segment->end;
    for (ScannedRecord& record : scan->records)
      found.push_back({segment, std::move(record)});
    segments_[number] = std::move(segment);
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return a.record.header.sequence < b.record.header.sequence;
  });
  for (Found& f : found) {
    const DiskRecordHeader& h = f.record.header;
    next_sequence_ = std::max(next_sequence_, h.sequence + 1);
    const std::string id = DiskObjectId(h.ns, h.key);
    Forget(id);  // superseded, deleted, or about to be replaced
    if (h.tombstone || (h.expiry_ms != 0 && h.expiry_ms <= now_ms)) continue;
    f.segment->ids.push_back(id);
    stats_.object_bytes += h.record_bytes;
    index_.emplace(id, Entry{f.segment, std::move(f.record)});
  }
  stats_.restored = index_.size();
  // Too many segments for the capacity (it was lowered): the oldest go.
  while (segments_.size() > options_.capacity_bytes / options_.segment_bytes)
    EvictOldest();
  if (!segments_.empty()) {
    Segment& newest = *segments_.rbegin()->second;
    // The next record goes where the scan stopped; a torn tail after it goes now, or every
    // restart would stop at what is left of it behind a shorter record.
    KVPORT_ASSIGN_OR_RETURN(uint64_t size, newest.file->Size());
    if (size > newest.end) {
      KVPORT_RETURN_IF_ERROR(newest.file->Truncate(newest.end));
    }
    newest.writer =
        std::make_unique<SegmentWriter>(newest.file.get(), options_.segment_bytes, newest.end);
  }
  return Status::Ok();
}

void DiskTier::Forget(const std::string& id) {
  auto it = index_.find(id);
  if (it == index_.end()) return;
  stats_.object_bytes -= it->second.record.header.record_bytes;
  index_.erase(it);
}

void DiskTier::EvictOldest() {
  auto oldest = segments_.begin();
  const std::shared_ptr<Segment> segment = oldest->second;
  segments_.erase(oldest);
  for (const std::string& id : segment->ids) {
    auto it = index_.find(id);
    if (it == index_.end() || it->second.segment != segment) continue;  // moved on, or gone
    Forget(id);
    ++stats_.evicted_objects;
  }
  disk_bytes_ -= segment->end;
  ++stats_.evicted_segments;
  // Readers holding the segment keep reading its (unlinked) file until they let it go.
  Status removed = folder_->Remove(segment->number);
  if (!removed.ok()) log::Warn("disk tier: evicting a segment: {}", removed.ToString());
}

Status DiskTier::StartSegment() {
  const uint64_t number = segments_.empty() ? 1 : segments_.rbegin()->first + 1;
  while (segments_.size() >= options_.capacity_bytes / options_.segment_bytes)
    EvictOldest();
  auto segment = std::make_shared<Segment>();
  segment->number = number;
  KVPORT_ASSIGN_OR_RETURN(segment->file, folder_->Open(number, /*create=*/true));
  segment->writer = std::make_unique<SegmentWriter>(segment->file.get(), options_.segment_bytes, 0);
  if (!segments_.empty()) segments_.rbegin()->second->writer = nullptr;  // no longer written
  segments_[number] = std::move(segment);
  return Status::Ok();
}

Result<std::pair<std::shared_ptr<DiskTier::Segment>, uint64_t>> DiskTier::Append(
    const DiskRecord& record) {
  const uint64_t bytes =
      DiskRecordBytes(record.ns.size(), record.key.size(), record.meta.size(), record.value.size());
  if (bytes > options_.segment_bytes) {
    return Status::NoSpace(fmt::format("a record of {} bytes does not fit in a segment of {}",
                                       bytes, options_.segment_bytes));
  }
  if (segments_.empty() || segments_.rbegin()->second->writer == nullptr ||
      segments_.rbegin()->second->writer->end() + bytes > options_.segment_bytes) {
    KVPORT_RETURN_IF_ERROR(StartSegment());
  }
  std::shared_ptr<Segment> segment = segments_.rbegin()->second;
  Result<uint64_t> offset = segment->writer->Append(record);
  if (!offset.ok()) {
    ++stats_.write_errors;
    // What part of the record reached the file goes (best effort: a restart would cut it off).
    (void)segment->file->Truncate(segment->end);
    return offset.status();
  }
  disk_bytes_ += segment->writer->end() - segment->end;
  segment->end = segment->writer->end();
  return std::make_pair(std::move(segment), *offset);
}

Status DiskTier::Put(std::string_view ns, std::string_view key, std::string_view meta,
                     std::span<const char> value, uint64_t expiry_ms) {
  MutexLock lock(mu_);
  DiskRecord record;
  record.sequence = next_sequence_;
  record.expiry_ms = expiry_ms;
  record.ns = ns;
  record.key = key;
  record.meta = meta;
  record.value = std::string_view(value.data(), value.size());
  KVPORT_ASSIGN_OR_RETURN(auto placed, Append(record));
  ++next_sequence_;
  ScannedRecord scanned;
  scanned.offset = placed.second;
  DiskRecordHeader& h = scanned.header;
  h.sequence = record.sequence;
  h.record_bytes = DiskRecordBytes(ns.size(), key.size(), meta.size(), value.size());
  h.expiry_ms = expiry_ms;
  h.value_bytes = value.size();
  h.value_checksum = XXH3_64bits(value.data(), value.size());
  h.names_bytes = static_cast<uint32_t>(ns.size() + key.size() + meta.size());
  h.ns = ns;
  h.key = key;
  h.meta = meta;
  std::string id = DiskObjectId(ns, key);
  Forget(id);
  placed.first->ids.push_back(id);
  stats_.object_bytes += h.record_bytes;
  index_.emplace(std::move(id), Entry{std::move(placed.first), std::move(scanned)});
  return Status::Ok();
}

Result<DiskObject> DiskTier::Get(std::string_view ns, std::string_view key, uint64_t now_ms) {
  const std::string id = DiskObjectId(ns, key);
  Entry entry;
  {
    MutexLock lock(mu_);
    auto it = index_.find(id);
    if (it == index_.end()) return Status::NotFound("not on disk");
    const uint64_t expiry = it->second.record.header.expiry_ms;
    if (expiry != 0 && expiry <= now_ms) {
      Forget(id);  // its record stays until its segment goes; a restart skips it too
      return Status::NotFound("expired on disk");
    }
    entry = it->second;
  }
  DiskObject object;
  object.meta = entry.record.header.meta;
  object.expiry_ms = entry.record.header.expiry_ms;
  object.value.resize(entry.record.header.value_bytes);
  Status read = ReadRecordValue(*entry.segment->file, entry.record, object.value);
  if (read.ok()) return object;
  MutexLock lock(mu_);
  auto it = index_.find(id);
  if (it != index_.end() && it->second.record.header.sequence == entry.record.header.sequence) {
    Forget(id);
  }
  if (read.code() == StatusCode::kCorruption) {
    ++stats_.dropped_records;
  } else {
    ++stats_.read_errors;
  }
  log::Warn("disk tier: {} of {}: {}: dropped", entry.record.offset,
            folder_->PathOf(entry.segment->number), read.ToString());
  return Status::NotFound("dropped from disk: " + read.message());
}

bool DiskTier::Contains(std::string_view ns, std::string_view key, uint64_t now_ms,
                        uint64_t* value_bytes) const {
  MutexLock lock(mu_);
  auto it = index_.find(DiskObjectId(ns, key));
  if (it == index_.end()) return false;
  const DiskRecordHeader& h = it->second.record.header;
  if (h.expiry_ms != 0 && h.expiry_ms <= now_ms) return false;
  if (value_bytes != nullptr) *value_bytes = h.value_bytes;
  return true;
}

Status DiskTier::Erase(std::string_view ns, std::string_view key) {
  MutexLock lock(mu_);
  const std::string id = DiskObjectId(ns, key);
  if (index_.find(id) == index_.end()) return Status::Ok();
  Forget(id);
  DiskRecord tombstone;
  tombstone.tombstone = true;
  tombstone.sequence = next_sequence_;
  tombstone.ns = ns;
  tombstone.key = key;
  Result<std::pair<std::shared_ptr<Segment>, uint64_t>> placed = Append(tombstone);
  if (!placed.ok()) {
    return placed.status().WithContext(
        "the delete's tombstone was not written, so the key may "
        "come back at a restart");
  }
  ++next_sequence_;
  return Status::Ok();
}

DiskTierStats DiskTier::stats() const {
  MutexLock lock(mu_);
  DiskTierStats s = stats_;
  s.objects = index_.size();
  s.segments = segments_.size();
  s.disk_bytes = disk_bytes_;
  return s;
}

}  // namespace kvport::store
