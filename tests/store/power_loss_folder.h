// SPDX-License-Identifier: Apache-2.0
// A model of a power loss for the disk tier's folder (store/file_io.h), in the spirit of
// LevelDB's FaultInjectionTestEnv: a SegmentFolder over the real one that remembers what a
// power cut could still undo, and undoes it on demand.
//
// What it tracks, per the folder's contract: segments created and removed since the last
// SyncDir (a directory change is durable only after it), and per open file the size at its last
// Sync and the lowest offset written since (a write is durable only after the file's Sync).
// SimulatePowerLoss() then puts the real folder in a state the disk could be in after the cut:
// unsynced creates vanish, unsynced removals come back (each, or only those the caller names:
// a file system may persist any subset of the directory changes since the last sync), and
// every file is cut back to its size at its last Sync, what was written past its last synced
// point zeroed. From then on every call fails, as the process would be gone: the tier over it is
// destroyed (its destructor's writes fail) and a new one opened over a fresh real folder.
//
// The index checkpoint is modelled the same way: its temporary file's writes are durable only
// after its Sync, and its publication (the rename) and removal only after a SyncDir; a power
// loss leaves CHECKPOINT as the last SyncDir made it (an older checkpoint may come back).
//
// A kill -9 at a chosen point: CrashAtOperation(n) makes the n-th operation from the call that
// changes the folder or a file (a write, sync, truncate, reservation, create, remove, rename,
// superblock write) the process's last: a write is torn there (its first half lands, as a page
// cache may hold it), anything else does not happen, and every call from then on fails as above.
// What the killed process wrote stays (the kernel has it); SimulatePowerLoss after it models the
// power going too. operations() counts them since the wrap, for a run that finds how many a step
// takes. handle() keeps the model after the tier, which owns the folder, is gone (a crash in its
// stop, then a power loss).
//
// The superblock's writes go straight through (they are atomic and synced when they return);
// files already there when the folder is wrapped count as durable as they are.
#pragma once

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "store/file_io.h"

namespace kvport::store::testing {

class PowerLossFolder final : public SegmentFolder {
  struct State;

 public:
  explicit PowerLossFolder(std::unique_ptr<SegmentFolder> real)
      : real_(std::move(real)), state_(std::make_shared<State>()) {
    state_->checkpoint_path = CheckpointPath();
    if (std::filesystem::exists(CheckpointPath())) state_->checkpoint = ReadAll(CheckpointPath());
  }

  // The process dies at the n-th changing operation from now (1: the next one).
  void CrashAtOperation(uint64_t n) { state_->crash_at = state_->operations + n; }
  uint64_t operations() const { return state_->operations; }
  // Whether the process is gone (a crash point reached, or a power loss).
  bool dead() const { return state_->dead; }

  // How many removals a power loss now could undo (SimulatePowerLoss's mask has a bit for each,
  // in the order they were made).
  size_t UnsyncedRemovals() const { return state_->removed.size(); }
  size_t UnsyncedCreates() const { return state_->created.size(); }

  // The power cut. Bit i of `returning` set: the i-th unsynced removal comes back (all by
  // default).
  void SimulatePowerLoss(uint64_t returning = ~uint64_t{0}) { PowerLoss(*state_, returning); }

  // The model without the folder, which the tier owns and destroys at its stop: for a test that
  // crashes a stop and then cuts the power.
  class Handle {
   public:
    bool dead() const { return state_->dead; }
    uint64_t operations() const { return state_->operations; }
    void SimulatePowerLoss(uint64_t returning = ~uint64_t{0}) { PowerLoss(*state_, returning); }

   private:
    friend class PowerLossFolder;
    explicit Handle(std::shared_ptr<State> state) : state_(std::move(state)) {}
    std::shared_ptr<State> state_;
  };
  Handle handle() const { return Handle(state_); }

