// SPDX-License-Identifier: Apache-2.0
// The Redis protocol's commands (docs/resp.md) over the CacheService: each command's arguments
// in, its reply out, every store access through the service with the client's grant (no second
// access check, no second store path). The command table and its one check site are in
// server/resp_commands.cc, the commands in a file per family (server/resp_command_parts.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "net/output_queue.h"
#include "protocol/resp.h"
#include "server/access_policy.h"
#include "server/cache_service.h"
#include "server/resp_glob.h"

namespace kvport::server {

// What one RESP connection's commands read and change.
struct RespClient {
  uint64_t id = 0;       // CacheService::NewSessionId(): owns the SCAN cursors
  int version = 2;       // RESP2 until HELLO 3
  SessionAccess access;  // authenticated: at once on an open node, by AUTH or HELLO otherwise
  std::string name;      // CLIENT SETNAME
  // LMCache's Redis connector announced itself (a client name or library name beginning with
  // "lmcache"): its `<P>metadata` keys fold into their `<P>kv_bytes` (server/resp_chunk_pair.h)
  // whatever the namespace's setting.
  bool folds_pairs = false;
  std::string ns;     // the namespace its keys live in (docs/resp.md, "Namespaces")
  bool quit = false;  // QUIT: close once the reply is written
  // Hears of its changes that wait for the disk tier (SessionState::durability).
  CacheService::Waiter durability;
};

// Where replies go: text gathered in one string, values from the arena borrowed (pinned) into
// the connection's output queue in order with it.
class RespOutput {
 public:
  explicit RespOutput(net::OutputQueue* queue) : queue_(queue) {}
  std::string& text() { return text_; }
  const std::string& text() const { return text_; }
  // A value as a bulk string: copied into the text when small, else sent from the arena under
  // its pin.
  void Value(store::ReadHandle pin);
  // Queues what was gathered.
  void Commit();
  static constexpr size_t kCopyBelowBytes = 16 * 1024;

 private:
  net::OutputQueue* queue_;
  std::string text_;
};

class RespValueCapture;  // server/resp_value_capture.h

// Runs one command (args[0] is its name, any case) and writes its reply; true when the reply is
// an error. Unknown commands, wrong arity and refusals are error replies; the connection always
// goes on (except QUIT). A command that runs is counted in the node's counters
// (ServerCounters::RecordRespCommand). `captured`: the command's value was read into its
// reservation (one of `args` views it), which a write of it commits instead of copying.
bool RunRespCommand(CacheService& service, RespClient& client,
                    std::span<const std::string_view> args, RespOutput& out,
                    RespValueCapture* captured = nullptr);

// The keys the command `args` reads values of or changes in place (not those a plain write, a
// delete or a probe names), with, for a `<P>metadata` where pairs fold, its pair's data key:
// what a connection has brought from the disk tier, off its I/O thread, before the command
// runs. Empty for an unknown command or one that names no such key.
std::vector<std::string> KeysItReads(CacheService& service, const RespClient& client,
                                     std::span<const std::string_view> args);

// Replies with a refusal: NOPERM for a denied access, OOM for no space, else ERR with the
// status's name.
void ReplyStatus(protocol::RespWriter& w, const Status& status);

// True when a command's name or option `arg` is `upper_name` in any case ("set" is "SET").
bool ArgIs(std::string_view arg, std::string_view upper_name);

}  // namespace kvport::server
