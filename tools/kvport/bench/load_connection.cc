// SPDX-License-Identifier: Apache-2.0
#include "bench/load_connection.h"

#include <hiredis/hiredis.h>

#include <fmt/core.h>

#include <cstring>

#include "kvport/client.h"

namespace kvport::bench {
namespace {

KeyAnswer FromKeyCode(KeyCode code) {
  if (code == KeyCode::kSuccess) return KeyAnswer::kFound;
  if (code == KeyCode::kKeyNotExist) return KeyAnswer::kMissing;
  return KeyAnswer::kFailed;
}

void FromCodes(const std::vector<KeyCode>& codes, size_t keys, std::vector<KeyAnswer>* answers) {
  answers->assign(keys, KeyAnswer::kFailed);
  for (size_t i = 0; i < keys && i < codes.size(); ++i)
    (*answers)[i] = FromKeyCode(codes[i]);
}

class KvportConnection : public LoadConnection {
 public:
  explicit KvportConnection(std::string ns) : ns_(std::move(ns)) {}

  Status Init(const std::string& endpoint) {
    InitOptions o;
    o.transport_type = 1;  // TCP: one connection per engine worker, what is measured
    o.connections = 1;
    return client_.Init("kvport-load", endpoint, o);
  }

  Status Exists(const std::vector<std::string>& keys, std::vector<KeyAnswer>* answers) override {
    ExistOptions o;
    o.ns = ns_;
    KVPORT_ASSIGN_OR_RETURN(BatchResult r, client_.MExist(keys, o));
    FromCodes(r.codes, keys.size(), answers);
    return Status::Ok();
  }

  Status GetMeta(const std::vector<std::string>& keys, std::vector<KeyAnswer>* answers,
                 std::vector<std::string>* metas) override {
    GetOptions o;
    o.ns = ns_;
    KVPORT_ASSIGN_OR_RETURN(GetResult r, client_.MGetMeta(keys, o));
    FromCodes(r.codes, keys.size(), answers);
    metas->assign(keys.size(), std::string());
    for (size_t i = 0; i < keys.size() && i < r.metas.size(); ++i)
      (*metas)[i] = std::move(r.metas[i]);
    return Status::Ok();
  }

  Status Get(const std::vector<std::string>& keys, std::span<const std::span<uint8_t>> buffers,
             std::vector<KeyAnswer>* answers, std::vector<uint64_t>* lengths) override {
    GetOptions o;
    o.ns = ns_;
    IOBuffers io;
    for (size_t i = 0; i < keys.size(); ++i)
      io.Append(buffers[i].data(), buffers[i].size());
    KVPORT_ASSIGN_OR_RETURN(GetResult r, client_.MGet(keys, o, io));
    FromCodes(r.codes, keys.size(), answers);
    lengths->assign(keys.size(), 0);
    for (size_t i = 0; i < keys.size() && i < r.value_sizes.size(); ++i)
      (*lengths)[i] = r.value_sizes[i];
    return Status::Ok();
  }

  Status Put(const std::vector<std::string>& keys, std::span<const std::span<uint8_t>> values,
             const std::vector<std::string>& metas, std::vector<KeyAnswer>* answers) override {
    SetOptions o;
    o.ns = ns_;
    IOBuffers io;
    for (size_t i = 0; i < keys.size(); ++i)
      io.Append(static_cast<const void*>(values[i].data()), values[i].size());
    KVPORT_ASSIGN_OR_RETURN(BatchResult r, client_.MSet(keys, io, o, metas));
    FromCodes(r.codes, keys.size(), answers);
    return Status::Ok();
  }

 private:
  std::string ns_;
  Client client_;
};

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

class RedisConnection : public LoadConnection {
 public:
  explicit RedisConnection(redisContext* c) : c_(c) {}
  ~RedisConnection() override { redisFree(c_); }

  Status Exists(const std::vector<std::string>& keys, std::vector<KeyAnswer>* answers) override {
    for (const std::string& key : keys) {
      const char* argv[2] = {"EXISTS", key.data()};
      const size_t lens[2] = {6, key.size()};
      if (redisAppendCommandArgv(c_, 2, argv, lens) != REDIS_OK) return Error("EXISTS");
    }
    answers->assign(keys.size(), KeyAnswer::kFailed);
    for (size_t i = 0; i < keys.size(); ++i) {
      KVPORT_ASSIGN_OR_RETURN(Reply r, NextReply());
      if (r->type == REDIS_REPLY_INTEGER) {
        (*answers)[i] = r->integer == 1 ? KeyAnswer::kFound : KeyAnswer::kMissing;
      }
    }
    return Status::Ok();
  }

  Status GetMeta(const std::vector<std::string>& keys, std::vector<KeyAnswer>* answers,
                 std::vector<std::string>* metas) override {
    std::vector<std::string> meta_keys;
    meta_keys.reserve(keys.size());
    for (const std::string& key : keys)
      meta_keys.push_back(MetaKey(key));
    KVPORT_ASSIGN_OR_RETURN(Reply r, MGet(meta_keys));
    answers->assign(keys.size(), KeyAnswer::kFailed);
    metas->assign(keys.size(), std::string());
    for (size_t i = 0; i < keys.size(); ++i) {
      const redisReply* e = r->element[i];
      if (e->type == REDIS_REPLY_NIL) {
        (*answers)[i] = KeyAnswer::kMissing;
      } else if (e->type == REDIS_REPLY_STRING) {
        (*answers)[i] = KeyAnswer::kFound;
        (*metas)[i].assign(e->str, e->len);
      }
    }
    return Status::Ok();
  }

