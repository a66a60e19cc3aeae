// SPDX-License-Identifier: Apache-2.0
// Operator commands against a running node, through the client SDK:
//
//   kvport put    (--url URL | --config FILE) [--ns NS] [--ttl S] [--meta T]
//                 KEY [FILE|-]
//   kvport get    (--url ... | --config FILE) [--ns NS] [--max-bytes SIZE] KEY [FILE|-]
//   kvport exists (--url ... | --config FILE) [--ns NS] KEY...
//   kvport del    (--url ... | --config FILE) [--ns NS] KEY...
//   kvport stat   (--url ... | --config FILE) [--json]
//
// URL is eic://HOST:PORT[/NS], a cluster (eic://A:P;B:P[/NS], eic://etcd:HOST:PORT/CLUSTER[/NS];
// docs/cluster.md: stat then sums the nodes and lists each) or unix:/PATH. --config takes
// remote_url, eic_trans_type, eic_kv_ns, eic_kv_ttl, blocking_timeout_secs, token_file,
// replicas, write_quorum and the runtime library paths from an LMCache-style YAML through the one
// config loader, so an operator can check a deployment's config against a node before starting an
// engine: a GPUDirect config on a host that cannot do it fails here, with the reason. With --url
// alone the client chooses the transport itself (eic_trans_type 0: shared memory with a node on
// this host that offers it, TCP otherwise); --url unix:/PATH asks for shared memory. Precedence:
// --url over remote_url; --ns over the URL's /NS over eic_kv_ns; --ttl over eic_kv_ttl.
#include <fmt/core.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "common/escape_text.h"
#include "kvport/client.h"
#include "kvport/config.h"
#include "kvport/size.h"

namespace kvport::cli {
namespace {

struct OpsOptions {
  std::string url;
  std::string config_file;
  std::optional<std::string> ns;
  std::optional<int64_t> ttl_seconds;
  std::optional<std::string> meta;
  std::optional<double> timeout_secs;
  std::string token_file;
  std::string max_bytes = "1GiB";  // get: the largest value it allocates for
  bool json = false;
  std::vector<std::string> args;  // KEY [FILE|-], or KEY...
};

// Everything a command needs once options are resolved: a connected client and the namespace.
struct Session {
  Client client;
  std::string ns;
  int64_t ttl_seconds = -1;
};

void AddConnectionOptions(CLI::App* cmd, OpsOptions* o) {
  cmd->add_option("--url", o->url,
                  "The node or cluster: eic://HOST:PORT[/NS], HOST:PORT, unix:/PATH, "
                  "HOST:PORT;HOST:PORT or etcd:HOST:PORT/CLUSTER (docs/cluster.md)");
  cmd->add_option("--config", o->config_file,
                  "LMCache-style YAML: remote_url, eic_trans_type, eic_kv_ns, eic_kv_ttl, "
                  "blocking_timeout_secs, token_file, replicas, write_quorum, busy_poll_us");
  cmd->add_option("--timeout", o->timeout_secs,
                  "Seconds per call (default: blocking_timeout_secs, 10)");
  cmd->add_option("--token-file", o->token_file,
                  "File whose first line is the node's access token (default: the config's "
                  "token_file, then $KVPORT_TOKEN)");
}

Result<std::unique_ptr<Session>> Connect(const OpsOptions& o) {
  InitOptions init;  // eic_trans_type 0 (auto) unless the config says otherwise
  std::string url = o.url;
  std::string config_ns;
  int64_t ttl = -1;
  double timeout = 10;
  if (!o.config_file.empty()) {
    ConfigSources sources;
    sources.file = o.config_file;
    KVPORT_ASSIGN_OR_RETURN(Config config, LoadConfig(sources));
    if (url.empty()) url = config.remote_url;
    init.transport_type = static_cast<int>(config.eic_trans_type);
    init.log_dir = config.eic_log_dir;
    init.flag_file = config.eic_flag_file;
    init.cuda_runtime_library = config.cuda_runtime_library;
    init.ascend_runtime_library = config.ascend_runtime_library;
    init.token_file = config.token_file;
    init.tls_ca_file = config.tls_ca_file;
    init.tls_cert_file = config.tls_cert_file;
    init.tls_key_file = config.tls_key_file;
    init.tls_verify_hostname = config.tls_verify_hostname;
    init.replicas = static_cast<int>(config.replicas);
    init.write_quorum = static_cast<int>(config.write_quorum);
    init.busy_poll = std::chrono::microseconds(config.busy_poll_us);
    config_ns = config.eic_kv_ns;
    ttl = config.eic_kv_ttl;
    timeout = config.blocking_timeout_secs;
  }
  if (url.empty()) {
    return Status::InvalidArgument(
        "no node given: pass --url eic://HOST:PORT, or --config FILE with remote_url");
  }
  if (o.timeout_secs) timeout = *o.timeout_secs;
  if (!(timeout > 0)) return Status::InvalidArgument("--timeout must be a positive number");
  init.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000));
  init.connections = 1;
  if (!o.token_file.empty()) init.token_file = o.token_file;
  KVPORT_ASSIGN_OR_RETURN(std::string url_ns, EndpointNamespace(url));

