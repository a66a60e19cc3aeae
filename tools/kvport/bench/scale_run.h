// SPDX-License-Identifier: Apache-2.0
// RunScale: `kvport scale`, how a node's memory and call latency grow with the objects it holds
// and the connections it keeps, against redis-server in the same run.
//
// Objects: for each count N, a fresh node (a `kvport serve` child process, so its memory is its
// own) is filled with N objects of `value_bytes` under keys of `key_bytes`, then measured:
//   - its resident memory (/proc/PID/statm, the arena's shared pages included) over N, and what
//     that leaves beyond the key and the value: the index. kvport's arena rounds each value up to
//     a 4 KiB block; that rounding is reported apart (the node's used_bytes over N, less the
//     value) so the index column is the index alone;
//   - MEXIST of `exist_keys` random stored keys and MGET of `get_keys` (every answer checked:
//     found, the right length, the key's own stamp in its bytes), and one LIST page of
//     `list_keys`, each `calls` times on one connection, p50/p99;
//   - then N new objects more at capacity, each stored by evicting an old one: the time, and
//     the evictions counted (kvport's arena is sized for N objects and an eighth; redis gets
//     maxmemory at its used_memory then, allkeys-lru).
// redis-server gets the same keys and values (pipelined MSET; pipelined EXISTS per key, MGET,
// SCAN COUNT `list_keys`: its best patterns) in a fresh process per count, measured the same
// way from its /proc/PID/statm.
//
// Restart (with a disk folder): `disk_objects` objects through a node with a small memory
// tier and a disk tier, a clean stop, a start on the same folder: the time to stop (the flush),
// to answer again and to the first read, what was restored, single-key reads from the disk.
//
// Connections: a fresh node with one stored value of `connection_value_bytes`; `connections`
// clients connect (kvport: a client each, its HELLO done; redis: a hiredis context each) and
// stay idle, then each reads the value once and stays idle again. Resident memory over the
// connections after each, for both systems.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/bench_log.h"
#include "bench/latency_histogram.h"
#include "kvport/status.h"

namespace kvport::bench {

struct ScaleOptions {
  std::string kvport_executable;  // the kvport binary the node runs from (`kvport serve`)
  std::vector<uint64_t> object_counts{10'000, 1'000'000};
  uint64_t value_bytes = 1024;
  uint32_t key_bytes = 48;
  uint32_t exist_keys = 1024;
  uint32_t get_keys = 16;
  uint32_t list_keys = 1000;
  uint32_t calls = 200;           // of each call, per count
  uint32_t connections = 10'000;  // 0: no connection phase
  uint64_t connection_value_bytes = 64 * 1024;
  unsigned node_threads = 0;  // the node's I/O threads (0: one per CPU)
  bool redis = true;
  std::string redis_server = "redis-server";
  // A disk tier's restart (kvport only): `disk_objects` objects through a node whose disk tier
  // is in a folder under `disk_dir`, removed afterwards. "" or 0: none.
  std::string disk_dir;
  uint64_t disk_objects = 0;
  uint64_t seed = 1;
};

struct CallLatency {
  uint64_t p50_ns = 0;
  uint64_t p99_ns = 0;
};

struct ObjectsRow {
  uint64_t objects = 0;
  std::string skipped;             // why this count was not measured ("" when it was)
  uint64_t resident_bytes = 0;     // the process's resident memory once filled, less empty
  uint64_t value_store_bytes = 0;  // kvport: the arena's used bytes (blocks); redis: 0
  double fill_seconds = 0;
  CallLatency exist, get, list;
  // Then as many new objects again into the full store: each makes room by evicting.
  double evicting_fill_seconds = 0;
  uint64_t evictions = 0;
  uint64_t wrong_answers = 0;  // a stored key not found, a wrong length or wrong bytes

  // Resident bytes per object, and what is left of it beyond the key, the value and (kvport)
  // the value's rounding to blocks.
  double BytesPerObject() const;
  double IndexBytesPerObject(const ScaleOptions& o) const;
  double RoundingBytesPerObject(const ScaleOptions& o) const;
};

struct ConnectionsRow {
  uint32_t connections = 0;
  std::string skipped;
  uint64_t idle_bytes = 0;        // resident memory with the connections open, less without
  uint64_t after_read_bytes = 0;  // the same once each has read the value once
  uint64_t wrong_answers = 0;
};

struct RestartRow {
  uint64_t objects = 0;
  std::string skipped;
  double fill_seconds = 0;
  // Objects the disk tier did not keep before the stop: evicted ones its writer could not take
  // (disk_queue_drops, disk_index_drops) or that it evicted itself (disk_evicted_objects).
  uint64_t dropped = 0;
  double stop_seconds = 0;        // SIGTERM to exit: the stop's flush to disk
  double restart_seconds = 0;     // start to the first answer
  uint64_t restored = 0;          // objects the restarted node holds (disk and memory)
  uint64_t disk_index_bytes = 0;  // the restarted disk tier's index (disk_index_bytes)
  uint64_t first_read_ns = 0;     // the first single-key read after the restart
  CallLatency read;
  uint64_t read_misses = 0;    // objects not there (dropped)
  uint64_t wrong_answers = 0;  // wrong bytes or lengths
};

struct SystemScale {
  std::string system;   // "kvport", "redis"
  std::string skipped;  // why the system was not measured at all
  std::vector<ObjectsRow> objects;
  ConnectionsRow connections;
};

struct ScaleReport {
  ScaleOptions options;
  SystemScale kvport;
  SystemScale redis;
  RestartRow restart;

  bool AllCorrect() const;
};

// Errors: InvalidArgument for options out of range. A count a system cannot hold here (more
// memory than the host has) is skipped with the reason; a node or redis-server that fails to
// start is recorded in `skipped`.
Result<ScaleReport> RunScale(const ScaleOptions& options, const BenchLog& log);

// The report as the tables `kvport scale` prints.
std::string FormatScaleText(const ScaleReport& report);

}  // namespace kvport::bench
