// SPDX-License-Identifier: Apache-2.0
// `kvport bench` output: a table for people and JSON for machines, from one BenchReport.
#pragma once

#include <string>

#include "bench/bench_matrix.h"
#include "bench/bench_run.h"
#include "bench/disk_bench.h"

namespace kvport::bench {

// The table, the ratios and the reasons a baseline was skipped; ends with a newline.
std::string FormatBenchText(const BenchReport& report);

// One JSON object (see the keys below; numbers are plain JSON numbers, absent ratios null):
//   {"options": {..., "transports": ["tcp", "shm"], "redis_pipeline": N}, "node": "...",
//    "phases": [{"system", "variant", "op", "calls", "keys", "bytes", "failed_keys", "seconds",
//    "gb_per_s", "keys_per_s", "error", "latency_us": {"p50", "p99", "p999", "max", "mean"}},
//    ...],
//    "limit": {"variant", "gb_per_s"} | null,          (the TCP limit: fastest socket mode)
//    "memcpy_limit": {"gb_per_s"} | null,              (the shared-memory limit)
//    "ratios": {"put": {"vs_limit", "vs_redis"}, "get": {...}, "exists": {...}},   (TCP)
//    "ratios_shm": {"put": {"vs_memcpy", "vs_redis"}, ...} | null,
//    "cluster": {"nodes", "endpoint", "ratios": {"put": {"vs_node"}, "get": {...},
//                "exists": {...}}, "ratios_shm": {...} | null} | null,   (--nodes N >= 2)
//    "transport_note": "...", "socket_skipped": "...", "redis_skipped": "...", "passed": true}
// kvport phases' variant is the transport ("tcp", "shm"), redis phases' the pattern. With
// --nodes, the phases against the cluster have system "cluster" (variant the transport), the
// "kvport" ones are against its first node alone, and options.nodes is N; cluster.ratios are
// the cluster over the one node (GB/s for put and get, keys/s for exists).
std::string FormatBenchJson(const BenchReport& report);

// The matrix as a table (one row per shape and transport, with its limit and ratios).
std::string FormatMatrixText(const MatrixReport& report);

// The matrix as one JSON object:
//   {"options": {"value_sizes", "batches", "connections", "count", "phase_bytes",
//    "max_seconds"}, "node", "transports", "transport_note",
//    "rows": [{"value_bytes", "batch", "connections", "transport", "put": phase, "get": phase,
//              "limit": phase | null, "socket_blocking": phase | null (tcp),
//              "memcpy_buffers": phase | null (shm), "put_vs_limit",
//              "get_vs_limit"}],
//    "socket": [phase, ...], "socket_skipped", "seconds", "passed"}
// with each phase as in FormatBenchJson's "phases".
std::string FormatMatrixJson(const MatrixReport& report);

// `kvport bench --disk`: the phases (kvport's put and get through the disk tier, fio's write and
// random read), the ratios to fio, the restart, and what the node's counters said.
std::string FormatDiskBenchText(const DiskBenchReport& report);

// `kvport bench --disk --json`: one JSON object (absent numbers null):
//   {"mode": "disk", "options": {"value_bytes", "batch", "connections", "threads",
//    "busy_poll_us", "max_seconds", "disk_dir", "data_bytes", "memory_bytes", "disk_capacity",
//    "fio", "fio_iodepth"}, "node", "run_dir",
//    "keys": {"written", "filled", "on_disk"},
//    "phases": [phase, ...]                       (as FormatBenchJson's; fio's op "write"/"read")
//    "disk_get_gbps", "fio_read_gbps", "vs_fio",   (kvport get over fio randread)
//    "disk_put_gbps", "fio_write_gbps", "put_vs_fio_write",
//    "restart_ms", "restore_ms", "restart_ms_per_gib", "restored_objects",
//    "restored_disk_bytes",
//    "put": {"ack_seconds", "disk_writes", "queue_drops"},
//    "get": {"disk_hits", "disk_writes", "queue_drops"},
//    "page_cache": {"files_dropped", "note"},
//    "fio_skipped": "..." ("" when fio ran), "fio_note" (io_uring failed: libaio used, why),
//    "restore_ms_skipped": "...", "passed": true}
std::string FormatDiskBenchJson(const DiskBenchReport& report);

}  // namespace kvport::bench
