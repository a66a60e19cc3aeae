// SPDX-License-Identifier: Apache-2.0
#include "bench/redis_phases.h"

#include <hiredis/hiredis.h>

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

#include "bench/phase_driver.h"

namespace kvport::bench {
namespace {

struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, ContextDeleter>;

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

Result<Context> Connect(uint16_t port) {
  const timeval connect_timeout{5, 0};
  Context c(redisConnectWithTimeout("127.0.0.1", port, connect_timeout));
  if (c == nullptr) return Status::Unavailable("redis: cannot allocate a hiredis context");
  if (c->err != 0) {
    return Status::Unavailable(fmt::format("redis on 127.0.0.1:{}: {}", port, c->errstr));
  }
  const timeval call_timeout{60, 0};
  redisSetTimeout(c.get(), call_timeout);
  return c;
}

Status ContextError(redisContext* c, std::string_view what) {
  return Status::IoError(fmt::format("redis {}: {}", what, c->errstr));
}

Result<Reply> NextReply(redisContext* c) {
  void* raw = nullptr;
  if (redisGetReply(c, &raw) != REDIS_OK) return ContextError(c, "reply");
  return Reply(static_cast<redisReply*>(raw));
}

// One command per key, `depth` at a time: sends up to `depth` commands, reads their replies
// in order, and so on (depth 1: one command per round trip; depth >= batch: the whole batch as
// one pipeline).
Result<CallOutcome> PutBatch(redisContext* c, const BenchData& data, int thread, size_t depth) {
  const std::vector<std::string>& keys = data.keys(thread);
  CallOutcome out;
  out.keys = keys.size();
  for (size_t first = 0; first < keys.size(); first += depth) {
    const size_t end = std::min(keys.size(), first + depth);
    for (size_t i = first; i < end; ++i) {
      const std::span<const uint8_t> v = data.value(thread, i);
      const char* argv[3] = {"SET", keys[i].data(), reinterpret_cast<const char*>(v.data())};
      const size_t lens[3] = {3, keys[i].size(), v.size()};
      if (redisAppendCommandArgv(c, 3, argv, lens) != REDIS_OK) return ContextError(c, "SET");
    }
    for (size_t i = first; i < end; ++i) {
      KVPORT_ASSIGN_OR_RETURN(Reply r, NextReply(c));
      if (r->type == REDIS_REPLY_STATUS && std::strcmp(r->str, "OK") == 0) {
        out.bytes += data.value_bytes();
      } else {
        ++out.failed_keys;
      }
    }
  }
  return out;
}

Result<CallOutcome> GetBatch(redisContext* c, BenchData& data, int thread, size_t depth) {
  const std::vector<std::string>& keys = data.keys(thread);
  data.ClearReadStamps(thread);
  CallOutcome out;
  out.keys = keys.size();
  for (size_t first = 0; first < keys.size(); first += depth) {
    const size_t end = std::min(keys.size(), first + depth);
    for (size_t i = first; i < end; ++i) {
      const char* argv[2] = {"GET", keys[i].data()};
      const size_t lens[2] = {3, keys[i].size()};
      if (redisAppendCommandArgv(c, 2, argv, lens) != REDIS_OK) return ContextError(c, "GET");
    }
    for (size_t i = first; i < end; ++i) {
      KVPORT_ASSIGN_OR_RETURN(Reply r, NextReply(c));
      const std::span<uint8_t> buffer = data.read_buffer(thread, i);
      // hiredis hands the value in its own allocation; an application copies it where it
      // needs it, as kvport's MGet delivers it: into the caller's buffer.
      if (r->type == REDIS_REPLY_STRING && r->len <= buffer.size()) {
        std::memcpy(buffer.data(), r->str, r->len);
        if (data.VerifyRead(thread, i, r->len)) {
          out.bytes += r->len;
          continue;
        }
      }
      ++out.failed_keys;
    }
  }
  return out;
}

Result<CallOutcome> ExistBatch(redisContext* c, const BenchData& data, int thread) {
  const std::vector<std::string>& keys = data.exist_keys(thread);
  for (const std::string& key : keys) {
    const char* argv[2] = {"EXISTS", key.data()};
    const size_t lens[2] = {6, key.size()};
    if (redisAppendCommandArgv(c, 2, argv, lens) != REDIS_OK) return ContextError(c, "EXISTS");
  }
  CallOutcome out;
  out.keys = keys.size();
  for (size_t i = 0; i < keys.size(); ++i) {
    KVPORT_ASSIGN_OR_RETURN(Reply r, NextReply(c));
    const bool answered = r->type == REDIS_REPLY_INTEGER;
    if (!answered || (r->integer == 1) != data.ShouldExist(i)) ++out.failed_keys;
  }
  return out;
}

}  // namespace

Result<std::vector<PhaseResult>> RunRedisPhases(const BenchOptions& options, uint16_t port,
                                                BenchData& data) {
  std::vector<Context> contexts;
  for (int t = 0; t < data.threads(); ++t) {
    KVPORT_ASSIGN_OR_RETURN(Context c, Connect(port));
    contexts.push_back(std::move(c));
  }
  const size_t depth = options.redis_depth();
  std::vector<PhaseResult> results;
  if (options.warmup_calls() > 0) {
    // Untimed (see BenchOptions::warmup). Its outcome is not a result; a node that cannot take
    // the puts shows it in the timed phases.
    PhaseResult warmup;
    PhaseLimits limits;
    limits.threads = data.threads();
    limits.calls = options.warmup_calls();
    limits.max_time = std::chrono::duration<double>(options.max_seconds);
    RunTimedPhase(
        limits,
        [&](int thread, uint64_t) { return PutBatch(contexts[thread].get(), data, thread, depth); },
        &warmup);
  }
  bool written = false;
  for (Op op : options.ops) {
    PhaseResult result;
    result.system = "redis";
    result.op = op;
    // The pattern, as the report names it (EXISTS is always one pipeline of the whole batch).
    result.variant = op == Op::kExists ? fmt::format("pipeline {}", options.exists_batch)
                     : depth == 1      ? std::string("no pipeline")
                                       : fmt::format("pipeline {}", depth);
    if (op != Op::kPut && !written) {
      // As for kvport: every thread's keys written once, untimed, before the first read.
      for (int t = 0; t < data.threads() && result.error.empty(); ++t) {
        Result<CallOutcome> r = PutBatch(contexts[t].get(), data, t, depth);
        if (!r.ok() || r->failed_keys > 0) {
          result.error = fmt::format(
              "writing the keys to read failed: {}",
              r.ok() ? fmt::format("{} keys not stored", r->failed_keys) : r.status().ToString());
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
          redisContext* c = contexts[thread].get();
          switch (op) {
            case Op::kPut:
              return PutBatch(c, data, thread, depth);
            case Op::kGet:
              return GetBatch(c, data, thread, depth);
            case Op::kExists:
              return ExistBatch(c, data, thread);
          }
          return Status::Internal("unknown op");
        },
        &result);
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace kvport::bench
