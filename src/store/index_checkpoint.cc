// SPDX-License-Identifier: Apache-2.0
#include "store/index_checkpoint.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "store/disk_record.h"

namespace kvport::store {
namespace {

constexpr char kMagic[8] = {'K', 'V', 'P', 'C', 'H', 'K', 'P', 'T'};
constexpr size_t kHeaderBytes = 64;
constexpr size_t kSegmentBytes = 32;
constexpr size_t kEntryBytes = 64;
constexpr size_t kTrailerBytes = 8;
constexpr size_t kBufferBytes = 1 << 20;  // a multiple of kFileAlign: whole blocks go direct

// The hosts kvport runs on are little-endian (as disk records assume).
template <typename T>
void Put(char* out, size_t at, T v) {
  std::memcpy(out + at, &v, sizeof(v));
}
template <typename T>
T Get(const char* in, size_t at) {
  T v{};
  std::memcpy(&v, in + at, sizeof(v));
  return v;
}

Status Bad(std::string what) {
  return Status::Corruption("the index checkpoint " + std::move(what));
}

// Reads a checkpoint file front to back through a buffer, hashing what it hands out.
class CheckpointReader {
 public:
  CheckpointReader(File& file, uint64_t size)
      : file_(file), size_(size), hash_(XXH3_createState()) {
    XXH3_64bits_reset(hash_.get());
  }
  ~CheckpointReader() = default;

  // The file's bytes not handed out yet.
  uint64_t left() const { return size_ - taken_; }

  // The next `bytes` bytes, valid until the next call; hashed unless told otherwise. Corruption
  // when the file ends first (callers bound `bytes` by left() before asking).
  Result<const char*> Take(size_t bytes, const char* what, bool hashed = true) {
    if (bytes > left()) return Bad(fmt::format("ends inside {}", what));
    if (end_ - pos_ < bytes) {
      if (end_ > pos_) std::memmove(buffer_.data(), buffer_.data() + pos_, end_ - pos_);
      end_ -= pos_;
      pos_ = 0;
      if (buffer_.size() < std::max(bytes, kBufferBytes))
        buffer_.resize(std::max(bytes, kBufferBytes));
      while (end_ < bytes) {
        const size_t want =
            static_cast<size_t>(std::min<uint64_t>(buffer_.size() - end_, size_ - read_));
        if (want == 0) return Bad(fmt::format("ends inside {}", what));
        KVPORT_ASSIGN_OR_RETURN(size_t got, file_.ReadAt(read_, buffer_.data() + end_, want));
        if (got == 0) return Bad(fmt::format("ends inside {} (the file shrank)", what));
        read_ += got;
        end_ += got;
      }
    }
    const char* at = buffer_.data() + pos_;
    pos_ += bytes;
    taken_ += bytes;
    if (hashed) XXH3_64bits_update(hash_.get(), at, bytes);
    return at;
  }

  uint64_t digest() const { return XXH3_64bits_digest(hash_.get()); }

 private:
  struct FreeHash {
    void operator()(XXH3_state_t* state) const { XXH3_freeState(state); }
  };
  File& file_;
  const uint64_t size_;
  uint64_t read_ = 0;   // bytes read from the file
  uint64_t taken_ = 0;  // bytes handed out
  FileAlignedBytes buffer_;
  size_t pos_ = 0;  // buffer_[pos_, end_) read, not handed out
  size_t end_ = 0;
  std::unique_ptr<XXH3_state_t, FreeHash> hash_;
};

}  // namespace

CheckpointWriter::CheckpointWriter(File* file) : file_(file), hash_(XXH3_createState()) {
  XXH3_64bits_reset(hash_.get());
  buffer_.reserve(kBufferBytes);
}

void CheckpointWriter::Append(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0 && failed_.ok()) {
    const size_t n = std::min(bytes, kBufferBytes - buffer_.size());
    buffer_.insert(buffer_.end(), p, p + n);
    p += n;
    bytes -= n;
    if (buffer_.size() == kBufferBytes) failed_ = Flush();
  }
}

Status CheckpointWriter::Flush() {
  if (buffer_.empty()) return Status::Ok();
  // Hashed a buffer at a time: far cheaper than a streaming update per field.
  XXH3_64bits_update(hash_.get(), buffer_.data(), buffer_.size());
  KVPORT_RETURN_IF_ERROR(file_->WriteAt(offset_, buffer_.data(), buffer_.size()));
  offset_ += buffer_.size();
  buffer_.clear();
  return Status::Ok();
}

Status CheckpointWriter::Begin(const CheckpointHeader& header) {
  if (header.stamp == 0) return Status::InvalidArgument("a checkpoint's stamp is never 0");
  header_ = header;
  char out[kHeaderBytes] = {};
  std::memcpy(out, kMagic, sizeof(kMagic));
  Put<uint32_t>(out, 8, kCheckpointVersion);
  Put<uint32_t>(out, 12, header.stamp);
  Put<uint64_t>(out, 16, header.segment_bytes);
  Put<uint64_t>(out, 24, header.last_sequence);
  Put<uint64_t>(out, 32, header.next_segment);
  Put<uint64_t>(out, 40, header.segment_count);
  Put<uint64_t>(out, 48, header.entry_count);
  Append(out, sizeof(out));
  return failed_;
}