  auto session = std::make_unique<Session>();
  session->ns = o.ns ? *o.ns : (!url_ns.empty() ? url_ns : config_ns);
  session->ttl_seconds = o.ttl_seconds ? *o.ttl_seconds : ttl;
  KVPORT_RETURN_IF_ERROR(session->client.Init("kvport-cli", url, init));
  return session;
}

Result<std::vector<char>> ReadInput(const std::string& path) {
  std::FILE* f = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::FromErrno("open " + path, errno);
  std::vector<char> bytes;
  char chunk[1 << 16];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof(chunk), f)) > 0)
    bytes.insert(bytes.end(), chunk, chunk + n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  if (f != stdin) std::fclose(f);
  if (failed) return Status::FromErrno("read " + path, err);
  return bytes;
}

Status WriteOutput(const std::string& path, const char* data, size_t size) {
  std::FILE* f = path == "-" ? stdout : std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::FromErrno("open " + path, errno);
  const bool written = std::fwrite(data, 1, size, f) == size;
  const int err = errno;
  const bool closed = f == stdout ? std::fflush(f) == 0 : std::fclose(f) == 0;
  if (!written || !closed) return Status::FromErrno("write " + path, err);
  return Status::Ok();
}

std::string Where(const Session& s) {
  return fmt::format("namespace '{}' on {}", s.ns, s.client.endpoint());
}

int RunPut(const OpsOptions& o) {
  if (o.args.empty() || o.args.size() > 2) {
    std::fprintf(stderr, "kvport put: expected KEY [FILE|-]\n");
    return 2;
  }
  const std::string& key = o.args[0];
  Result<std::vector<char>> value = ReadInput(o.args.size() > 1 ? o.args[1] : "-");
  if (!value.ok()) return Fail(value.status());
  Result<std::unique_ptr<Session>> s = Connect(o);
  if (!s.ok()) return Fail(s.status());
  IOBuffers buffers;
  buffers.Append(value->data(), value->size());
  SetOptions set;
  set.ns = (*s)->ns;
  set.ttl_seconds = (*s)->ttl_seconds;
  std::vector<std::string> metas;
  if (o.meta) metas.push_back(*o.meta);
  Result<BatchResult> r = (*s)->client.MSet({key}, buffers, set, metas);
  if (!r.ok()) return Fail(r.status());
  if (r->status != BatchCode::kSuccess) return Fail(r->error);
  std::printf("stored '%s': %zu bytes in %s\n", key.c_str(), value->size(), Where(**s).c_str());
  return 0;
}

// A buffer of `size` bytes for a value the node announced, allocated without zero-filling (the
// read overwrites it). The size comes from the node: it is checked against the client's own
// limit first, and an allocation that fails is a Status, not an abort.
Result<std::unique_ptr<char[]>> ValueBuffer(const std::string& key, uint64_t size,
                                            uint64_t max_bytes) {
  if (size > max_bytes) {
    return Status::TooLarge(fmt::format(
        "get '{}': the node reports a value of {} ({} bytes), more than --max-bytes {}; pass a "
        "larger --max-bytes to read it",
        key, FormatSize(size), size, FormatSize(max_bytes)));
  }
  std::unique_ptr<char[]> buffer(new (std::nothrow) char[std::max<uint64_t>(size, 1)]);
  if (buffer == nullptr) {
    return Status::NoSpace(
        fmt::format("get '{}': cannot allocate {} for its value", key, FormatSize(size)));
  }
  return buffer;
}

