// SPDX-License-Identifier: Apache-2.0
// kvport configuration: one loader for client (LMCache-compatible) and node settings.
//
// Values come from three places; for each key the first that has it wins:
//   1. the environment: LMCACHE_<KEY> for LMCache and eic_* keys (LMCACHE_CHUNK_SIZE,
//      LMCACHE_EIC_TRANS_TYPE), KVPORT_<KEY> for kvport's own keys (KVPORT_CAPACITY);
//   2. the YAML file (ConfigSources::file, else the file named by LMCACHE_CONFIG_FILE); an eic_*
//      key may also be given inside extra_config (as LMCache users do), which ranks below the
//      same key at the top level of the file;
//   3. the documented default (the member initialisers below).
// docs/configuration.md lists every key with its type, unit, default and environment variable.
//
// This header does not include yaml-cpp: any layer can read a Config without it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kvport/export.h"
#include "kvport/status.h"

namespace kvport {

// Settings of a kvport cache node (`kvport serve`). Sizes are bytes after parsing.
struct KVPORT_API NodeSettings {
  std::string listen = "127.0.0.1:7470";  // host:port (or [v6]:port) the node listens on
  // A Unix-domain socket as well, for clients on this host: "" none; "auto"
  // ($XDG_RUNTIME_DIR or /tmp)/kvport-PORT.sock; or an absolute path (at most 107 bytes).
  std::string unix_socket = "auto";
  bool shared_memory = true;  // offer the arena to same-host clients on the Unix socket
  bool ucx = false;           // offer one-sided access to the arena over UCX (UCX_ATTACH)
  // The disk tier (ServerOptions::disk_dir, disk_capacity): "" none.
  std::string disk_dir;
  uint64_t disk_capacity = uint64_t{1} << 30;
  // Which namespaces' evicted objects go to disk: "NAME=TIER,..." with TIER memory or
  // memory+disk, "*" for every namespace not named (ParseNamespaceTiers); "" = all memory+disk.
  std::string namespace_tiers;
  bool disk_restore = true;  // rebuild the disk tier's index at start (false: start empty)
  uint32_t disk_stop_flush_secs = 30;  // a clean stop writes memory objects to disk this long
  // Per shared-memory session: values read in place (leases) and MSET reservations it may hold.
  uint32_t max_leases_per_session = 4096;
  uint32_t max_reservations_per_session = 256;
  uint64_t capacity = uint64_t{1} << 30;  // bytes of the node's arena
  // Lets `capacity` and max_local_cpu_size exceed this host's physical memory.
  bool allow_capacity_over_host_memory = false;
  uint32_t threads = 0;                           // worker threads; 0 = one per core
  uint32_t max_key_bytes = 8192;                  // longest key accepted
  uint32_t max_namespace_bytes = 255;             // longest namespace accepted
  uint32_t max_meta_bytes = 4096;                 // largest per-object metadata blob
  uint64_t max_value_bytes = uint64_t{1} << 30;   // largest object payload
  uint32_t max_batch_keys = 4096;                 // most keys in one batched request
  uint64_t max_frame_bytes = uint64_t{16} << 20;  // header + descriptors, no payloads
  uint64_t max_connection_outstanding_bytes = uint64_t{256} << 20;  // in flight per connection
  uint64_t max_queued_response_bytes = 0;  // queued responses' heap, node-wide; 0 = automatic
  uint64_t max_input_buffer_bytes = 0;     // requests being received, node-wide; 0 = automatic
  // Caps beside the arena; 0 = automatic (capacity / 8, capacity / 2, capacity / 2).
  uint64_t max_index_bytes = 0;      // heap for objects' keys, metadata, index entries
  uint64_t max_reserved_bytes = 0;   // arena bytes of writes in progress
  uint64_t max_pinned_bytes = 0;     // arena bytes of values being read
  uint32_t idle_timeout_secs = 300;  // close a connection idle this long; 0 = never
  // A request must arrive within request_timeout_secs + 1 s per min_request_bytes_per_sec bytes
  // received; 0 = no deadline (timeout) or no allowance (rate).
  uint32_t request_timeout_secs = 10;
  uint64_t min_request_bytes_per_sec = uint64_t{1} << 20;
  uint32_t max_connections = 4096;  // connections served at once; more are refused
  uint32_t hello_timeout_secs = 5;  // a new connection must complete HELLO within this
  // Connections from one address (a uid on the Unix socket) that have not completed HELLO.
  uint32_t max_unauthenticated_per_address = 256;
  // Access control (docs/security.md): a YAML file of the tokens clients must present ("" = no
  // tokens: the node serves loopback only, unless `insecure`); re-read on SIGHUP.
  std::string tokens_file;
  bool insecure = false;  // allow a non-loopback listen address without tokens
  // The HTTP endpoint (/metrics, /health, /stats): "" none; HOST:PORT; a bare PORT is loopback.
  std::string http_listen;
  // The Redis protocol (docs/resp.md): "" none; HOST:PORT; a bare PORT is loopback.
  std::string resp_listen;
  // Where the Redis protocol folds LMCache's key pairs (ParseRespFoldPairs): "" nowhere.
  std::string resp_fold_pairs;
  // Cluster membership in etcd (docs/cluster.md): "" = a standalone node. Otherwise the node
  // registers under this cluster's name at the etcd endpoints ("HOST:PORT,HOST:PORT").
  std::string cluster;
  std::string etcd;
  // TLS to etcd (docs/security.md, "etcd"): the CA file etcd's certificate must chain to (set:
  // every etcd endpoint is reached over https), and an optional client certificate and key for
  // an etcd run with --client-cert-auth.
  std::string etcd_tls_ca_file;
  std::string etcd_tls_cert_file;
  std::string etcd_tls_key_file;
  // etcd authentication: the user, and a file whose first line is its password (never the
  // password itself in the config).
  std::string etcd_user;
  std::string etcd_password_file;
  std::string advertise;  // HOST:PORT clients connect to; "" = the listen address (not 0.0.0.0)
  std::string node_id;    // the node's name in the cluster; "" = the advertised address
  uint32_t lease_ttl_secs = 10;        // a node that stops renewing its lease is gone after this
  std::string on_lease_loss = "keep";  // "keep" or "drop" what it stores when its lease lapses
};

// Where an effective value came from.
enum class ConfigSource { kDefault, kFile, kEnvironment };

// One line of `kvport config check`: an effective value and its origin.
struct KVPORT_API ConfigEntry {
  std::string key;  // "max_local_cpu_size", or "extra_config.<name>" for extra_config entries
  // The effective value as text: a string key's value exactly as it is (not quoted), numbers
  // and bools as YAML writes them ("5", "2.5", "true"), "{}" for an empty extra_config.
  std::string value;
  std::string human;       // sizes in human form ("5 GiB"); empty for other keys
  bool is_string = false;  // value is a string: printed quoted and escaped, a JSON string
  ConfigSource source = ConfigSource::kDefault;
  std::string origin;   // "default", "file:PATH", "env:VAR" (extra_config adds " (extra_config)")
  std::string env_var;  // the variable that overrides this key ("" for extra_config entries)
};

struct KVPORT_API Config {
  // --- LMCache keys (same names, units and defaults as LMCache) -----------------------------
  uint32_t chunk_size = 256;  // tokens per chunk
  bool local_cpu = true;      // keep a local CPU tier in front of the remote one
  // max_local_cpu_size is written in GiB (a float; bytes = x * 1024^3), stored here in bytes.
  uint64_t max_local_cpu_size_bytes = uint64_t{5} << 30;
  uint64_t max_local_disk_size_bytes = 0;  // written in GiB; 0 = no local disk tier
  std::string local_disk;                  // path of the local disk tier; "" = none
  std::string remote_url;                  // "eic://host:port" selects a kvport node; "" = none
  std::string remote_serde = "naive";
  bool save_unfull_chunk = false;  // keep a trailing partial chunk
  uint32_t blocking_timeout_secs = 10;
  // Free-form pass-through (LMCache's extra_config); scalar values as written, nested values as
  // YAML flow text. eic_* entries found here also set the eic_* fields below.
  std::map<std::string, std::string> extra_config;