Status CheckpointWriter::AddSegment(const CheckpointSegment& segment) {
  if (++segments_ > header_.segment_count || entries_ > 0) {
    return Status::InvalidArgument("a checkpoint segment past its count, or after an entry");
  }
  char out[kSegmentBytes];
  Put<uint64_t>(out, 0, segment.number);
  Put<uint64_t>(out, 8, segment.end);
  Put<uint64_t>(out, 16, segment.file_bytes);
  Put<uint64_t>(out, 24, segment.tombstone_bytes);
  Append(out, sizeof(out));
  return failed_;
}

Status CheckpointWriter::AddEntry(uint64_t segment, const ScannedRecord& record) {
  const DiskRecordHeader& h = record.header;
  if (++entries_ > header_.entry_count || segments_ != header_.segment_count) {
    return Status::InvalidArgument("a checkpoint entry past its count, or before the segments");
  }
  if (h.tombstone || h.ns.size() > kMaxRecordNamespaceBytes || h.key.size() > kMaxRecordKeyBytes ||
      h.meta.size() > kMaxRecordMetaBytes) {
    return Status::InvalidArgument("a tombstone, or names over the record format's bounds");
  }
  char out[kEntryBytes] = {};
  Put<uint64_t>(out, 0, segment);
  Put<uint64_t>(out, 8, record.offset);
  Put<uint64_t>(out, 16, h.sequence);
  Put<uint64_t>(out, 24, h.expiry_ms);
  Put<uint64_t>(out, 32, h.value_bytes);
  Put<uint64_t>(out, 40, h.value_checksum);
  Put<uint32_t>(out, 48, static_cast<uint32_t>(h.meta.size()));
  Put<uint32_t>(out, 52, static_cast<uint32_t>(h.key.size()));
  Put<uint16_t>(out, 56, static_cast<uint16_t>(h.ns.size()));
  Append(out, sizeof(out));
  Append(h.ns.data(), h.ns.size());
  Append(h.key.data(), h.key.size());
  Append(h.meta.data(), h.meta.size());
  return failed_;
}

Status CheckpointWriter::Finish() {
  KVPORT_RETURN_IF_ERROR(failed_);
  if (segments_ != header_.segment_count || entries_ != header_.entry_count) {
    return Status::InvalidArgument(
        fmt::format("a checkpoint of {} segments and {} entries given {} and {}",
                    header_.segment_count, header_.entry_count, segments_, entries_));
  }
  XXH3_64bits_update(hash_.get(), buffer_.data(), buffer_.size());
  const uint64_t digest = XXH3_64bits_digest(hash_.get());
  // The buffer is never full between calls: room for the checksum, written with the rest.
  const size_t at = buffer_.size();
  buffer_.resize(at + kTrailerBytes);
  Put<uint64_t>(buffer_.data(), at, digest);
  KVPORT_RETURN_IF_ERROR(file_->WriteAt(offset_, buffer_.data(), buffer_.size()));
  offset_ += buffer_.size();
  buffer_.clear();
  return Status::Ok();
}

