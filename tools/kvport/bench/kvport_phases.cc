// SPDX-License-Identifier: Apache-2.0
#include "bench/kvport_phases.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "bench/phase_driver.h"

namespace kvport::bench {
namespace {

// One batched call on key set `set`, started: Finish() waits for it and counts its outcome.
// The call's keys and buffers live in `data`; the IOBuffers naming them live here.
class StartedCall {
 public:
  virtual ~StartedCall() = default;
  virtual Result<CallOutcome> Finish() = 0;
};

class StartedPut final : public StartedCall {
 public:
  StartedPut(const BenchOptions& options, Client& client, const BenchData& data, int set)
      : data_(data), keys_(data.keys(set)) {
    values_.reserve(keys_.size());
    for (size_t i = 0; i < keys_.size(); ++i) {
      const std::span<const uint8_t> v = data.value(set, i);
      values_.Append(static_cast<const void*>(v.data()), v.size());
    }
    SetOptions set_options;
    set_options.ns = options.ns;
    call_ = client.MSetAsync(keys_, values_, set_options);
  }
  Result<CallOutcome> Finish() override {
    KVPORT_ASSIGN_OR_RETURN(BatchResult r, call_.Wait());
    CallOutcome out;
    out.keys = keys_.size();
    for (KeyCode code : r.codes) {
      if (code == KeyCode::kSuccess) {
        out.bytes += data_.value_bytes();
      } else {
        ++out.failed_keys;
      }
    }
    return out;
  }

 private:
  const BenchData& data_;
  const std::vector<std::string>& keys_;
  IOBuffers values_;
  Pending<BatchResult> call_;
};

class StartedGet final : public StartedCall {
 public:
  StartedGet(const BenchOptions& options, Client& client, BenchData& data, int set)
      : data_(data), set_(set), keys_(data.keys(set)) {
    data.ClearReadStamps(set);
    buffers_.reserve(keys_.size());
    for (size_t i = 0; i < keys_.size(); ++i) {
      const std::span<uint8_t> b = data.read_buffer(set, i);
      buffers_.Append(static_cast<void*>(b.data()), b.size());
    }
    GetOptions get;
    get.ns = options.ns;
    call_ = client.MGetAsync(keys_, get, buffers_);
  }
  Result<CallOutcome> Finish() override {
    KVPORT_ASSIGN_OR_RETURN(GetResult r, call_.Wait());
    CallOutcome out;
    out.keys = keys_.size();
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (r.codes[i] == KeyCode::kSuccess && data_.VerifyRead(set_, i, r.value_sizes[i])) {
        out.bytes += r.value_sizes[i];
      } else {
        ++out.failed_keys;
      }
    }
    return out;
  }

 private:
  const BenchData& data_;
  const int set_;
  const std::vector<std::string>& keys_;
  IOBuffers buffers_;
  Pending<GetResult> call_;
};

class StartedExist final : public StartedCall {
 public:
  StartedExist(const BenchOptions& options, Client& client, const BenchData& data, int set)
      : data_(data), keys_(data.exist_keys(set)) {
    ExistOptions exist;
    exist.ns = options.ns;
    call_ = client.MExistAsync(keys_, exist);
  }
  Result<CallOutcome> Finish() override {
    KVPORT_ASSIGN_OR_RETURN(BatchResult r, call_.Wait());
    CallOutcome out;
    out.keys = keys_.size();
    for (size_t i = 0; i < keys_.size(); ++i) {
      const bool exists = r.codes[i] == KeyCode::kSuccess;
      const bool answered = exists || r.codes[i] == KeyCode::kKeyNotExist;
      if (!answered || exists != data_.ShouldExist(i)) ++out.failed_keys;
    }
    return out;
  }

 private:
  const BenchData& data_;
  const std::vector<std::string>& keys_;
  Pending<BatchResult> call_;
};

std::unique_ptr<StartedCall> Start(Op op, const BenchOptions& options, Client& client,
                                   BenchData& data, int set) {
  switch (op) {
    case Op::kPut:
      return std::make_unique<StartedPut>(options, client, data, set);
    case Op::kGet:
      return std::make_unique<StartedGet>(options, client, data, set);
    case Op::kExists:
      return std::make_unique<StartedExist>(options, client, data, set);
  }
  return nullptr;
}

// One call of a phase for `thread`: options.inflight batched calls started at once on the
// thread's key sets, then waited for; their outcomes summed. A call that fails as a whole
// fails the group (the others are still waited for).
Result<CallOutcome> CallGroup(Op op, const BenchOptions& options, Client& client, BenchData& data,
                              int thread) {
  std::vector<std::unique_ptr<StartedCall>> calls;
  calls.reserve(options.inflight);
  for (int j = 0; j < options.inflight; ++j)
    calls.push_back(Start(op, options, client, data, thread * options.inflight + j));
  CallOutcome sum;
  Status failed;
  for (auto& call : calls) {
    Result<CallOutcome> one = call->Finish();
    if (!one.ok()) {
      if (failed.ok()) failed = one.status();
      continue;
    }
    sum.keys += one->keys;
    sum.bytes += one->bytes;
    sum.failed_keys += one->failed_keys;
  }
  if (!failed.ok()) return failed;
  return sum;
}

// Writes every key set once (what the reads need), untimed.
Result<CallOutcome> PutEverySet(const BenchOptions& options, Client& client, BenchData& data) {
  CallOutcome sum;
  for (int set = 0; set < data.sets(); ++set) {
    KVPORT_ASSIGN_OR_RETURN(CallOutcome one, StartedPut(options, client, data, set).Finish());
    sum.failed_keys += one.failed_keys;
  }
  return sum;
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
        limits,
        [&](int thread, uint64_t) { return CallGroup(Op::kPut, options, client, data, thread); },
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
      Result<CallOutcome> r = PutEverySet(options, client, data);
      if (!r.ok() || r->failed_keys > 0) {
        result.error = fmt::format(
            "writing the keys to read failed: {}",
            r.ok() ? fmt::format("{} keys not stored", r->failed_keys) : r.status().ToString());
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
        limits, [&](int thread, uint64_t) { return CallGroup(op, options, client, data, thread); },
        &result);
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace kvport::bench