  // --- EIC client keys (LMCache's EIC connector) -------------------------------------------
  std::string eic_instance_id;
  uint32_t eic_thread_num = 6;
  std::string eic_log_dir;
  uint32_t eic_log_level = 1;
  // 0 automatic, 1 TCP, 2 RDMA (UCX), 3 GPUDirect RDMA (staged); kvport/transport.h says what
  // each resolves to. The default is LMCache's (3): a file without the key means to kvport what
  // it means to LMCache's EIC connector.
  uint32_t eic_trans_type = 3;
  int64_t eic_kv_ttl = -1;  // seconds an object lives; -1 = no expiry
  std::string eic_kv_ns;    // namespace of every key; "" = the default namespace
  std::string eic_flag_file;

  // --- TLS (docs/security.md, "TLS"), node and client alike --------------------------------
  // This process's certificate chain and key (PEM): a node's server certificate (required for
  // TLS), a client's certificate for a node that asks for one. tls_ca_file: the CA the peer's
  // certificate must chain to: on a client it turns TLS on (the node is verified, name
  // included); on a node it makes client certificates required (mutual TLS).
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_ca_file;
  // A client: the node's certificate must name the host connected to (InitOptions::
  // tls_verify_hostname). false accepts any certificate the CA signed.
  bool tls_verify_hostname = true;

