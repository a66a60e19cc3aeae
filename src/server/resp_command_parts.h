// SPDX-License-Identifier: Apache-2.0
// What the Redis protocol's command files share: the Context a command runs in, the row of the
// command table, the helpers more than one family uses, and each command's entry point.
//
// Private to those files: server/resp_commands.cc (the table and its one check site),
// server/resp_command_parts.cc (the shared helpers) and one file per command family, split as
// the table's ACL categories are:
//   server/resp_connection.cc  @connection: PING, ECHO, HELLO, AUTH, CLIENT, SELECT, QUIT
//   server/resp_strings.cc     @string: GET, SET, SETEX, PSETEX, MGET, MSET, STRLEN, GETDEL
//   server/resp_keyspace.cc    @keyspace: EXISTS, DEL, UNLINK, EXPIRE, PEXPIRE, TTL, PTTL,
//                              PERSIST, SCAN, DBSIZE, FLUSHDB
//   server/resp_server.cc      the node and its commands: INFO, CONFIG GET, COMMAND
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/resp.h"
#include "server/cache_service.h"
#include "server/resp_commands.h"

namespace kvport::server::resp {

using protocol::RespWriter;
using Args = std::span<const std::string_view>;

// What the node reports as its Redis version (HELLO, INFO): clients gate features on it, and
// kvport serves the commands of docs/resp.md as Redis 7 does.
inline constexpr std::string_view kRedisVersion = "7.2.0";

// The largest TTL a write can carry (the store's whole seconds, 32 bits).
inline constexpr uint64_t kMaxTtlMs = uint64_t{UINT32_MAX} * 1000;

// What one command runs with: the node's service, its client, and where its reply goes.
struct Context {
  CacheService& service;
  RespClient& client;
  RespWriter& w;
  RespOutput& out;
  RespValueCapture* captured;  // the value read into its reservation, if any (RespValueCapture)
  const Grant& grant() const { return client.access.grant(); }
  const std::string& ns() const { return client.ns; }
  // Whether LMCache's key pairs fold here (docs/resp.md): asked for by the namespace's setting or
  // by the client; plain Redis keys otherwise.
  bool folds() const { return client.folds_pairs || service.FoldsRespPairs(client.ns); }
};

// --- the command table (server/resp_commands.cc) ---------------------------------------------

// What the dispatcher checks before a command runs, and what COMMAND tells clients (Redis's
// flag names). Access is the connection's namespace's: kWrite needs write of it, kReadonly read
// of it (or admin, as for LIST and STATS), kAdmin an admin token.
enum Flag : uint32_t {
  kWrite = 1 << 0,
  kReadonly = 1 << 1,
  kAdmin = 1 << 2,
  kNoAuth = 1 << 3,  // served before AUTH on a node with tokens
  kDenyOom = 1 << 4,
  kFast = 1 << 5,
  kLoading = 1 << 6,
  kStale = 1 << 7,
  kNoScript = 1 << 8,
  kAllowBusy = 1 << 9,
  // kvport's own, not Redis's (COMMAND does not list it): the command reads the stored value of
  // its keys or changes it in place, so with a disk tier a key only the disk holds is brought
  // into memory, off the I/O thread, before it runs (KeysItReads).
  kReadsValue = 1 << 10,
};
inline constexpr std::pair<Flag, std::string_view> kFlagNames[] = {
    {kWrite, "write"},          {kReadonly, "readonly"}, {kAdmin, "admin"},
    {kNoAuth, "no_auth"},       {kDenyOom, "denyoom"},   {kFast, "fast"},
    {kLoading, "loading"},      {kStale, "stale"},       {kNoScript, "noscript"},
    {kAllowBusy, "allow_busy"},
};

// One row of the table.
struct Command {
  std::string_view name;  // upper case; a subcommand's own word ("SETNAME")
  void (*run)(Context& c, Args a);
  // Redis's convention: N, exactly N arguments (the name included); -N, at least N. A
  // subcommand counts its container's name too (CLIENT SETNAME name: 3).
  int arity;
  uint32_t flags;
  // The keys: arguments first_key..last_key (negative: counted from the end, -1 the last)
  // every `step`; 0 0 0 for none.
  int first_key = 0, last_key = 0, step = 0;
  std::string_view acl = "";  // Redis's ACL categories, blank-separated
  // A container's (CLIENT, CONFIG, COMMAND) subcommands, each checked as a command of its own.
  const Command* subs = nullptr;
  size_t sub_count = 0;
  std::span<const Command> subcommands() const { return {subs, sub_count}; }
};

// The RESP commands, in the order of their counters' slots (ServerCounters::RecordRespCommand).
std::span<const Command> CommandTable();

// The row of `table` named `name` (any case); nullptr when none is.
const Command* FindIn(std::span<const Command> table, std::string_view name);

// Whether `arity` (Redis's convention) admits `count` arguments.
bool ArityAdmits(int arity, size_t count);

// The positions of the keys among `args` (args[0] the command's name) by the table's key
// positions, or nullopt when the command takes none.
std::optional<std::vector<size_t>> KeyPositions(const Command& command, size_t count);

// --- shared helpers (server/resp_command_parts.cc) -------------------------------------------

std::string Upper(std::string_view text);

// A Redis integer argument: optional '-', digits, fitting int64.
std::optional<int64_t> ParseInteger(std::string_view text);

// Redis's error replies for a bad integer, a bad option and a bad argument count.
void NotInteger(RespWriter& w);
void SyntaxError(RespWriter& w);
void WrongArity(RespWriter& w, std::string_view name);

// The key of the object a command on `key` acts on: `key`, or for a folded `<P>metadata` its
// pair's data key (kept in *folded, which the answer may point into).
std::string_view HomeOf(Context& c, std::string_view key, std::optional<std::string>* folded);

// Deletes `key`: with folding, a folded `<P>metadata` takes its pair along.
Status DeleteKey(Context& c, std::string_view key);

// --- the commands, by family -----------------------------------------------------------------

// server/resp_connection.cc
void Ping(Context& c, Args a);
void Echo(Context& c, Args a);
void Hello(Context& c, Args a);
void Auth(Context& c, Args a);
void ClientSetName(Context& c, Args a);
void ClientGetName(Context& c, Args a);
void ClientId(Context& c, Args a);
void ClientSetInfo(Context& c, Args a);
void ClientNamespace(Context& c, Args a);
void Select(Context& c, Args a);
void Quit(Context& c, Args a);

// server/resp_strings.cc
void Get(Context& c, Args a);
void SetCommand(Context& c, Args a);
// SETEX key seconds value (`unit_ms` 1000), PSETEX key ms value (1).
void SetWithExpiry(Context& c, Args a, uint64_t unit_ms);
void MGet(Context& c, Args a);
void MSet(Context& c, Args a);
void StrLen(Context& c, Args a);
void GetDel(Context& c, Args a);

// server/resp_keyspace.cc
void Exists(Context& c, Args a);
void Del(Context& c, Args a);  // DEL and UNLINK
// EXPIRE key seconds [NX|XX|GT|LT] (`unit_ms` 1000), PEXPIRE key ms [...] (1).
void Expire(Context& c, Args a, uint64_t unit_ms);
void Ttl(Context& c, Args a, bool millis);  // TTL, PTTL (`millis`)
void Persist(Context& c, Args a);
void Scan(Context& c, Args a);
void DbSize(Context& c, Args a);
void FlushDb(Context& c, Args a);

// server/resp_server.cc
void Info(Context& c, Args a);
void ConfigGet(Context& c, Args a);
void CommandCommand(Context& c, Args a);
void CommandCount(Context& c, Args a);
void CommandDocs(Context& c, Args a);
void CommandInfo(Context& c, Args a);
void CommandGetKeys(Context& c, Args a);
void CommandList(Context& c, Args a);

}  // namespace kvport::server::resp
