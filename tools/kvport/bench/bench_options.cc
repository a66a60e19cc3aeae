// SPDX-License-Identifier: Apache-2.0
#include "bench/bench_options.h"

#include <fmt/core.h>

#include <algorithm>

#include "kvport/size.h"

namespace kvport::bench {

std::string_view OpName(Op op) {
  switch (op) {
    case Op::kPut:
      return "put";
    case Op::kGet:
      return "get";
    case Op::kExists:
      return "exists";
  }
  return "?";
}

Result<std::vector<Op>> ParseOps(std::string_view list) {
  std::vector<Op> ops;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    const std::string_view name = list.substr(start, comma - start);
    Op op;
    if (name == "put") {
      op = Op::kPut;
    } else if (name == "get") {
      op = Op::kGet;
    } else if (name == "exists") {
      op = Op::kExists;
    } else {
      return Status::InvalidArgument(
          fmt::format("--ops: unknown operation '{}' in '{}': expected a comma-separated list "
                      "of put, get, exists",
                      name, list));
    }
    if (std::find(ops.begin(), ops.end(), op) != ops.end()) {
      return Status::InvalidArgument(
          fmt::format("--ops: '{}' is listed twice in '{}'", name, list));
    }
    ops.push_back(op);
    start = comma + 1;
  }
  return ops;
}

std::string OpList(const std::vector<Op>& ops) {
  std::string list;
  for (Op op : ops)
    list += (list.empty() ? "" : ",") + std::string(OpName(op));
  return list;
}

std::string_view TransportName(Transport transport) {
  switch (transport) {
    case Transport::kTcp:
      return "tcp";
    case Transport::kShm:
      return "shm";
    case Transport::kUcx:
      return "ucx";
  }
  return "?";
}

Result<TransportChoice> ParseTransportChoice(std::string_view name) {
  if (name == "auto") return TransportChoice::kAuto;
  if (name == "tcp") return TransportChoice::kTcp;
  if (name == "shm") return TransportChoice::kShm;
  if (name == "both") return TransportChoice::kBoth;
  if (name == "ucx") return TransportChoice::kUcx;
  return Status::InvalidArgument(fmt::format(
      "--transport: unknown transport '{}': expected tcp, shm, both, ucx or auto", name));
}

std::string_view TransportChoiceName(TransportChoice choice) {
  switch (choice) {
    case TransportChoice::kAuto:
      return "auto";
    case TransportChoice::kTcp:
      return "tcp";
    case TransportChoice::kShm:
      return "shm";
    case TransportChoice::kBoth:
      return "both";
    case TransportChoice::kUcx:
      return "ucx";
  }
  return "?";
}

size_t RedisPipelineDepth(uint64_t value_bytes, size_t batch) {
  return value_bytes >= kRedisNoPipelineBytes ? 1 : std::max<size_t>(batch, 1);
}

int BenchOptions::fio_depth() const {
  if (fio_iodepth > 0) return fio_iodepth;
  return std::max(32,
                  worker_threads() * inflight * static_cast<int>(std::min<size_t>(batch, 1024)));
}

Status BenchOptions::ValidateDisk() const {
  if (!url.empty()) {
    return Status::InvalidArgument(
        "--disk measures an embedded node's disk tier and cannot be combined with --url");
  }
  if (nodes != 1) return Status::InvalidArgument("--disk runs one embedded node, not --nodes");
  if (transport != TransportChoice::kAuto && transport != TransportChoice::kTcp) {
    return Status::InvalidArgument("--disk measures over TCP: --transport tcp or auto");
  }
  if (inflight != 1) return Status::InvalidArgument("--inflight does not apply to --disk");
  if (fio_iodepth < 0 || fio_iodepth > 4096) {
    return Status::InvalidArgument(
        fmt::format("--fio-iodepth must be 0 (automatic) to 4096, got {}", fio_iodepth));
  }
  // The calls in flight hold their values in memory (a get promotes each into it) and evict
  // the rest: they must fit in half of it.
  const uint64_t in_flight = static_cast<uint64_t>(worker_threads()) * batch * value_bytes;
  if (disk_memory_bytes < 2 * in_flight) {
    return Status::InvalidArgument(fmt::format(
        "--disk-memory {} is less than twice what the calls in flight hold ({} threads x {} "
        "keys x {}): raise it or lower --batch, --connections or --value-size",
        FormatSize(disk_memory_bytes), worker_threads(), batch, FormatSize(value_bytes)));
  }
  if (disk_data_bytes < 2 * disk_memory_bytes) {
    return Status::InvalidArgument(
        fmt::format("--disk-data {} must be at least twice --disk-memory {}, so that most of it "
                    "is evicted to disk",
                    FormatSize(disk_data_bytes), FormatSize(disk_memory_bytes)));
  }
  return Status::Ok();
}

size_t BenchOptions::redis_depth() const {
  const size_t depth =
      redis_pipeline == 0 ? RedisPipelineDepth(value_bytes, batch) : redis_pipeline;
  return std::clamp<size_t>(depth, 1, std::max<size_t>(batch, 1));
}

Status BenchOptions::Validate() const {
  if (value_bytes == 0) return Status::InvalidArgument("--value-size must be at least 1 byte");
  if (batch == 0) return Status::InvalidArgument("--batch must be at least 1");
  if (connections < 1) return Status::InvalidArgument("--connections must be at least 1");
  if (threads < 0) return Status::InvalidArgument("--threads must be 0 (per connection) or more");
  if (busy_poll_us < 0 || busy_poll_us > 1000000) {
    return Status::InvalidArgument(
        fmt::format("--busy-poll-us must be 0 to 1000000 microseconds, got {}", busy_poll_us));
  }
  if (inflight < 1 || inflight > 64) {
    return Status::InvalidArgument(
        fmt::format("--inflight must be 1 to 64 calls per thread, got {}", inflight));
  }
  if (ops.empty()) return Status::InvalidArgument("--ops: no operation given");
  if (count == 0) return Status::InvalidArgument("--count must be at least 1");
  if (!(max_seconds > 0)) return Status::InvalidArgument("--seconds must be positive");
  if (exists_batch == 0) return Status::InvalidArgument("--exists-batch must be at least 1");
  if (exists_count == 0) return Status::InvalidArgument("--exists-count must be at least 1");
  if (nodes < 1 || nodes > kMaxBenchNodes) {
    return Status::InvalidArgument(
        fmt::format("--nodes must be 1 to {} (embedded nodes), got {}", kMaxBenchNodes, nodes));
  }
  if (!disk_dir.empty()) KVPORT_RETURN_IF_ERROR(ValidateDisk());
  if (nodes > 1 && !url.empty()) {
    return Status::InvalidArgument(
        "--nodes starts embedded nodes and cannot be combined with --url; to measure an existing "
        "cluster give its endpoint to --url alone (\"HOST:PORT;HOST:PORT\" or "
        "etcd:HOST:PORT/CLUSTER)");
  }
  return Status::Ok();
}

}  // namespace kvport::bench