  Result<std::vector<uint64_t>> List() override {
    if (state_->dead) return Lost();
    return real_->List();
  }
  Result<std::unique_ptr<File>> Open(uint64_t number, bool create) override {
    if (state_->dead) return Lost();
    if (create) KVPORT_RETURN_IF_ERROR(Operation(*state_));
    KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<File> file, real_->Open(number, create));
    state_->paths[number] = real_->PathOf(number);
    FileState& tracked = state_->files[number];
    tracked = FileState();
    if (create) {
      state_->created.insert(number);
    } else {
      KVPORT_ASSIGN_OR_RETURN(tracked.synced_size, file->Size());  // durable as found
    }
    return std::unique_ptr<File>(new TrackedFile(std::move(file), state_, number));
  }
  Status Remove(uint64_t number) override {
    KVPORT_RETURN_IF_ERROR(Operation(*state_));
    State& s = *state_;
    if (s.created.erase(number) == 0) {
      // Its durable bytes, for a power loss that brings it back.
      Removed removed{number, {}};
      const std::string path = real_->PathOf(number);
      s.paths[number] = path;
      if (std::filesystem::exists(path)) {
        FileState file = s.files.count(number) != 0 ? s.files[number] : FileState{};
        if (s.files.count(number) == 0) file.synced_size = std::filesystem::file_size(path);
        removed.durable = DurableBytes(path, file);
      }
      s.removed.push_back(std::move(removed));
    }
    s.files.erase(number);
    return real_->Remove(number);
  }
  Status Quarantine(uint64_t number) override {
    KVPORT_RETURN_IF_ERROR(Operation(*state_));
    return real_->Quarantine(number);
  }
  Status SyncDir() override {
    KVPORT_RETURN_IF_ERROR(Operation(*state_));
    KVPORT_RETURN_IF_ERROR(real_->SyncDir());
    state_->created.clear();
    state_->removed.clear();
    if (state_->checkpoint_change.has_value()) {
      state_->checkpoint = std::move(*state_->checkpoint_change);
      state_->checkpoint_change.reset();
    }
    return Status::Ok();
  }
  Result<std::string> ReadSuperblock() override {
    if (state_->dead) return Lost();
    return real_->ReadSuperblock();
  }
  Status WriteSuperblock(std::string_view bytes) override {
    KVPORT_RETURN_IF_ERROR(Operation(*state_));
    return real_->WriteSuperblock(bytes);
  }
  Result<std::unique_ptr<File>> OpenCheckpoint() override {
    if (state_->dead) return Lost();
    return real_->OpenCheckpoint();  // only read
  }
  Result<std::unique_ptr<File>> CreateCheckpoint() override {
    KVPORT_RETURN_IF_ERROR(Operation(*state_));
    KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<File> file, real_->CreateCheckpoint());
    state_->files[kCheckpointTemp] = FileState();
    return std::unique_ptr<File>(new TrackedFile(std::move(file), state_, kCheckpointTemp));
  }
  Status PublishCheckpoint() override {
    KVPORT_RETURN_IF_ERROR(Operation(*state_));
    // What a power loss after a SyncDir would find under the new name: its synced bytes.
    const FileState temp =
        state_->files.count(kCheckpointTemp) != 0 ? state_->files[kCheckpointTemp] : FileState{};
    std::string durable = DurableBytes(CheckpointPath() + ".tmp", temp);
    KVPORT_RETURN_IF_ERROR(real_->PublishCheckpoint());
    state_->files.erase(kCheckpointTemp);
    state_->checkpoint_change = std::optional<std::string>(std::move(durable));
    return Status::Ok();
  }
  Status RemoveCheckpoint() override {
    KVPORT_RETURN_IF_ERROR(Operation(*state_));
    KVPORT_RETURN_IF_ERROR(real_->RemoveCheckpoint());
    state_->files.erase(kCheckpointTemp);
    state_->checkpoint_change = std::optional<std::string>();  // none, once synced
    return Status::Ok();
  }
  Result<uint64_t> FreeBytes() override {
    if (state_->dead) return Lost();
    return real_->FreeBytes();
  }
  std::string dir() const override { return real_->dir(); }
  std::string PathOf(uint64_t number) const override { return real_->PathOf(number); }

 private:
  struct FileState {
    uint64_t synced_size = 0;          // its size at its last Sync (or when found)
    uint64_t dirty_from = UINT64_MAX;  // the lowest offset written since
  };
  struct Removed {
    uint64_t number = 0;
    std::string durable;  // what a power loss would bring back
  };
  struct State {
    std::map<uint64_t, FileState> files;
    std::set<uint64_t> created;    // since the last SyncDir
    std::vector<Removed> removed;  // since the last SyncDir, in order
    // CHECKPOINT as a power loss would leave it (none: absent), and what a SyncDir makes it
    // (unset: no publication or removal since the last one).
    std::optional<std::string> checkpoint;
    std::optional<std::optional<std::string>> checkpoint_change;
    std::map<uint64_t, std::string> paths;  // of every segment seen
    std::string checkpoint_path;
    uint64_t operations = 0;  // changing operations so far
    uint64_t crash_at = 0;    // the one the process dies at (0: none)
    bool dead = false;
  };
  // files' key for CHECKPOINT.tmp (never a segment's number).
  static constexpr uint64_t kCheckpointTemp = UINT64_MAX;

  static Status Lost() { return Status::IoError("injected: the power is out"); }

  static void PowerLoss(State& s, uint64_t returning) {
    for (uint64_t number : s.created)
      std::filesystem::remove(s.paths[number]);
    std::filesystem::remove(s.checkpoint_path + ".tmp");
    if (s.checkpoint.has_value()) {
      WriteAll(s.checkpoint_path, *s.checkpoint);
    } else {
      std::filesystem::remove(s.checkpoint_path);
    }
    s.checkpoint_change.reset();
    for (auto& [number, file] : s.files) {
      if (number == kCheckpointTemp || s.created.count(number) != 0) continue;
      const std::string& path = s.paths[number];
      if (!std::filesystem::exists(path)) continue;
      CutBack(path, file);
    }
    for (size_t i = 0; i < s.removed.size(); ++i) {
      if (i < 64 && ((returning >> i) & 1) == 0) continue;
      WriteAll(s.paths[s.removed[i].number], s.removed[i].durable);
    }
    s.created.clear();
    s.removed.clear();
    s.dead = true;
  }

  // A changing operation: counted; the crash point's fails, and the process is gone from then.
  static Status Operation(State& s) {
    if (s.dead) return Lost();
    if (++s.operations == s.crash_at) {
      s.dead = true;
      return Status::IoError("injected: killed here");
    }
    return Status::Ok();
  }

  std::string CheckpointPath() const { return real_->dir() + "/CHECKPOINT"; }
  static std::string ReadAll(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  static void WriteAll(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  // `path`'s bytes as a power loss would leave them.
  static std::string DurableBytes(const std::string& path, const FileState& file) {
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    bytes.resize(file.synced_size, '\0');
    if (file.dirty_from < bytes.size()) {
      std::memset(bytes.data() + file.dirty_from, 0, bytes.size() - file.dirty_from);
    }
    return bytes;
  }
  static void CutBack(const std::string& path, const FileState& file) {
    const std::string bytes = DurableBytes(path, file);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  class TrackedFile final : public File {
   public:
    TrackedFile(std::unique_ptr<File> file, std::shared_ptr<State> state, uint64_t number)
        : file_(std::move(file)), state_(std::move(state)), number_(number) {}
    Status WriteAt(uint64_t offset, const void* data, size_t bytes) override {
      if (state_->dead) return Lost();
      if (auto it = state_->files.find(number_); it != state_->files.end()) {
        it->second.dirty_from = std::min(it->second.dirty_from, offset);
      }
      if (Status alive = Operation(*state_); !alive.ok()) {
        (void)file_->WriteAt(offset, data, bytes / 2);  // torn: its first half landed
        return alive;
      }
      return file_->WriteAt(offset, data, bytes);
    }
    Result<size_t> ReadAt(uint64_t offset, void* data, size_t bytes) override {
      if (state_->dead) return Lost();
      return file_->ReadAt(offset, data, bytes);
    }
    Status Sync() override {
      KVPORT_RETURN_IF_ERROR(Operation(*state_));
      KVPORT_RETURN_IF_ERROR(file_->Sync());
      if (auto it = state_->files.find(number_); it != state_->files.end()) {
        KVPORT_ASSIGN_OR_RETURN(it->second.synced_size, file_->Size());
        it->second.dirty_from = UINT64_MAX;
      }
      return Status::Ok();
    }
    Status Truncate(uint64_t size) override {
      KVPORT_RETURN_IF_ERROR(Operation(*state_));
      return file_->Truncate(size);
    }
    Result<uint64_t> Size() override {
      if (state_->dead) return Lost();
      return file_->Size();
    }
    Status Allocate(uint64_t offset, uint64_t bytes) override {
      KVPORT_RETURN_IF_ERROR(Operation(*state_));
      return file_->Allocate(offset, bytes);
    }

   private:
    std::unique_ptr<File> file_;
    std::shared_ptr<State> state_;
    const uint64_t number_;
  };

  std::unique_ptr<SegmentFolder> real_;
  std::shared_ptr<State> state_;
};

}  // namespace kvport::store::testing