Result<IndexCheckpoint> ReadCheckpoint(File& file) {
  KVPORT_ASSIGN_OR_RETURN(const uint64_t size, file.Size());
  CheckpointReader in(file, size);
  IndexCheckpoint checkpoint;
  CheckpointHeader& header = checkpoint.header;
  {
    if (size < kHeaderBytes + kTrailerBytes) {
      return Bad(fmt::format("is {} bytes, too short for one", size));
    }
    KVPORT_ASSIGN_OR_RETURN(const char* p, in.Take(kHeaderBytes, "its header"));
    if (std::memcmp(p, kMagic, sizeof(kMagic)) != 0) {
      return Bad("does not start with the magic \"KVPCHKPT\"");
    }
    const uint32_t version = Get<uint32_t>(p, 8);
    if (version > kCheckpointVersion) {
      return Status::NotSupported(
          fmt::format("index checkpoint format version {}, newer than this build's {}", version,
                      kCheckpointVersion));
    }
    if (version == 0) return Bad("has format version 0");
    header.stamp = Get<uint32_t>(p, 12);
    header.segment_bytes = Get<uint64_t>(p, 16);
    header.last_sequence = Get<uint64_t>(p, 24);
    header.next_segment = Get<uint64_t>(p, 32);
    header.segment_count = Get<uint64_t>(p, 40);
    header.entry_count = Get<uint64_t>(p, 48);
    if (header.stamp == 0 || Get<uint64_t>(p, 56) != 0)
      return Bad("header has a zero stamp or reserved bytes set");
    if (header.segment_bytes == 0 || header.segment_bytes % kDiskBlock != 0) {
      return Bad(fmt::format("names a segment size of {}", header.segment_bytes));
    }
    // Counts bounded by the bytes that could hold them before anything is reserved for them.
    const uint64_t body = in.left() - kTrailerBytes;
    if (header.segment_count > body / kSegmentBytes ||
        header.entry_count > (body - header.segment_count * kSegmentBytes) / kEntryBytes) {
      return Bad(fmt::format("counts {} segments and {} entries, more than its {} bytes hold",
                             header.segment_count, header.entry_count, size));
    }
  }
  checkpoint.segments.reserve(header.segment_count);
  for (uint64_t i = 0; i < header.segment_count; ++i) {
    KVPORT_ASSIGN_OR_RETURN(const char* p, in.Take(kSegmentBytes, "its segments"));
    CheckpointSegment s;
    s.number = Get<uint64_t>(p, 0);
    s.end = Get<uint64_t>(p, 8);
    s.file_bytes = Get<uint64_t>(p, 16);
    s.tombstone_bytes = Get<uint64_t>(p, 24);
    if (s.number == 0 || s.number >= header.next_segment ||
        (!checkpoint.segments.empty() && s.number <= checkpoint.segments.back().number)) {
      return Bad(fmt::format("lists segment {} out of order or out of range", s.number));
    }
    if (s.end > header.segment_bytes || s.end % kDiskBlock != 0 || s.end > s.file_bytes ||
        s.tombstone_bytes > s.end) {
      return Bad(fmt::format("gives segment {} an end of {}, a size of {} and {} tombstone bytes",
                             s.number, s.end, s.file_bytes, s.tombstone_bytes));
    }
    checkpoint.segments.push_back(s);
  }
  // Each entry costs at least kEntryBytes of the file, so this reservation is bounded by it.
  checkpoint.entries.reserve(header.entry_count);
  for (uint64_t i = 0; i < header.entry_count; ++i) {
    KVPORT_ASSIGN_OR_RETURN(const char* p, in.Take(kEntryBytes, "its entries"));
    CheckpointEntry entry;
    entry.segment = Get<uint64_t>(p, 0);
    ScannedRecord& record = entry.record;
    DiskRecordHeader& h = record.header;
    record.offset = Get<uint64_t>(p, 8);
    h.sequence = Get<uint64_t>(p, 16);
    h.expiry_ms = Get<uint64_t>(p, 24);
    h.value_bytes = Get<uint64_t>(p, 32);
    h.value_checksum = Get<uint64_t>(p, 40);
    const uint32_t meta_bytes = Get<uint32_t>(p, 48);
    const uint32_t key_bytes = Get<uint32_t>(p, 52);
    const uint16_t ns_bytes = Get<uint16_t>(p, 56);
    if (Get<uint16_t>(p, 58) != 0 || Get<uint32_t>(p, 60) != 0 || key_bytes == 0 ||
        key_bytes > kMaxRecordKeyBytes || meta_bytes > kMaxRecordMetaBytes ||
        ns_bytes > kMaxRecordNamespaceBytes) {
      return Bad(fmt::format("entry {} has names of lengths {}, {}, {} out of bounds", i, ns_bytes,
                             key_bytes, meta_bytes));
    }
    const auto segment = std::lower_bound(
        checkpoint.segments.begin(), checkpoint.segments.end(), entry.segment,
        [](const CheckpointSegment& s, uint64_t number) { return s.number < number; });
    if (segment == checkpoint.segments.end() || segment->number != entry.segment) {
      return Bad(
          fmt::format("entry {} is in segment {}, which it does not list", i, entry.segment));
    }
    if (h.value_bytes > header.segment_bytes) {
      return Bad(fmt::format("entry {} has a value of {} bytes", i, h.value_bytes));
    }
    h.names_bytes = ns_bytes + key_bytes + meta_bytes;
    h.record_bytes = DiskRecordBytes(ns_bytes, key_bytes, meta_bytes, h.value_bytes);
    if (record.offset % kDiskBlock != 0 || record.offset > segment->end ||
        h.record_bytes > segment->end - record.offset) {
      return Bad(fmt::format("entry {} ({} bytes at {}) is not inside segment {}'s {} bytes", i,
                             h.record_bytes, record.offset, entry.segment, segment->end));
    }
    if (h.sequence == 0 || h.sequence > header.last_sequence) {
      return Bad(fmt::format("entry {} has sequence {}, the last being {}", i, h.sequence,
                             header.last_sequence));
    }
    KVPORT_ASSIGN_OR_RETURN(const char* names, in.Take(h.names_bytes, "an entry's names"));
    h.ns.assign(names, ns_bytes);
    h.key.assign(names + ns_bytes, key_bytes);
    h.meta.assign(names + ns_bytes + key_bytes, meta_bytes);
    checkpoint.entries.push_back(std::move(entry));
  }
  const uint64_t computed = in.digest();
  KVPORT_ASSIGN_OR_RETURN(const char* p, in.Take(kTrailerBytes, "its checksum", /*hashed=*/false));
  const uint64_t stored = Get<uint64_t>(p, 0);
  if (stored != computed) {
    return Bad(fmt::format("fails its checksum (stored {:016x}, its bytes give {:016x})", stored,
                           computed));
  }
  if (in.left() != 0) return Bad(fmt::format("has {} bytes after its checksum", in.left()));
  return checkpoint;
}

}  // namespace kvport::store