int RunGet(const OpsOptions& o) {
  if (o.args.empty() || o.args.size() > 2) {
    std::fprintf(stderr, "kvport get: expected KEY [FILE|-]\n");
    return 2;
  }
  const std::string& key = o.args[0];
  Result<uint64_t> max_bytes = ParseSize(o.max_bytes, SizeUnit::kBytes);
  if (!max_bytes.ok()) return Fail(max_bytes.status().WithContext("--max-bytes"));
  Result<std::unique_ptr<Session>> s = Connect(o);
  if (!s.ok()) return Fail(s.status());
  GetOptions get;
  get.ns = (*s)->ns;
  // Size first, then read into a buffer of exactly that size. The value may be replaced in
  // between by a larger one; then its new size is known and the read is retried.
  Result<GetResult> sized = (*s)->client.MGetMeta({key}, get);
  if (!sized.ok()) return Fail(sized.status());
  uint64_t size = sized->value_sizes[0];
  for (int attempt = 0; sized->codes[0] == KeyCode::kSuccess && attempt < 5; ++attempt) {
    Result<std::unique_ptr<char[]>> value = ValueBuffer(key, size, *max_bytes);
    if (!value.ok()) return Fail(value.status());
    IOBuffers buffers;
    buffers.Append(value->get(), size);
    Result<GetResult> got = (*s)->client.MGet({key}, get, buffers);
    if (!got.ok()) return Fail(got.status());
    if (got->codes[0] == KeyCode::kBufferTooSmall) {
      size = got->value_sizes[0];
      continue;
    }
    if (got->codes[0] != KeyCode::kSuccess) return Fail(got->error);
    Status written =
        WriteOutput(o.args.size() > 1 ? o.args[1] : "-", value->get(), got->value_sizes[0]);
    return written.ok() ? 0 : Fail(written);
  }
  if (sized->codes[0] == KeyCode::kSuccess) {
    return Fail(Status::Aborted("get '" + key + "': the value kept changing size; try again"));
  }
  if (sized->codes[0] == KeyCode::kKeyNotExist) {
    return Fail(Status::NotFound("key '" + key + "' does not exist in " + Where(**s)));
  }
  return Fail(sized->error);
}

// exists and del: one line per key, exit 0 when every key succeeded, 1 otherwise.
int RunPerKey(const OpsOptions& o, bool del) {
  if (o.args.empty()) {
    std::fprintf(stderr, "kvport %s: expected KEY...\n", del ? "del" : "exists");
    return 2;
  }
  Result<std::unique_ptr<Session>> s = Connect(o);
  if (!s.ok()) return Fail(s.status());
  Result<BatchResult> r = del ? (*s)->client.MDel(o.args, DelOptions{(*s)->ns, {}})
                              : (*s)->client.MExist(o.args, ExistOptions{(*s)->ns, {}});
  if (!r.ok()) return Fail(r.status());
  for (size_t i = 0; i < o.args.size(); ++i) {
    std::string_view word = KeyCodeName(r->codes[i]);
    if (r->codes[i] == KeyCode::kSuccess) word = del ? "deleted" : "exists";
    std::printf("%s\t%.*s\n", o.args[i].c_str(), static_cast<int>(word.size()), word.data());
  }
  return r->status == BatchCode::kSuccess ? 0 : 1;
}

// The insecure warning, once per node that reports it.
void WarnInsecure(const std::string& node, const NodeStats& stats) {
  if (stats.Get("insecure") == 0) return;
  std::fprintf(stderr,
               "kvport stat: warning: node %s is INSECURE: it requires no token and listens "
               "beyond loopback, so anyone who reaches it can read, overwrite and delete "
               "every key (docs/security.md)\n",
               node.c_str());
}

