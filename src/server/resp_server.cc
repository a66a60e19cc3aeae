// SPDX-License-Identifier: Apache-2.0
// The Redis protocol's server commands: INFO, CONFIG GET and COMMAND (COUNT, DOCS, INFO,
// GETKEYS, LIST), which tell a client about the node and the commands it serves.
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include "kvport/size.h"
#include "server/resp_command_parts.h"
#include "server/resp_glob.h"

namespace kvport::server::resp {

namespace {

std::string Lower(std::string_view text) {
  std::string lower(text);
  for (char& ch : lower)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return lower;
}

// INFO's Commandstats section: per command, Redis's cmdstat line of calls, usec (the time spent
// running it), usec_per_call, rejected_calls (always 0: a command refused before it runs, as
// NOAUTH, is not counted) and failed_calls (its error replies). A command's counters' slot is its
// row in the table.
void AppendCommandStats(Context& c, std::string* text) {
  *text += "# Commandstats\r\n";
  const std::span<const Command> commands = CommandTable();
  for (size_t slot = 0; slot < commands.size(); ++slot) {
    const ServerCounters::RespCommandCounts counts = c.service.counters().RespCommand(slot);
    if (counts.calls == 0) continue;
    const double usec = static_cast<double>(counts.sum_ns) / 1e3;
    *text += fmt::format(
        "cmdstat_{}:calls={},usec={:.0f},usec_per_call={:.2f},rejected_calls=0,failed_calls={}"
        "\r\n",
        Lower(commands[slot].name), counts.calls, usec, usec / static_cast<double>(counts.calls),
        counts.errors);
  }
  *text += "\r\n";
}

// One command's COMMAND INFO entry, as Redis 7 writes it: name, arity, flags, first key, last
// key, step, ACL categories, tips, key specifications, subcommands. `container`: the name of the
// command a subcommand belongs to ("client|setname").
void WriteCommandInfo(RespWriter& w, const Command& command, std::string_view container = {}) {
  w.Array(10);
  w.Bulk(container.empty() ? Lower(command.name) : Lower(container) + "|" + Lower(command.name));
  w.Integer(command.arity);
  size_t flags = 0;
  for (const auto& [flag, name] : kFlagNames)
    flags += (command.flags & flag) != 0 ? 1 : 0;
  w.Set(flags);
  for (const auto& [flag, name] : kFlagNames) {
    if ((command.flags & flag) != 0) w.Simple(name);
  }
  w.Integer(command.first_key);
  w.Integer(command.last_key);
  w.Integer(command.step);
  std::vector<std::string_view> categories;
  for (std::string_view rest = command.acl; !rest.empty();) {
    const size_t blank = rest.find(' ');
    categories.push_back(rest.substr(0, blank));
    rest = blank == std::string_view::npos ? std::string_view() : rest.substr(blank + 1);
  }
  w.Set(categories.size());
  for (std::string_view category : categories)
    w.Simple(category);
  w.Array(0);  // tips
  // One key specification: the range first..last every step, as Redis gives for such commands
  // (find_keys' lastkey counts from the first key when not negative).
  if (command.first_key == 0) {
    w.Array(0);
  } else {
    w.Array(1);
    w.Map(3);
    w.Bulk("flags");
    w.Set(1);
    w.Simple((command.flags & kWrite) != 0 ? "RW" : "RO");
    w.Bulk("begin_search");
    w.Map(2);
    w.Bulk("type");
    w.Bulk("index");
    w.Bulk("spec");
    w.Map(1);
    w.Bulk("index");
    w.Integer(command.first_key);
    w.Bulk("find_keys");
    w.Map(2);
    w.Bulk("type");
    w.Bulk("range");
    w.Bulk("spec");
    w.Map(3);
    w.Bulk("lastkey");
    w.Integer(command.last_key < 0 ? command.last_key : command.last_key - command.first_key);
    w.Bulk("keystep");
    w.Integer(command.step);
    w.Bulk("limit");
    w.Integer(0);
  }
  w.Array(command.sub_count);
  for (const Command& sub : command.subcommands())
    WriteCommandInfo(w, sub, command.name);
}

struct ConfigValue {
  std::string_view name;
  std::string value;
};

}  // namespace

void Info(Context& c, Args a) {
  std::vector<std::string> sections;
  for (size_t i = 1; i < a.size(); ++i)
    sections.push_back(Upper(a[i]));
  auto wanted = [&](std::string_view name) {
    if (sections.empty()) return true;
    return std::any_of(sections.begin(), sections.end(), [&](const std::string& s) {
      return s == name || s == "ALL" || s == "EVERYTHING" || s == "DEFAULT";
    });
  };
  const ServerStats stats = c.service.Counters();
  std::string text;
  auto line = [&](std::string_view key, auto value) {
    text += fmt::format("{}:{}\r\n", key, value);
  };
  if (wanted("SERVER")) {
    text += "# Server\r\n";
    line("redis_version", kRedisVersion);
    line("redis_mode", "standalone");
    line("kvport_server", c.service.server_name());
    line("process_id", getpid());
    line("run_id", fmt::format("{:040x}", c.service.identity().node_id));
    text += "\r\n";
  }
  if (wanted("CLIENTS")) {
    text += "# Clients\r\n";
    line("connected_clients", stats.Get("connections"));
    line("maxclients", c.service.options().max_connections);
    line("blocked_clients", 0);
    text += "\r\n";
  }
  if (wanted("MEMORY")) {
    const uint64_t used = stats.Get("used_bytes");
    const uint64_t capacity = stats.Get("capacity_bytes");
    text += "# Memory\r\n";
    line("used_memory", used);
    line("used_memory_human", FormatSize(used));
    line("maxmemory", capacity);
    line("maxmemory_human", FormatSize(capacity));
    line("maxmemory_policy", "allkeys-lru");
    line("kvport_pinned_bytes", stats.Get("pinned_bytes"));
    line("kvport_reserved_bytes", stats.Get("reserved_bytes"));
    text += "\r\n";
  }
  if (wanted("STATS")) {
    text += "# Stats\r\n";
    line("total_connections_received", stats.Get("connections_accepted"));
    line("rejected_connections", stats.Get("connections_refused"));
    line("total_net_input_bytes", stats.Get("bytes_received"));
    line("total_net_output_bytes", stats.Get("bytes_sent"));
    line("keyspace_hits", stats.Get("hits"));
    line("keyspace_misses", stats.Get("misses"));
    line("evicted_keys", stats.Get("evictions"));
    line("expired_keys", stats.Get("expirations"));
    line("kvport_error_responses", stats.Get("error_responses"));
    text += "\r\n";
  }
  // Not among the default sections, as in Redis: INFO commandstats, all or everything.
  if (std::any_of(sections.begin(), sections.end(), [](const std::string& s) {
        return s == "COMMANDSTATS" || s == "ALL" || s == "EVERYTHING";
      })) {
    AppendCommandStats(c, &text);
  }
  if (wanted("KEYSPACE")) {
    text += "# Keyspace\r\n";
    Result<uint64_t> counted = c.service.KeysIn(c.grant(), c.ns());
    const uint64_t keys = counted.ok() ? *counted : 0;  // a namespace it may not read: none
    if (keys > 0) line("db0", fmt::format("keys={},expires=0,avg_ttl=0", keys));
    text += "\r\n";
  }
  c.w.Verbatim("txt", text);
}

void ConfigGet(Context& c, Args a) {
  const ServerStats stats = c.service.Counters();
  const std::vector<ConfigValue> values = {
      {"maxmemory", std::to_string(stats.Get("capacity_bytes"))},
      {"maxmemory-policy", "allkeys-lru"},
      {"maxclients", std::to_string(c.service.options().max_connections)},
      {"proto-max-bulk-len", std::to_string(c.service.limits().max_value_bytes)},
      {"databases", "1"},
      {"save", ""},
      {"appendonly", "no"},
      {"timeout", "0"},
  };
  std::vector<RespGlob> patterns;
  std::vector<std::string> uppers;  // the globs view them
  uppers.reserve(a.size() - 2);
  for (size_t i = 2; i < a.size(); ++i) {
    if (a[i].size() > RespGlob::kMaxPatternBytes) {
      return c.w.Error(fmt::format("ERR pattern of {} bytes is longer than {} (docs/resp.md)",
                                   a[i].size(), RespGlob::kMaxPatternBytes));
    }
    patterns.emplace_back(uppers.emplace_back(Upper(a[i])));
  }
  std::vector<const ConfigValue*> found;
  for (const ConfigValue& v : values) {
    for (const RespGlob& pattern : patterns) {
      if (pattern.Match(Upper(v.name))) {
        found.push_back(&v);
        break;
      }
    }
  }
  c.w.Map(found.size());
  for (const ConfigValue* v : found) {
    c.w.Bulk(v->name);
    c.w.Bulk(v->value);
  }
}

// COMMAND: every command's entry (what cluster-aware clients read at start to find keys).
void CommandCommand(Context& c, Args) {
  c.w.Array(CommandTable().size());
  for (const Command& command : CommandTable())
    WriteCommandInfo(c.w, command);
}

void CommandCount(Context& c, Args) {
  c.w.Integer(static_cast<int64_t>(CommandTable().size()));
}

// COMMAND DOCS: an empty map (no documentation is served; clients then show no hints).
void CommandDocs(Context& c, Args) {
  c.w.Map(0);
}

// COMMAND INFO [name...]: each named command's entry, null for a name not served ("client|id"
// names a subcommand); every command without a name.
void CommandInfo(Context& c, Args a) {
  if (a.size() == 2) return CommandCommand(c, a);
  c.w.Array(a.size() - 2);
  for (size_t i = 2; i < a.size(); ++i) {
    const size_t bar = a[i].find('|');
    const Command* command = FindIn(CommandTable(), a[i].substr(0, bar));
    if (command != nullptr && bar != std::string_view::npos) {
      const Command* sub = FindIn(command->subcommands(), a[i].substr(bar + 1));
      if (sub == nullptr) {
        c.w.NullArray();
        continue;
      }
      WriteCommandInfo(c.w, *sub, command->name);
      continue;
    }
    if (command == nullptr) {
      c.w.NullArray();
      continue;
    }
    WriteCommandInfo(c.w, *command);
  }
}

// COMMAND LIST: the names of the commands served (no FILTERBY: every one).
void CommandList(Context& c, Args a) {
  if (a.size() > 2) return c.w.Error("ERR COMMAND LIST FILTERBY is not supported by kvport");
  c.w.Array(CommandTable().size());
  for (const Command& command : CommandTable())
    c.w.Bulk(Lower(command.name));
}

// COMMAND GETKEYS command arg...: the keys the command would act on, by the table.
void CommandGetKeys(Context& c, Args a) {
  Args command_args = a.subspan(2);
  const Command* command = FindIn(CommandTable(), command_args[0]);
  if (command != nullptr && !command->subcommands().empty() && command_args.size() >= 2) {
    command = FindIn(command->subcommands(), command_args[1]);
  }
  if (command == nullptr) return c.w.Error("ERR Invalid command specified");
  if (!ArityAdmits(command->arity, command_args.size())) {
    return c.w.Error("ERR Invalid number of arguments specified for command");
  }
  std::optional<std::vector<size_t>> positions = KeyPositions(*command, command_args.size());
  if (!positions) return c.w.Error("ERR The command has no key arguments");
  c.w.Array(positions->size());
  for (size_t i : *positions)
    c.w.Bulk(command_args[i]);
}

}  // namespace kvport::server::resp
