// SPDX-License-Identifier: Apache-2.0
#include "store/segment.h"

#include <algorithm>
#include <string>

namespace kvport::store {

Result<uint64_t> SegmentWriter::Append(const DiskRecord& record) {
  return AppendAll({&record, 1});
}

Result<uint64_t> SegmentWriter::AppendAll(std::span<const DiskRecord> records) {
  uint64_t bytes = 0;
  for (const DiskRecord& r : records)
    bytes += DiskRecordBytes(r.ns.size(), r.key.size(), r.meta.size(), r.value.size());
  if (bytes > segment_bytes_ - end_) {
    return Status::NoSpace("segment full: " + std::to_string(bytes) + " bytes do not fit in the " +
                           std::to_string(segment_bytes_ - end_) + " left");
  }
  buffer_.resize(bytes);
  uint64_t at = 0;
  for (const DiskRecord& r : records) {
    const uint64_t one = DiskRecordBytes(r.ns.size(), r.key.size(), r.meta.size(), r.value.size());
    KVPORT_RETURN_IF_ERROR(EncodeDiskRecord(r, std::span<char>(buffer_).subspan(at, one)));
    at += one;
  }
  KVPORT_RETURN_IF_ERROR(file_->WriteAt(end_, buffer_.data(), buffer_.size()));
  const uint64_t offset = end_;
  end_ += bytes;
  return offset;
}

namespace {

// Whether a block after the one at `offset`, before `limit`, starts with a valid fixed part
// (records start on block boundaries). Read 1 MiB at a time.
Result<bool> ValidFixedPartAfter(File& file, uint64_t offset, uint64_t limit) {
  constexpr uint64_t kChunk = uint64_t{1} << 20;
  FileAlignedBytes chunk(kChunk);
  DiskRecordHeader header;
  for (uint64_t at = offset + kDiskBlock; at + kFixedBytes <= limit; at += kChunk) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, limit - at));
    KVPORT_ASSIGN_OR_RETURN(const size_t got, file.ReadAt(at, chunk.data(), want));
    for (uint64_t block = 0; block + kFixedBytes <= got; block += kDiskBlock) {
      const std::span<const char> fixed(chunk.data() + block, kFixedBytes);
      if (ParseFixedPart(fixed, limit - at - block, &header) == FixedPart::kValid) return true;
    }
    if (got < want) break;
  }
  return false;
}

}  // namespace

Result<SegmentScan> ScanSegment(File& file, uint64_t segment_bytes) {
  SegmentScan scan;
  KVPORT_ASSIGN_OR_RETURN(uint64_t size, file.Size());
  const uint64_t limit = std::min(size, segment_bytes);
  // A record's first block holds its fixed part and, nearly always, its names: one read of it
  // each (an aligned one, straight into this buffer under O_DIRECT), a second only for longer
  // names.
  FileAlignedBytes block(kDiskBlock);
  std::vector<char> names;
  uint64_t offset = 0;
  while (offset + kFixedBytes <= limit) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kDiskBlock, limit - offset));
    KVPORT_ASSIGN_OR_RETURN(size_t got, file.ReadAt(offset, block.data(), want));
    const std::span<const char> fixed(block.data(), kFixedBytes);
    ScannedRecord record;
    record.offset = offset;
    const FixedPart part = got < kFixedBytes
                               ? FixedPart::kCorrupt
                               : ParseFixedPart(fixed, limit - offset, &record.header);
    if (part != FixedPart::kValid) {
      if (part == FixedPart::kCorrupt) {
        KVPORT_ASSIGN_OR_RETURN(const bool followed, ValidFixedPartAfter(file, offset, limit));
        (followed ? scan.damaged : scan.torn) = true;
      }
      break;
    }
    const size_t names_bytes = record.header.names_bytes;
    if (kFixedBytes + names_bytes <= got) {
      names.assign(block.data() + kFixedBytes, block.data() + kFixedBytes + names_bytes);
    } else {
      names.resize(names_bytes);
      KVPORT_ASSIGN_OR_RETURN(got, file.ReadAt(offset + kFixedBytes, names.data(), names.size()));
      if (got < names.size()) {
        scan.torn = true;
        break;
      }
    }
    if (ParseNames(fixed, names, &record.header).ok()) {
      offset += record.header.record_bytes;
      scan.records.push_back(std::move(record));
    } else {
      offset += record.header.record_bytes;  // trusted: its fixed part checked out
      ++scan.dropped;
    }
  }
  scan.end = offset;
  return scan;
}

Status KillRecord(File& file, uint64_t offset) {
  FileAlignedBytes block(kDiskBlock);  // aligned: an O_DIRECT file reads and writes it direct
  KVPORT_ASSIGN_OR_RETURN(size_t got, file.ReadAt(offset, block.data(), block.size()));
  if (got < kFixedBytes) return Status::Corruption("no record to kill: the file ends there");
  KVPORT_RETURN_IF_ERROR(KillFixedPart(std::span<char>(block.data(), kFixedBytes)));
  KVPORT_RETURN_IF_ERROR(file.WriteAt(offset, block.data(), got));
  return file.Sync();
}

Status ReadRecordValue(File& file, const ScannedRecord& record, std::span<char> out) {
  const DiskRecordHeader& h = record.header;
  if (out.size() < h.value_bytes) {
    return Status::InvalidArgument("a value of " + std::to_string(h.value_bytes) +
                                   " bytes read into " + std::to_string(out.size()));
  }
  // Whole blocks when `out` has room (the value starts on one, and its record ends on one):
  // an aligned `out` is then read into straight from the disk.
  const uint64_t whole = (h.value_bytes + kDiskBlock - 1) / kDiskBlock * kDiskBlock;
  const size_t want = static_cast<size_t>(out.size() >= whole ? whole : h.value_bytes);
  KVPORT_ASSIGN_OR_RETURN(size_t got,
                          file.ReadAt(record.offset + h.value_offset(), out.data(), want));
  if (got < h.value_bytes) {
    return Status::Corruption("disk record " + std::to_string(h.sequence) +
                              ": the file ends inside its value");
  }
  return CheckValue(h, out.first(h.value_bytes));
}

}  // namespace kvport::store