int RunStat(const OpsOptions& o) {
  if (!o.args.empty()) {
    std::fprintf(stderr, "kvport stat: takes no arguments\n");
    return 2;
  }
  Result<std::unique_ptr<Session>> s = Connect(o);
  if (!s.ok()) return Fail(s.status());
  Client& client = (*s)->client;
  // A cluster: each node asked once; the sum first, then each node.
  std::vector<NodeReport> nodes;
  Result<NodeStats> stats = Status::Internal("not asked");
  if (client.is_cluster()) {
    Result<std::vector<NodeReport>> reports = client.StatsPerNode();
    if (!reports.ok()) return Fail(reports.status());
    nodes = std::move(reports).value();
    stats = SumNodeStats(nodes);
    if (!stats.ok()) return Fail(stats.status());
    for (const NodeReport& node : nodes)
      WarnInsecure(node.address, node.stats);
  } else {
    stats = client.Stats();
    if (!stats.ok()) return Fail(stats.status());
    WarnInsecure(client.endpoint(), *stats);
  }
  // Names come from the node and are bytes: they may hold newlines, terminal escapes, NULs or
  // invalid UTF-8. Text output escapes them (common/escape_text.h), so every line printed is
  // one the node's real data produced; JSON output is always valid JSON (invalid UTF-8 becomes
  // U+FFFD; docs/client.md, "Operator commands").
  std::string out;
  if (o.json) {
    using Json = nlohmann::ordered_json;
    auto counters_of = [](const NodeStats& of) {
      Json counters = Json::object();
      for (const auto& [name, value] : of.counters)
        counters[name] = value;
      return counters;
    };
    Json namespaces = Json::array();
    for (const auto& ns : stats->namespaces) {
      namespaces.push_back({{"name", ns.name}, {"objects", ns.objects}, {"bytes", ns.bytes}});
    }
    Json json = {{"node", client.endpoint()},
                 {"counters", counters_of(*stats)},
                 {"namespaces", std::move(namespaces)}};
    if (client.is_cluster()) {
      Json per_node = Json::array();
      for (const NodeReport& node : nodes) {
        Json entry = {{"id", node.id},
                      {"address", node.address},
                      {"epoch", std::to_string(node.epoch)},
                      {"status", node.status.ok() ? "ok" : node.status.ToString()}};
        if (node.status.ok()) entry["counters"] = counters_of(node.stats);
        per_node.push_back(std::move(entry));
      }
      json["nodes"] = std::move(per_node);
    }
    out = json.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace) + "\n";
  } else {
    out = fmt::format("{} {}\n", client.is_cluster() ? "cluster" : "node",
                      EscapeText(client.endpoint()));
    for (const auto& [name, value] : stats->counters)
      out += fmt::format("{:<28} {}\n", EscapeText(name), value);
    for (const auto& ns : stats->namespaces) {
      out += fmt::format("namespace '{}': {} objects, {} bytes\n", EscapeText(ns.name, '\''),
                         ns.objects, ns.bytes);
    }
    for (const NodeReport& node : nodes) {
      out += fmt::format("node {} at {} epoch {}: ", EscapeText(node.id), EscapeText(node.address),
                         node.epoch);
      if (!node.status.ok()) {
        out += "unreachable: " + EscapeText(node.status.ToString()) + "\n";
        continue;
      }
      out += fmt::format("capacity_bytes {} used_bytes {} objects {}\n",
                         node.stats.Get("capacity_bytes"), node.stats.Get("used_bytes"),
                         node.stats.Get("objects"));
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

void AddOpsCommands(CLI::App& app, int* exit_code) {
  {
    auto o = std::make_shared<OpsOptions>();
    CLI::App* cmd = app.add_subcommand(
        "put", "Store a value (from FILE, or stdin with - or no FILE) under KEY on a node");
    AddConnectionOptions(cmd, o.get());
    cmd->add_option("--ns", o->ns, "Namespace (default: the URL's /NS, then eic_kv_ns)");
    cmd->add_option("--ttl", o->ttl_seconds,
                    "Seconds the value lives (default: eic_kv_ttl; -1 none)");
    cmd->add_option("--meta", o->meta, "A metadata blob stored atomically with the value");
    cmd->add_option("KEY FILE", o->args, "KEY, then FILE or - (stdin)")->expected(1, 2)->required();
    cmd->callback([o, exit_code] { *exit_code = RunPut(*o); });
  }
  {
    auto o = std::make_shared<OpsOptions>();
    CLI::App* cmd = app.add_subcommand(
        "get", "Write the value of KEY to FILE, or byte for byte to stdout with - or no FILE");
    AddConnectionOptions(cmd, o.get());
    cmd->add_option("--ns", o->ns, "Namespace (default: the URL's /NS, then eic_kv_ns)");
    cmd->add_option("--max-bytes", o->max_bytes,
                    "The largest value to read (e.g. 4GiB); a larger one fails without being "
                    "allocated")
        ->capture_default_str();
    cmd->add_option("KEY FILE", o->args, "KEY, then FILE or - (stdout)")
        ->expected(1, 2)
        ->required();
    cmd->callback([o, exit_code] { *exit_code = RunGet(*o); });
  }
  for (bool del : {false, true}) {
    auto o = std::make_shared<OpsOptions>();
    CLI::App* cmd = app.add_subcommand(
        del ? "del" : "exists",
        del ? "Delete KEYs; one line per key; exit 1 unless every key was deleted"
            : "Check KEYs exist; one line per key; exit 1 unless every key exists");
    AddConnectionOptions(cmd, o.get());
    cmd->add_option("--ns", o->ns, "Namespace (default: the URL's /NS, then eic_kv_ns)");
    cmd->add_option("KEY", o->args, "Keys")->expected(1, -1)->required();
    cmd->callback([o, exit_code, del] { *exit_code = RunPerKey(*o, del); });
  }
  {
    auto o = std::make_shared<OpsOptions>();
    CLI::App* cmd = app.add_subcommand("stat", "Print a node's statistics (STATS)");
    AddConnectionOptions(cmd, o.get());
    cmd->add_flag("--json", o->json, "Print one JSON object instead of text");
    cmd->callback([o, exit_code] { *exit_code = RunStat(*o); });
  }
}

}  // namespace kvport::cli
