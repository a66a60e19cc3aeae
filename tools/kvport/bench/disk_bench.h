// SPDX-License-Identifier: Apache-2.0
// `kvport bench --disk DIR`: the node's disk tier (docs/store.md, "The disk tier") against fio
// reading and writing the same sizes on the same filesystem, in one run (docs/performance.md,
// "What the disk tier costs and how fast it restarts").
//
// What RunDiskBench does, in this order:
//  1. Starts an embedded node with little memory (--disk-memory, 64 MiB) and its disk tier in a
//     fresh folder DIR/kvport-bench-disk.PID/tier (capacity: twice the data set and 64 MiB).
//  2. Put: writes the data set (--disk-data, 1 GiB, in values of --value-size) over the bench's
//     usual client pattern (connections x threads, batches of --batch keys). The first
//     memory's worth is written untimed, so that every timed put evicts an object to disk.
//     The node's disk writer drains a queue of at most 64 MiB and drops what does not fit, so
//     the bench paces its puts by the node's disk_pending_bytes (STATS; a call starts only
//     while the queue has room for what the calls in flight evict) and the put phase ends when
//     disk_pending_bytes is 0 again: the put rate is the rate at which values reach the disk,
//     not the rate at which a queue fills.
//  3. Restart: stops the node (a clean stop writes what is still queued) and starts one over the
//     same folder, timing Server::Start (which rebuilds the disk index; restore_ms is the node's
//     own count of the rebuild when its STATS carry disk_restore_ms), per GiB of disk tier.
//     What was only in memory is gone after it, so every key still there lives on disk only.
//  4. Get: finds the keys the restarted node has (MEXIST, untimed), evicts the tier's segment
//     files from the page cache (fdatasync + POSIX_FADV_DONTNEED, so that reads come from the
//     disk, as fio's O_DIRECT ones do), and reads each of them once in a shuffled order over the
//     same client pattern, every value checked byte for byte. Each get moves its object back
//     into memory and so evicts another one, which the disk already holds (the tiers are
//     inclusive): disk_writes during the get phase says whether anything was written again.
//  5. fio (after the node is stopped): a sequential O_DIRECT write of a file of the data set's
//     size in the same folder with io_uring (the layout, reported as fio's write rate), then
//     random O_DIRECT reads of the value size over it, --iodepth at least the keys the bench's
//     calls keep in flight (fio's best pattern on a virtio disk: a deep queue). A missing fio, or
//     one that fails, leaves its rows out with the reason; it is never a failure of the run.
// The run folder is removed at the end.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "bench/bench_options.h"
#include "bench/phase_result.h"
#include "kvport/status.h"

namespace kvport::bench {

// The node's disk queue (store::WriteBehindDiskOptions::max_pending_bytes): what the put phase
// paces by.
inline constexpr uint64_t kDiskQueueBytes = uint64_t{64} << 20;

struct DiskBenchReport {
  BenchOptions options;  // as run (disk_* resolved)
  std::string node;      // the embedded node, described
  std::string run_dir;   // DIR/kvport-bench-disk.PID (removed at the end)
  uint64_t disk_capacity = 0;
  uint64_t keys_written = 0;  // the data set's keys
  uint64_t keys_filled = 0;   // of those, written untimed first (the node's memory)
  uint64_t keys_on_disk = 0;  // found after the restart: what the get phase reads
  // system "kvport", variant "disk". put: the timed puts, seconds until the disk queue was
  // empty again (put_ack_seconds: until the last put was answered). get: one get per key on
  // disk.
  PhaseResult put;
  PhaseResult get;
  double put_ack_seconds = 0;
  // The node's counters: during the timed puts, and during the get phase.
  uint64_t put_disk_writes = 0;
  uint64_t put_queue_drops = 0;
  uint64_t get_disk_hits = 0;
  uint64_t get_disk_writes = 0;
  uint64_t get_queue_drops = 0;
  uint64_t page_cache_files = 0;  // segment files evicted from the page cache before the gets
  std::string page_cache_note;    // why that failed, when it did
  // Restart: Server::Start over the same folder, wall time; the node's own restore_ms when its
  // STATS carry disk_restore_ms; the tier's bytes and objects it found.
  double restart_ms = 0;
  std::optional<uint64_t> restore_ms;
  uint64_t restored_objects = 0;
  uint64_t restored_disk_bytes = 0;
  // fio: system "fio", variant "ENGINE qdN" (its blocks: the value size, rounded up to 4 KiB).
  // Empty system when not run; then fio_skipped says why.
  PhaseResult fio_write;
  PhaseResult fio_read;
  std::string fio_skipped;
  std::string fio_note;  // io_uring failed and libaio was used instead: why

  // disk get GB/s over fio's random read GB/s; disk put over fio's write; nullopt when either
  // is missing or failed.
  std::optional<double> GetVsFio() const;
  std::optional<double> PutVsFioWrite() const;
  // restart_ms per GiB (2^30) of the restored tier's bytes; nullopt with none.
  std::optional<double> RestartMsPerGib() const;
  // Every key of both phases succeeded and read back right, and the node lost no object to a
  // full queue during the puts.
  bool AllPassed() const;
};

// Progress notes, as RunBench's.
using DiskBenchLog = std::function<void(std::string_view)>;

// options.disk_dir must be set (BenchOptions::Validate checks the rest). Errors: InvalidArgument
// for bad options; a folder that cannot be made; a node that cannot be started (or restarted)
// or reached. Failures inside a phase are reported in the phase.
Result<DiskBenchReport> RunDiskBench(BenchOptions options, const DiskBenchLog& log = {});

// fio's JSON output (--output-format=json): the first job's `rw` ("read", "write") as a phase
// (system "fio", op get for read and put for write, bytes from io_bytes, seconds from its
// runtime at its bw_bytes). Corruption when it is not fio's JSON or the job reports an error.
Result<PhaseResult> ParseFioJson(const std::string& output, const std::string& rw);

}  // namespace kvport::bench
