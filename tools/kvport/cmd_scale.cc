// SPDX-License-Identifier: Apache-2.0
// `kvport scale`: how a node's memory and call latency grow with its objects and connections,
// against redis-server in the same run (bench/scale_run.h; docs/performance.md, "How many
// objects and clients a node holds").
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "bench/scale_run.h"
#include "commands.h"
#include "kvport/log.h"
#include "kvport/size.h"

namespace kvport::cli {
namespace {

struct ScaleFlags {
  bench::ScaleOptions options;
  std::string value_size = "1KiB";
  std::string connection_value_size = "64KiB";
};

int RunScaleCommand(ScaleFlags& f) {
  bench::ScaleOptions& o = f.options;
  Result<uint64_t> value = ParseSize(f.value_size, SizeUnit::kBytes);
  if (!value.ok()) return Fail(value.status().WithContext("--value-size"));
  o.value_bytes = *value;
  Result<uint64_t> connection_value = ParseSize(f.connection_value_size, SizeUnit::kBytes);
  if (!connection_value.ok()) {
    return Fail(connection_value.status().WithContext("--connection-value-size"));
  }
  o.connection_value_bytes = *connection_value;
  // The node runs from this very binary.
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return Fail(Status::FromErrno("readlink /proc/self/exe", errno));
  o.kvport_executable.assign(self, static_cast<size_t>(n));
  // A client per connection logs its connect at info: thousands of lines.
  if (!LogLevelGivenOnCommandLine()) log::SetLevel(log::Level::kWarn);

  Result<bench::ScaleReport> report = bench::RunScale(o, [](std::string_view note) {
    std::fprintf(stderr, "scale: %.*s\n", static_cast<int>(note.size()), note.data());
  });
  if (!report.ok()) return Fail(report.status());
  std::fputs(bench::FormatScaleText(*report).c_str(), stdout);
  std::fflush(stdout);
  if (!report->AllCorrect()) {
    return Fail(Status::Internal("some answers were wrong (the wrong column)"));
  }
  return 0;
}

}  // namespace

void AddScaleCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ScaleFlags>();
  bench::ScaleOptions& o = flags->options;
  CLI::App* cmd = app.add_subcommand(
      "scale",
      "How a node's memory and call latency grow with the objects it holds and the connections "
      "it keeps, against redis-server in one run: resident memory per object and per "
      "connection, MEXIST/MGET/LIST p50/p99 at each object count (docs/performance.md, \"How "
      "many objects and clients a node holds\")");
  cmd->add_option("--objects", o.object_counts,
                  "Object counts, each in a fresh node (a count this host lacks the memory for "
                  "is skipped, saying so)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--value-size", flags->value_size, "Bytes per value, with units")
      ->capture_default_str();
  cmd->add_option("--key-bytes", o.key_bytes, "Bytes per key (16-4096)")->capture_default_str();
  cmd->add_option("--exist-keys", o.exist_keys, "Keys per MEXIST (redis: pipelined EXISTS)")
      ->capture_default_str();
  cmd->add_option("--get-keys", o.get_keys, "Keys per MGET")->capture_default_str();
  cmd->add_option("--list-keys", o.list_keys, "Keys per LIST page (redis: SCAN COUNT)")
      ->capture_default_str();
  cmd->add_option("--calls", o.calls, "Calls of each kind per object count")->capture_default_str();
  cmd->add_option("--connections", o.connections, "Idle connections to open (0: none)")
      ->capture_default_str();
  cmd->add_option("--connection-value-size", flags->connection_value_size,
                  "The value each connection reads once, with units")
      ->capture_default_str();
  cmd->add_option("--node-threads", o.node_threads, "The node's I/O threads (0: one per CPU)")
      ->capture_default_str();
  cmd->add_flag(
      "--no-redis", [o = &o](int64_t) { o->redis = false; }, "Skip redis-server");
  cmd->add_option("--redis-server", o.redis_server,
                  "redis-server executable (a path, or a name looked up in PATH)")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the random keys")->capture_default_str();
  cmd->add_option("--disk-dir", o.disk_dir,
                  "Also measure a disk tier's restart (kvport only) in a folder made here and "
                  "removed afterwards");
  cmd->add_option("--disk-objects", o.disk_objects,
                  "Objects the disk tier's restart holds (each takes a 4 KiB block of header and "
                  "names plus its value in 4 KiB blocks on disk)")
      ->capture_default_str();
  cmd->callback([flags, exit_code] { *exit_code = RunScaleCommand(*flags); });
}

}  // namespace kvport::cli