  Status Get(const std::vector<std::string>& keys, std::span<const std::span<uint8_t>> buffers,
             std::vector<KeyAnswer>* answers, std::vector<uint64_t>* lengths) override {
    KVPORT_ASSIGN_OR_RETURN(Reply r, MGet(keys));
    answers->assign(keys.size(), KeyAnswer::kFailed);
    lengths->assign(keys.size(), 0);
    for (size_t i = 0; i < keys.size(); ++i) {
      const redisReply* e = r->element[i];
      if (e->type == REDIS_REPLY_NIL) {
        (*answers)[i] = KeyAnswer::kMissing;
      } else if (e->type == REDIS_REPLY_STRING && e->len <= buffers[i].size()) {
        // hiredis hands the value in its own allocation; an engine copies it into its buffer,
        // as kvport's MGet delivers it.
        std::memcpy(buffers[i].data(), e->str, e->len);
        (*answers)[i] = KeyAnswer::kFound;
        (*lengths)[i] = e->len;
      }
    }
    return Status::Ok();
  }

  Status Put(const std::vector<std::string>& keys, std::span<const std::span<uint8_t>> values,
             const std::vector<std::string>& metas, std::vector<KeyAnswer>* answers) override {
    std::vector<std::string> meta_keys;
    std::vector<const char*> argv{"MSET"};
    std::vector<size_t> lens{4};
    meta_keys.reserve(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      argv.insert(argv.end(), {keys[i].data(), reinterpret_cast<const char*>(values[i].data())});
      lens.insert(lens.end(), {keys[i].size(), values[i].size()});
      if (metas.empty()) continue;
      meta_keys.push_back(MetaKey(keys[i]));
      argv.insert(argv.end(), {meta_keys[i].data(), metas[i].data()});
      lens.insert(lens.end(), {meta_keys[i].size(), metas[i].size()});
    }
    KVPORT_ASSIGN_OR_RETURN(Reply r, Command(argv, lens, "MSET"));
    const bool ok = r->type == REDIS_REPLY_STATUS && std::strcmp(r->str, "OK") == 0;
    answers->assign(keys.size(), ok ? KeyAnswer::kFound : KeyAnswer::kFailed);
    return Status::Ok();
  }

 private:
  static std::string MetaKey(const std::string& key) { return key + "#m"; }

  Status Error(std::string_view what) const {
    return Status::IoError(fmt::format("redis {}: {}", what, c_->errstr));
  }

  Result<Reply> NextReply() {
    void* raw = nullptr;
    if (redisGetReply(c_, &raw) != REDIS_OK) return Error("reply");
    return Reply(static_cast<redisReply*>(raw));
  }

  Result<Reply> Command(std::vector<const char*>& argv, const std::vector<size_t>& lens,
                        std::string_view what) {
    if (redisAppendCommandArgv(c_, static_cast<int>(argv.size()), argv.data(), lens.data()) !=
        REDIS_OK) {
      return Error(what);
    }
    return NextReply();
  }

  // MGET of `keys`: an array reply of one element per key, else IoError.
  Result<Reply> MGet(const std::vector<std::string>& keys) {
    std::vector<const char*> argv{"MGET"};
    std::vector<size_t> lens{4};
    for (const std::string& key : keys) {
      argv.push_back(key.data());
      lens.push_back(key.size());
    }
    KVPORT_ASSIGN_OR_RETURN(Reply r, Command(argv, lens, "MGET"));
    if (r->type != REDIS_REPLY_ARRAY || r->elements != keys.size()) {
      return Status::IoError(fmt::format("redis MGET: expected {} replies", keys.size()));
    }
    return r;
  }

  redisContext* c_;
};

}  // namespace

Result<std::unique_ptr<LoadConnection>> ConnectKvport(const std::string& endpoint,
                                                      const std::string& ns) {
  auto c = std::make_unique<KvportConnection>(ns);
  KVPORT_RETURN_IF_ERROR(c->Init(endpoint));
  return std::unique_ptr<LoadConnection>(std::move(c));
}

Result<std::unique_ptr<LoadConnection>> ConnectRedis(uint16_t port) {
  const timeval connect_timeout{5, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, connect_timeout);
  if (c == nullptr) return Status::Unavailable("redis: cannot allocate a hiredis context");
  if (c->err != 0) {
    Status s = Status::Unavailable(fmt::format("redis on 127.0.0.1:{}: {}", port, c->errstr));
    redisFree(c);
    return s;
  }
  const timeval call_timeout{60, 0};
  redisSetTimeout(c, call_timeout);
  return std::unique_ptr<LoadConnection>(std::make_unique<RedisConnection>(c));
}

}  // namespace kvport::bench
