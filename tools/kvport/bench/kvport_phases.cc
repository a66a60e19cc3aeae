// SPDX-License-Identifier: Apache-2.0
#include "bench/kvport_phases.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>

#include "bench/phase_driver.h"

namespace kvport::bench {
namespace {

Result<CallOutcome> PutBatch(const BenchOptions& options, Client& client, const BenchData& data,
                             int thread) {
  const std::vector<std::string>& keys = data.keys(thread);
  IOBuffers values;
  values.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::span<const uint8_t> v = data.value(thread, i);
    values.Append(static_cast<const void*>(v.data()), v.size());
  }
  SetOptions set;
  set.ns = options.ns;
  KVPORT_ASSIGN_OR_RETURN(BatchResult r, client.MSet(keys, values, set));
  CallOutcome out;
  out.keys = keys.size();
  for (KeyCode code : r.codes) {
    if (code == KeyCode::kSuccess) {
      out.bytes += data.value_bytes();
    } else {
      ++out.failed_keys;
    }
  }
  return out;
}

Result<CallOutcome> GetBatch(const BenchOptions& options, Client& client, BenchData& data,
                             int thread) {
  const std::vector<std::string>& keys = data.keys(thread);
  data.ClearReadStamps(thread);
  IOBuffers buffers;
  buffers.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::span<uint8_t> b = data.read_buffer(thread, i);
    buffers.Append(static_cast<void*>(b.data()), b.size());
  }
  GetOptions get;
  get.ns = options.ns;
  KVPORT_ASSIGN_OR_RETURN(GetResult r, client.MGet(keys, get, buffers));
  CallOutcome out;
  out.keys = keys.size();
  for (size_t i = 0; i < keys.size(); ++i) {
    if (r.codes[i] == KeyCode::kSuccess && data.VerifyRead(thread, i, r.value_sizes[i])) {
      out.bytes += r.value_sizes[i];
    } else {
      ++out.failed_keys;
    }
  }
  return out;
}

Result<CallOutcome> ExistBatch(const BenchOptions& options, Client& client, const BenchData& data,
                               int thread) {
  const std::vector<std::string>& keys = data.exist_keys(thread);
  ExistOptions exist;
  exist.ns = options.ns;
  KVPORT_ASSIGN_OR_RETURN(BatchResult r, client.MExist(keys, exist));
  CallOutcome out;
  out.keys = keys.size();
  for (size_t i = 0; i < keys.size(); ++i) {
    const bool exists = r.codes[i] == KeyCode::kSuccess;
    const bool answered = exists || r.codes[i] == KeyCode::kKeyNotExist;
    if (!answered || exists != data.ShouldExist(i)) ++out.failed_keys;
  }
  return out;
}

}  // namespace

std::vector<PhaseResult> RunKvportPhases(const BenchOptions& options, Client& client,
                                         BenchData& data, Transport transport) {
  std::vector<PhaseResult> results;
  if (options.warmup_calls() > 0) {
    // Untimed (see BenchOptions::warmup). Its outcome is not a result; a node that cannot take
    // the puts shows it in the timed phases.
    PhaseResult warmup;
    PhaseLimits limits;
    limits.threads = data.threads();
    limits.calls = options.warmup_calls();
    limits.max_time = std::chrono::duration<double>(
        options.warmup_max_seconds > 0 ? options.warmup_max_seconds : options.max_seconds);
    RunTimedPhase(
        limits, [&](int thread, uint64_t) { return PutBatch(options, client, data, thread); },
        &warmup);
  }
  bool written = false;
  for (Op op : options.ops) {
    PhaseResult result;
    result.system = "kvport";
    result.variant = std::string(TransportName(transport));
    result.op = op;
    if (op != Op::kPut && !written) {
      // Reads need every thread's keys written. A put phase shared its calls among threads by
      // a common count, so it may not have written every thread's keys: write them once,
      // untimed.
      for (int t = 0; t < data.threads(); ++t) {
        Result<CallOutcome> r = PutBatch(options, client, data, t);
        if (!r.ok() || r->failed_keys > 0) {
          result.error = fmt::format(
              "writing the keys to read failed: {}",
              r.ok() ? fmt::format("{} keys not stored", r->failed_keys) : r.status().ToString());
          break;
        }
      }
      if (!result.error.empty()) {
        results.push_back(std::move(result));
        continue;
      }
      written = true;
    }
    PhaseLimits limits;
    limits.threads = data.threads();
    limits.calls = op == Op::kExists ? options.exists_count : options.count;
    limits.max_time = std::chrono::duration<double>(options.max_seconds);
    RunTimedPhase(
        limits,
        [&](int thread, uint64_t) -> Result<CallOutcome> {
          switch (op) {
            case Op::kPut:
              return PutBatch(options, client, data, thread);
            case Op::kGet:
              return GetBatch(options, client, data, thread);
            case Op::kExists:
              return ExistBatch(options, client, data, thread);
          }
          return Status::Internal("unknown op");
        },
        &result);
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace kvport::bench
