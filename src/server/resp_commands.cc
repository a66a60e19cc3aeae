// SPDX-License-Identifier: Apache-2.0
// The Redis protocol's command table (each command's arity, flags, key positions, ACL categories
// and subcommands) and the one place a command is checked against it and run (RunRespCommand);
// the commands themselves are in their families' files (server/resp_command_parts.h).
#include "server/resp_commands.h"

#include <fmt/core.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "server/resp_chunk_pair.h"
#include "server/resp_command_parts.h"

namespace kvport::server {

namespace resp {

namespace {

constexpr uint32_t kConnection = kNoScript | kLoading | kStale | kFast;
constexpr Command kClientSubcommands[] = {
    {"SETNAME", ClientSetName, 3, kConnection, 0, 0, 0, "@slow @connection"},
    {"GETNAME", ClientGetName, 2, kConnection, 0, 0, 0, "@slow @connection"},
    {"ID", ClientId, 2, kConnection, 0, 0, 0, "@slow @connection"},
    {"SETINFO", ClientSetInfo, 4, kConnection, 0, 0, 0, "@slow @connection"},
    {"NAMESPACE", ClientNamespace, -2, kConnection, 0, 0, 0, "@slow @connection"},
};
constexpr Command kCommandSubcommands[] = {
    {"COUNT", CommandCount, 2, kLoading | kStale, 0, 0, 0, "@slow @connection"},
    {"DOCS", CommandDocs, -2, kLoading | kStale, 0, 0, 0, "@slow @connection"},
    {"INFO", CommandInfo, -2, kLoading | kStale, 0, 0, 0, "@slow @connection"},
    {"GETKEYS", CommandGetKeys, -3, kLoading | kStale, 0, 0, 0, "@slow @connection"},
    {"LIST", CommandList, -2, kLoading | kStale, 0, 0, 0, "@slow @connection"},
};
// CONFIG GET is not admin here (Redis's is): redis-benchmark asks it of any token at start,
// and it tells nothing a client could not learn from INFO.
constexpr Command kConfigSubcommands[] = {
    {"GET", ConfigGet, -3, kNoScript | kLoading | kStale, 0, 0, 0, "@slow"},
};

// The RESP commands, in the order of their counters' slots (ServerCounters::RecordRespCommand).
// clang-format off
constexpr Command kCommands[] = {
    {"PING", Ping, -1, kFast, 0, 0, 0, "@fast @connection"},
    {"ECHO", Echo, 2, kFast, 0, 0, 0, "@fast @connection"},
    {"HELLO", Hello, -1, kConnection | kNoAuth | kAllowBusy, 0, 0, 0, "@fast @connection"},
    {"AUTH", Auth, -2, kConnection | kNoAuth | kAllowBusy, 0, 0, 0, "@fast @connection"},
    {"CLIENT", nullptr, -2, 0, 0, 0, 0, "", kClientSubcommands, std::size(kClientSubcommands)},
    {"SELECT", Select, 2, kLoading | kStale | kFast, 0, 0, 0, "@fast @connection"},
    {"GET", Get, 2, kReadonly | kFast | kReadsValue, 1, 1, 1, "@read @string @fast"},
    {"SET", SetCommand, -3, kWrite | kDenyOom, 1, 1, 1, "@write @string @slow"},
    {"SETEX", [](Context& c, Args a) { SetWithExpiry(c, a, 1000); }, 4, kWrite | kDenyOom, 1, 1, 1,
     "@write @string @slow"},
    {"PSETEX", [](Context& c, Args a) { SetWithExpiry(c, a, 1); }, 4, kWrite | kDenyOom, 1, 1, 1,
     "@write @string @slow"},
    {"MGET", MGet, -2, kReadonly | kFast | kReadsValue, 1, -1, 1, "@read @string @fast"},
    {"MSET", MSet, -3, kWrite | kDenyOom, 1, -1, 2, "@write @string @slow"},
    {"EXISTS", Exists, -2, kReadonly | kFast, 1, -1, 1, "@keyspace @read @fast"},
    {"DEL", Del, -2, kWrite, 1, -1, 1, "@keyspace @write @slow"},
    {"UNLINK", Del, -2, kWrite | kFast, 1, -1, 1, "@keyspace @write @fast"},
    {"EXPIRE", [](Context& c, Args a) { Expire(c, a, 1000); }, -3, kWrite | kFast | kReadsValue, 1, 1, 1,
     "@keyspace @write @fast"},
    {"PEXPIRE", [](Context& c, Args a) { Expire(c, a, 1); }, -3, kWrite | kFast | kReadsValue, 1, 1, 1,
     "@keyspace @write @fast"},
    {"TTL", [](Context& c, Args a) { Ttl(c, a, false); }, 2, kReadonly | kFast | kReadsValue, 1, 1, 1,
     "@keyspace @read @fast"},
    {"PTTL", [](Context& c, Args a) { Ttl(c, a, true); }, 2, kReadonly | kFast | kReadsValue, 1, 1, 1,
     "@keyspace @read @fast"},
    {"PERSIST", Persist, 2, kWrite | kFast | kReadsValue, 1, 1, 1, "@keyspace @write @fast"},
    {"STRLEN", StrLen, 2, kReadonly | kFast | kReadsValue, 1, 1, 1, "@read @string @fast"},
    {"GETDEL", GetDel, 2, kWrite | kFast | kReadsValue, 1, 1, 1, "@write @string @fast"},
    {"SCAN", Scan, -2, kReadonly, 0, 0, 0, "@keyspace @read @slow"},
    {"DBSIZE", DbSize, 1, kReadonly | kFast, 0, 0, 0, "@keyspace @read @fast"},
    {"INFO", Info, -1, kLoading | kStale, 0, 0, 0, "@slow @dangerous"},
    {"COMMAND", CommandCommand, -1, kLoading | kStale, 0, 0, 0, "@slow @connection",
     kCommandSubcommands, std::size(kCommandSubcommands)},
    {"CONFIG", nullptr, -2, 0, 0, 0, 0, "", kConfigSubcommands, std::size(kConfigSubcommands)},
    {"QUIT", Quit, -1, kConnection | kNoAuth | kAllowBusy, 0, 0, 0, "@fast @connection"},
    // kvport deletes a namespace for an admin token only (docs/security.md).
    {"FLUSHDB", FlushDb, -1, kWrite | kAdmin, 0, 0, 0, "@keyspace @write @slow @dangerous"},
};
// clang-format on
static_assert(std::size(kCommands) <= ServerCounters::kRespCommandSlots,
              "each RESP command has a slot in the node's counters");

// The access a command needs on the connection's namespace, checked before it runs: its
// refusal, or OK. The service checks again on every store access (the one authority); this
// refuses a command whole before any of its work, with one message per right.
Status CheckAccess(const Context& c, const Command& command) {
  // A client that has not authenticated runs only the commands that need no access (the
  // dispatcher answered NOAUTH to the others), and holds no grant to look at.
  if ((command.flags & (kAdmin | kWrite | kReadonly)) == 0 || !c.client.access.authenticated()) {
    return Status::Ok();
  }
  const Grant& grant = c.grant();
  auto denied = [&](std::string_view right) {
    return Status::PermissionDenied(
        fmt::format("token '{}' may not {} namespace '{}'", grant.name(), right, c.ns()));
  };
  if ((command.flags & kAdmin) != 0 && !grant.admin()) {
    return Status::PermissionDenied(fmt::format(
        "token '{}' may not run {}: it needs an admin token", grant.name(), command.name));
  }
  if ((command.flags & kWrite) != 0 && !grant.may_write(c.ns())) return denied("write");
  if ((command.flags & kReadonly) != 0 && !grant.may_read(c.ns()) && !grant.admin()) {
    return denied("read");
  }
  return Status::Ok();
}

}  // namespace

std::span<const Command> CommandTable() {
  return kCommands;
}

const Command* FindIn(std::span<const Command> table, std::string_view name) {
  for (const Command& candidate : table) {
    if (ArgIs(name, candidate.name)) return &candidate;
  }
  return nullptr;
}

bool ArityAdmits(int arity, size_t count) {
  return arity >= 0 ? count == static_cast<size_t>(arity)
                    : count >= static_cast<size_t>(-static_cast<int64_t>(arity));
}

std::optional<std::vector<size_t>> KeyPositions(const Command& command, size_t count) {
  if (command.first_key == 0 || count <= static_cast<size_t>(command.first_key)) {
    return std::nullopt;
  }
  const int64_t last =
      command.last_key < 0 ? static_cast<int64_t>(count) + command.last_key : command.last_key;
  std::vector<size_t> positions;
  for (int64_t i = command.first_key; i <= last && i < static_cast<int64_t>(count);
       i += command.step) {
    positions.push_back(static_cast<size_t>(i));
  }
  return positions;
}

}  // namespace resp

using resp::Args;
using resp::ArityAdmits;
using resp::CheckAccess;
using resp::Command;
using resp::CommandTable;
using resp::Context;
using resp::FindIn;
using resp::KeyPositions;
using resp::kNoAuth;
using resp::kReadsValue;
using resp::WrongArity;

std::vector<std::string> KeysItReads(CacheService& service, const RespClient& client, Args args) {
  std::vector<std::string> keys;
  if (args.empty()) return keys;
  const Command* command = FindIn(CommandTable(), args[0]);
  if (command == nullptr || !ArityAdmits(command->arity, args.size())) return keys;
  if ((command->flags & kReadsValue) == 0) return keys;  // a write of whole values, a probe...
  std::optional<std::vector<size_t>> positions = KeyPositions(*command, args.size());
  if (!positions) return keys;
  const bool folds = client.folds_pairs || service.FoldsRespPairs(client.ns);
  for (size_t i : *positions) {
    keys.emplace_back(args[i]);
    if (std::string pair = folds ? PairDataKeyOf(args[i]) : std::string(); !pair.empty()) {
      keys.push_back(std::move(pair));
    }
  }
  return keys;
}

bool RunRespCommand(CacheService& service, RespClient& client, Args args, RespOutput& out,
                    RespValueCapture* captured) {
  protocol::RespWriter w(&out.text(), client.version);
  if (args.empty()) return false;
  const Command* command = FindIn(CommandTable(), args[0]);
  if (command == nullptr) {
    std::string shown(args[0].substr(0, 128));
    for (char& ch : shown)
      if (static_cast<unsigned char>(ch) < 0x20) ch = ' ';
    w.Error(fmt::format("ERR unknown command '{}', with args beginning with: ", shown));
    return true;
  }
  if (!client.access.authenticated() && (command->flags & kNoAuth) == 0) {
    w.Error("NOAUTH Authentication required.");
    return true;
  }
  if (client.access.authenticated()) {
    // The node's tokens may have been replaced (SIGHUP) since this client's AUTH.
    Status still = client.access.Refresh(service.access());
    if (!still.ok()) {
      // As a binary session: the connection ends (its grant is gone).
      w.Error("NOAUTH " + still.message());
      client.quit = true;
      return true;
    }
  }
  Context c{service, client, w, out, captured};
  const size_t before = out.text().size();
  const auto start = std::chrono::steady_clock::now();
  // The table's checks, in Redis's order: the subcommand, the arity, then the access; a refusal
  // is the command's (failed) reply.
  const Command* runs = command;
  if (!command->subcommands().empty() && (args.size() >= 2 || command->run == nullptr)) {
    runs = args.size() >= 2 ? FindIn(command->subcommands(), args[1]) : nullptr;
    if (runs == nullptr && args.size() >= 2) {
      w.Error(fmt::format("ERR unknown subcommand '{}'. Try {} HELP.", args[1].substr(0, 128),
                          command->name));
    } else if (runs == nullptr) {
      WrongArity(w, command->name);
    }
  }
  if (runs != nullptr) {
    if (!ArityAdmits(runs->arity, args.size())) {
      WrongArity(w, runs == command ? std::string(command->name)
                                    : fmt::format("{}|{}", command->name, runs->name));
    } else if (Status access = CheckAccess(c, *runs); !access.ok()) {
      ReplyStatus(w, access);
    } else {
      runs->run(c, args);
    }
  }
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  // An error reply starts with '-' (a value sent from the arena never comes first).
  const bool error = out.text().size() > before && out.text()[before] == '-';
  service.counters().RecordRespCommand(static_cast<size_t>(command - CommandTable().data()),
                                       &command->name, error, static_cast<uint64_t>(ns));
  return error;
}

}  // namespace kvport::server