  // --- kvport client -----------------------------------------------------------------------
  // A file holding the token this client presents to a node that requires one (its first
  // line; docs/security.md). "" = none, or the KVPORT_TOKEN environment variable.
  std::string token_file;
  // A cluster remote_url (docs/cluster.md): the nodes each key is written to, and how many of
  // them must store it for the write to succeed. The URL's ?replicas= and ?write_quorum= win.
  uint32_t replicas = 1;
  uint32_t write_quorum = 1;
  // InitOptions::busy_poll, in microseconds (0..1000000).
  uint32_t busy_poll_us = 0;
  // InitOptions::checksums: each value's xxh3-64 computed at its put and checked at its get
  // (docs/client.md, "Checksums"). false: none computed, none checked.
  bool checksums = true;
  // InitOptions::ucx_devices, the UCX lanes separated by ';' ("mlx5_0:1;mlx5_1:1"), each lane's
  // devices in UCX_NET_DEVICES' syntax; "" = one lane, the process's UCX configuration.
  std::string ucx_devices;

  // --- kvport node -------------------------------------------------------------------------
  NodeSettings node;

  // --- Accelerator runtimes (device/) ------------------------------------------------------
  std::string cuda_runtime_library;    // path of libcudart; "" = search the standard sonames
  std::string ascend_runtime_library;  // path of libascendcl; "" = search incl. $ASCEND_HOME_PATH
  std::string ucx_library;             // UCX's libucp (a path or soname); "" = libucp.so.0
  std::string log_level = "info";      // debug, info, warn, error, off
  std::string log_format = "text";     // text, or json (one object per line)

  // --- What the loader saw -----------------------------------------------------------------
  std::string file;                   // the YAML file read; "" when none
  std::vector<ConfigEntry> entries;   // every key's effective value, in documentation order
  std::vector<std::string> warnings;  // unknown keys, conflicts, suspicious values
  // Keys an engine reads from its own file and kvport does not (LMCache's, SGLang's, AIBrix's):
  // "FILE:LINE: KEY is read by LMCache, not by kvport". Not warnings: the file is the engine's.
  std::vector<std::string> engine_keys;

  // The entry for `key`, or nullptr.
  const ConfigEntry* FindEntry(const std::string& key) const;
};

struct KVPORT_API ConfigSources {
  // The YAML file to read. When unset or empty, LMCACHE_CONFIG_FILE (looked up in `env`) names
  // it; when that is unset too, only the environment and the defaults apply.
  std::optional<std::string> file;
  // The environment to read overrides from. Unset: the process environment (getenv).
  std::optional<std::map<std::string, std::string>> env;
  // The host memory capacities are checked against. Unset: HostPhysicalMemoryBytes().
  std::optional<uint64_t> host_memory_bytes;
  // Also log every warning (log::Warn). `kvport config check` prints them itself.
  bool log_warnings = true;
};

// The largest config file LoadConfig reads.
inline constexpr uint64_t kMaxConfigFileBytes = uint64_t{1} << 20;

// Loads, validates and returns the effective configuration. Errors are InvalidArgument (a bad
// value, malformed YAML, a file that is not a map, a file that is not a regular file (a FIFO, a
// device, a folder: never opened for a blocking read) or is larger than kMaxConfigFileBytes),
// NotFound (the file does not exist) or IoError (it cannot be read); the
// message names the file and line or the environment variable, the key, the value and its
// unit, the rule it broke and, where it can tell, what was probably meant. All invalid values
// are reported at once, separated by "; ".
KVPORT_API Result<Config> LoadConfig(const ConfigSources& sources);

// The lanes of a ucx_devices value: the parts between ';', each trimmed of blanks (an empty
// part stays, empty: LoadConfig refuses those). Views into `ucx_devices`.
KVPORT_API std::vector<std::string_view> SplitUcxLanes(std::string_view ucx_devices);

// A namespace_tiers value ("sglang=memory, *=memory+disk"): each named namespace to whether
// its evicted objects go to the disk tier (memory+disk: true; memory: false); "*" stands for
// every namespace not named, and an empty name ("=memory") for the default namespace "". Blanks
// around names and tiers are dropped; a namespace holding ',' or '=' cannot be named.
// InvalidArgument for an unknown tier, a part without '=', or a name given twice.
KVPORT_API Result<std::map<std::string, bool>> ParseNamespaceTiers(std::string_view text);

// A resp_fold_pairs value: namespace names separated by commas (blanks around them dropped),
// "*" for every namespace; an empty item names the default namespace ("," alone: just it). ""
// is none. InvalidArgument for a name given twice.
KVPORT_API Result<std::set<std::string, std::less<>>> ParseRespFoldPairs(std::string_view text);

// `kvport config check` output: one "key: value  (origin)" line per entry (sizes followed by
// "= <human>", strings in double quotes), then one "warning: ..." line per warning. Control
// bytes and invalid UTF-8 in any of it are escaped (common/escape_text.h): one entry, one line.
KVPORT_API std::string DescribeConfig(const Config& config);
// The same as one JSON object on one line: {"file": ..., "values": {key: {"value", "source",
// "env", ["human"]}}, "warnings": [...]}. Always valid JSON: invalid UTF-8 in a string becomes
// U+FFFD (docs/configuration.md, "JSON output and escaping").
KVPORT_API std::string DescribeConfigJson(const Config& config);

}  // namespace kvport
