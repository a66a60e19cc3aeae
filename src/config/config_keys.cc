// SPDX-License-Identifier: Apache-2.0
#include "config/config_keys.h"

#include <fmt/core.h>

#include <limits>
#include <type_traits>
#include <utility>

#include "config/address_check.h"
#include "config/value_parse.h"
#include "kvport/config.h"
#include "kvport/size.h"

namespace kvport::config_internal {
namespace {

// Bounds for keys whose own rule explains the valid values better than a range would.
constexpr int64_t kNoMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();

KeySpec NewKey(std::string_view key, std::string_view env, ValueKind kind) {
  KeySpec k;
  k.key = key;
  k.env_var = env;
  k.kind = kind;
  return k;
}

// FIELD(node.threads) names a Config member for both reading (const Config&) and writing.
#define FIELD(member)    \
  [](auto& c) -> auto& { \
    return c.member;     \
  }

template <typename F>
KeySpec BoolKey(std::string_view key, std::string_view env, F field) {
  KeySpec k = NewKey(key, env, ValueKind::kBool);
  k.set = [field](Config& c, std::string_view text, const LoadContext&) -> Status {
    KVPORT_ASSIGN_OR_RETURN(field(c), ParseBool(text));
    return Status::Ok();
  };
  k.show = [field](const Config& c) { return std::string(field(c) ? "true" : "false"); };
  return k;
}

// An integer key in [min, max]; `rule` (optional) adds a check with its own explanation.
template <typename F>
KeySpec IntKey(std::string_view key, std::string_view env, F field, int64_t min, int64_t max,
               std::string_view unit, std::function<Status(int64_t)> rule = nullptr) {
  KeySpec k = NewKey(key, env, ValueKind::kInteger);
  k.set = [=](Config& c, std::string_view text, const LoadContext&) -> Status {
    KVPORT_ASSIGN_OR_RETURN(int64_t v, ParseInteger(text, min, max, unit));
    if (rule) KVPORT_RETURN_IF_ERROR(rule(v));
    using T = std::remove_reference_t<decltype(field(c))>;
    field(c) = static_cast<T>(v);
    return Status::Ok();
  };
  k.show = [field](const Config& c) { return fmt::format("{}", field(c)); };
  return k;
}

// A string key; `rule` (optional) checks the value.
template <typename F>
KeySpec StringKey(std::string_view key, std::string_view env, F field,
                  std::function<Status(std::string_view)> rule = nullptr) {
  KeySpec k = NewKey(key, env, ValueKind::kString);
  k.set = [=](Config& c, std::string_view text, const LoadContext&) -> Status {
    if (rule) KVPORT_RETURN_IF_ERROR(rule(text));
    field(c) = std::string(text);
    return Status::Ok();
  };
  k.show = [field](const Config& c) { return field(c); };
  return k;
}

// How a size key is checked.
enum class SizeCheck {
  kMemoryCapacity,  // > 0 and within host memory unless allow_capacity_over_host_memory
  kDiskCapacity,    // >= 0 (0 disables); not compared with memory
  kLimit,           // > 0; a protocol limit, not memory that is allocated up front
  kLimitOrAuto,     // >= 0; 0 picks an automatic value (a node cap derived from capacity)
};

template <typename F>
KeySpec SizeKey(std::string_view key, std::string_view env, F field, SizeUnit bare_unit,
                SizeCheck check) {
  KeySpec k = NewKey(key, env, ValueKind::kSize);
  k.reads_other_keys = check == SizeCheck::kMemoryCapacity;
  k.set = [=](Config& c, std::string_view text, const LoadContext& ctx) -> Status {
    CapacityLimits limits;
    limits.host_memory_bytes = ctx.host_memory_bytes;
    limits.limit_to_host_memory =
        check == SizeCheck::kMemoryCapacity && !c.node.allow_capacity_over_host_memory;
    limits.allow_zero = check == SizeCheck::kDiskCapacity || check == SizeCheck::kLimitOrAuto;
    KVPORT_ASSIGN_OR_RETURN(
        field(c), ParseCapacity(key, text, bare_unit, limits,
                                check == SizeCheck::kMemoryCapacity ? ctx.warnings : nullptr));
    return Status::Ok();
  };
  k.show = [=](const Config& c) {
    const uint64_t bytes = field(c);
    if (bare_unit == SizeUnit::kBytes) return fmt::format("{}", bytes);
    return fmt::format("{:.6g}",
                       static_cast<double>(bytes) / static_cast<double>(SizeUnitBytes(bare_unit)));
  };
  k.human = [field](const Config& c) { return FormatSize(field(c)); };
  if (check == SizeCheck::kMemoryCapacity) {
    // A default is not the operator's mistake: say so, but do not refuse to start.
    k.check_default = [=](const Config& c, const LoadContext& ctx) {
      if (ctx.host_memory_bytes == 0 || c.node.allow_capacity_over_host_memory) return;
      if (field(c) > ctx.host_memory_bytes && ctx.warnings != nullptr) {
        ctx.warnings->push_back(fmt::format(
            "{}: the default {} is more than this host's physical memory ({}); set {} lower", key,
            FormatSize(field(c)), FormatSize(ctx.host_memory_bytes), key));
      }
    };
  }
  return k;
}

KeySpec MapKey(std::string_view key, std::string_view env) {
  KeySpec k = NewKey(key, env, ValueKind::kMap);
  k.show = [](const Config& c) {
    return c.extra_config.empty() ? std::string("{}") : std::string("(see below)");
  };
  return k;
}

KeySpec Eic(KeySpec k) {
  k.also_in_extra_config = true;
  return k;
}

Status CheckNonEmpty(std::string_view text) {
  if (text.empty()) return Status::InvalidArgument("must not be empty");
  return Status::Ok();
}

// ucx_devices: lanes separated by ';', none of them empty.
Status CheckUcxLanes(std::string_view lanes) {
  if (lanes.empty()) return Status::Ok();
  for (std::string_view lane : SplitUcxLanes(lanes)) {
    if (lane.empty()) {
      return Status::InvalidArgument(
          "an empty lane: give each lane's UCX devices, lanes separated by ';' "
          "(\"mlx5_0:1;mlx5_1:1\")");
    }
  }
  return Status::Ok();
}

Status CheckNamespaceTiers(std::string_view tiers) {
  return ParseNamespaceTiers(tiers).status();
}

Status CheckRespFoldPairs(std::string_view namespaces) {
  return ParseRespFoldPairs(namespaces).status();
}

Status CheckLogLevel(std::string_view level) {
  for (std::string_view known : {"debug", "info", "warn", "error", "off"}) {
    if (level == known) return Status::Ok();
  }
  return Status::InvalidArgument(fmt::format(
      "'{}' is not a log level; expected debug, info, warn, error or off", std::string(level)));
}

Status CheckLeaseLoss(std::string_view policy) {
  if (policy == "keep" || policy == "drop") return Status::Ok();
  return Status::InvalidArgument(fmt::format(
      "'{}' is not a lease-loss policy; expected keep or drop (docs/cluster.md, \"Lease loss\")",
      std::string(policy)));
}

Status CheckLogFormat(std::string_view format) {
  if (format == "text" || format == "json") return Status::Ok();
  return Status::InvalidArgument(
      fmt::format("'{}' is not a log format; expected text or json", std::string(format)));
}

// http_listen, resp_listen: "" (none), a bare port (loopback), or HOST:PORT like listen.
Status CheckHttpListen(std::string_view text) {
  if (text.empty()) return Status::Ok();
  if (text.find_first_not_of("0123456789") == std::string_view::npos) {
    if (text.size() <= 5 && std::stoul(std::string(text)) <= 65535) return Status::Ok();
    return Status::InvalidArgument(
        fmt::format("'{}' is not a port; expected 0..65535 or HOST:PORT", std::string(text)));
  }
  return CheckListenAddress(text);
}

Status CheckTransType(int64_t v) {
  if (v >= 0 && v <= 3) return Status::Ok();
  return Status::InvalidArgument(fmt::format(
      "{} is not a transport type; expected 0 (auto), 1 (TCP), 2 (RDMA) or 3 (GPUDirect RDMA)", v));
}

Status CheckTtl(int64_t v) {
  if (v == -1 || v > 0) return Status::Ok();
  return Status::InvalidArgument(fmt::format(
      "{} seconds is not a TTL: use -1 for no expiry or a positive number of seconds", v));
}

std::vector<KeySpec> MakeKeys() {
  constexpr uint32_t kU32 = std::numeric_limits<uint32_t>::max();
  std::vector<KeySpec> keys = {
      // LMCache keys.
      IntKey("chunk_size", "LMCACHE_CHUNK_SIZE", FIELD(chunk_size), 1, 1 << 24, "tokens"),
      BoolKey("local_cpu", "LMCACHE_LOCAL_CPU", FIELD(local_cpu)),
      SizeKey("max_local_cpu_size", "LMCACHE_MAX_LOCAL_CPU_SIZE", FIELD(max_local_cpu_size_bytes),
              SizeUnit::kGiB, SizeCheck::kMemoryCapacity),
      SizeKey("max_local_disk_size", "LMCACHE_MAX_LOCAL_DISK_SIZE",
              FIELD(max_local_disk_size_bytes), SizeUnit::kGiB, SizeCheck::kDiskCapacity),
      StringKey("local_disk", "LMCACHE_LOCAL_DISK", FIELD(local_disk)),
      StringKey("remote_url", "LMCACHE_REMOTE_URL", FIELD(remote_url), CheckRemoteUrl),
      StringKey("remote_serde", "LMCACHE_REMOTE_SERDE", FIELD(remote_serde), CheckNonEmpty),
      BoolKey("save_unfull_chunk", "LMCACHE_SAVE_UNFULL_CHUNK", FIELD(save_unfull_chunk)),
      IntKey("blocking_timeout_secs", "LMCACHE_BLOCKING_TIMEOUT_SECS", FIELD(blocking_timeout_secs),
             1, kU32, "seconds"),
      MapKey("extra_config", "LMCACHE_EXTRA_CONFIG"),
      // EIC keys.
      Eic(StringKey("eic_instance_id", "LMCACHE_EIC_INSTANCE_ID", FIELD(eic_instance_id))),
      Eic(IntKey("eic_thread_num", "LMCACHE_EIC_THREAD_NUM", FIELD(eic_thread_num), 1, 1024,
                 "threads")),
      Eic(StringKey("eic_log_dir", "LMCACHE_EIC_LOG_DIR", FIELD(eic_log_dir))),
      Eic(IntKey("eic_log_level", "LMCACHE_EIC_LOG_LEVEL", FIELD(eic_log_level), 0, 5, "")),
      Eic(IntKey("eic_trans_type", "LMCACHE_EIC_TRANS_TYPE", FIELD(eic_trans_type), kNoMin, kNoMax,
                 "", CheckTransType)),
      Eic(IntKey("eic_kv_ttl", "LMCACHE_EIC_KV_TTL", FIELD(eic_kv_ttl), kNoMin, kNoMax, "seconds",
                 CheckTtl)),
      Eic(StringKey("eic_kv_ns", "LMCACHE_EIC_KV_NS", FIELD(eic_kv_ns))),
      Eic(StringKey("eic_flag_file", "LMCACHE_EIC_FLAG_FILE", FIELD(eic_flag_file))),
      // kvport client keys.
      StringKey("token_file", "KVPORT_TOKEN_FILE", FIELD(token_file)),
      IntKey("replicas", "KVPORT_REPLICAS", FIELD(replicas), 1, 16, "nodes"),
      IntKey("write_quorum", "KVPORT_WRITE_QUORUM", FIELD(write_quorum), 1, 16, "nodes"),
      IntKey("busy_poll_us", "KVPORT_BUSY_POLL_US", FIELD(busy_poll_us), 0, 1000000,
             "microseconds"),
      StringKey("ucx_devices", "KVPORT_UCX_DEVICES", FIELD(ucx_devices), CheckUcxLanes),
      BoolKey("checksums", "KVPORT_CHECKSUMS", FIELD(checksums)),
      // kvport node keys.
      StringKey("listen", "KVPORT_LISTEN", FIELD(node.listen), CheckListenAddress),
      StringKey("unix_socket", "KVPORT_UNIX_SOCKET", FIELD(node.unix_socket), CheckUnixSocket),
      BoolKey("shared_memory", "KVPORT_SHARED_MEMORY", FIELD(node.shared_memory)),
      BoolKey("ucx", "KVPORT_UCX", FIELD(node.ucx)),
      StringKey("disk_dir", "KVPORT_DISK_DIR", FIELD(node.disk_dir)),
      SizeKey("disk_capacity", "KVPORT_DISK_CAPACITY", FIELD(node.disk_capacity), SizeUnit::kBytes,
              SizeCheck::kLimit),
      StringKey("namespace_tiers", "KVPORT_NAMESPACE_TIERS", FIELD(node.namespace_tiers),
                CheckNamespaceTiers),
      BoolKey("disk_restore", "KVPORT_DISK_RESTORE", FIELD(node.disk_restore)),
      IntKey("disk_stop_flush_secs", "KVPORT_DISK_STOP_FLUSH_SECS",
             FIELD(node.disk_stop_flush_secs), 0, 86400, "seconds"),
      IntKey("max_leases_per_session", "KVPORT_MAX_LEASES_PER_SESSION",
             FIELD(node.max_leases_per_session), 1, kU32, "leases"),
      IntKey("max_reservations_per_session", "KVPORT_MAX_RESERVATIONS_PER_SESSION",
             FIELD(node.max_reservations_per_session), 1, kU32, "reservations"),
      SizeKey("capacity", "KVPORT_CAPACITY", FIELD(node.capacity), SizeUnit::kBytes,
              SizeCheck::kMemoryCapacity),
      BoolKey("allow_capacity_over_host_memory", "KVPORT_ALLOW_CAPACITY_OVER_HOST_MEMORY",
              FIELD(node.allow_capacity_over_host_memory)),
      IntKey("threads", "KVPORT_THREADS", FIELD(node.threads), 0, 4096, "threads"),
      // Ranges follow the wire format (src/protocol/limits.h): keys carry a u16 length,
      // namespaces a u8 length.
      IntKey("max_key_bytes", "KVPORT_MAX_KEY_BYTES", FIELD(node.max_key_bytes), 1, 65535, "bytes"),
      IntKey("max_namespace_bytes", "KVPORT_MAX_NAMESPACE_BYTES", FIELD(node.max_namespace_bytes),
             0, 255, "bytes"),
      IntKey("max_meta_bytes", "KVPORT_MAX_META_BYTES", FIELD(node.max_meta_bytes), 0, 1 << 24,
             "bytes"),
      SizeKey("max_value_bytes", "KVPORT_MAX_VALUE_BYTES", FIELD(node.max_value_bytes),
              SizeUnit::kBytes, SizeCheck::kLimit),
      IntKey("max_batch_keys", "KVPORT_MAX_BATCH_KEYS", FIELD(node.max_batch_keys), 1, 1 << 20,
             "keys"),
      SizeKey("max_frame_bytes", "KVPORT_MAX_FRAME_BYTES", FIELD(node.max_frame_bytes),
              SizeUnit::kBytes, SizeCheck::kLimit),
      SizeKey("max_connection_outstanding_bytes", "KVPORT_MAX_CONNECTION_OUTSTANDING_BYTES",
              FIELD(node.max_connection_outstanding_bytes), SizeUnit::kBytes, SizeCheck::kLimit),
      SizeKey("max_queued_response_bytes", "KVPORT_MAX_QUEUED_RESPONSE_BYTES",
              FIELD(node.max_queued_response_bytes), SizeUnit::kBytes, SizeCheck::kLimitOrAuto),
      SizeKey("max_input_buffer_bytes", "KVPORT_MAX_INPUT_BUFFER_BYTES",
              FIELD(node.max_input_buffer_bytes), SizeUnit::kBytes, SizeCheck::kLimitOrAuto),
      SizeKey("max_index_bytes", "KVPORT_MAX_INDEX_BYTES", FIELD(node.max_index_bytes),
              SizeUnit::kBytes, SizeCheck::kLimitOrAuto),
      SizeKey("max_reserved_bytes", "KVPORT_MAX_RESERVED_BYTES", FIELD(node.max_reserved_bytes),
              SizeUnit::kBytes, SizeCheck::kLimitOrAuto),
      SizeKey("max_pinned_bytes", "KVPORT_MAX_PINNED_BYTES", FIELD(node.max_pinned_bytes),
              SizeUnit::kBytes, SizeCheck::kLimitOrAuto),
      IntKey("idle_timeout_secs", "KVPORT_IDLE_TIMEOUT_SECS", FIELD(node.idle_timeout_secs), 0,
             kU32, "seconds"),
      IntKey("request_timeout_secs", "KVPORT_REQUEST_TIMEOUT_SECS",
             FIELD(node.request_timeout_secs), 0, 86400, "seconds"),
      SizeKey("min_request_bytes_per_sec", "KVPORT_MIN_REQUEST_BYTES_PER_SEC",
              FIELD(node.min_request_bytes_per_sec), SizeUnit::kBytes, SizeCheck::kLimitOrAuto),
      IntKey("max_connections", "KVPORT_MAX_CONNECTIONS", FIELD(node.max_connections), 1, kU32,
             "connections"),
      IntKey("hello_timeout_secs", "KVPORT_HELLO_TIMEOUT_SECS", FIELD(node.hello_timeout_secs), 1,
             3600, "seconds"),
      IntKey("max_unauthenticated_per_address", "KVPORT_MAX_UNAUTHENTICATED_PER_ADDRESS",
             FIELD(node.max_unauthenticated_per_address), 1, kU32, "connections"),
      StringKey("tokens_file", "KVPORT_TOKENS_FILE", FIELD(node.tokens_file)),
      StringKey("tls_cert_file", "KVPORT_TLS_CERT_FILE", FIELD(tls_cert_file)),
      StringKey("tls_key_file", "KVPORT_TLS_KEY_FILE", FIELD(tls_key_file)),
      StringKey("tls_ca_file", "KVPORT_TLS_CA_FILE", FIELD(tls_ca_file)),
      BoolKey("tls_verify_hostname", "KVPORT_TLS_VERIFY_HOSTNAME", FIELD(tls_verify_hostname)),
      BoolKey("insecure", "KVPORT_INSECURE", FIELD(node.insecure)),
      StringKey("http_listen", "KVPORT_HTTP_LISTEN", FIELD(node.http_listen), CheckHttpListen),
      StringKey("resp_listen", "KVPORT_RESP_LISTEN", FIELD(node.resp_listen), CheckHttpListen),
      StringKey("resp_fold_pairs", "KVPORT_RESP_FOLD_PAIRS", FIELD(node.resp_fold_pairs),
                CheckRespFoldPairs),
      // Cluster membership (docs/cluster.md).
      StringKey("cluster", "KVPORT_CLUSTER", FIELD(node.cluster), CheckClusterName),
      StringKey("etcd", "KVPORT_ETCD", FIELD(node.etcd), CheckEtcdEndpoints),
      StringKey("etcd_tls_ca_file", "KVPORT_ETCD_TLS_CA_FILE", FIELD(node.etcd_tls_ca_file)),
      StringKey("etcd_tls_cert_file", "KVPORT_ETCD_TLS_CERT_FILE", FIELD(node.etcd_tls_cert_file)),
      StringKey("etcd_tls_key_file", "KVPORT_ETCD_TLS_KEY_FILE", FIELD(node.etcd_tls_key_file)),
      StringKey("etcd_user", "KVPORT_ETCD_USER", FIELD(node.etcd_user)),
      StringKey("etcd_password_file", "KVPORT_ETCD_PASSWORD_FILE", FIELD(node.etcd_password_file)),
      StringKey("advertise", "KVPORT_ADVERTISE", FIELD(node.advertise), CheckAdvertiseAddress),
      StringKey("node_id", "KVPORT_NODE_ID", FIELD(node.node_id), CheckNodeId),
      StringKey("on_lease_loss", "KVPORT_ON_LEASE_LOSS", FIELD(node.on_lease_loss), CheckLeaseLoss),
      IntKey("lease_ttl_secs", "KVPORT_LEASE_TTL_SECS", FIELD(node.lease_ttl_secs), 1, 3600,
             "seconds"),
      // Accelerator runtimes and logging.
      StringKey("cuda_runtime_library", "KVPORT_CUDA_RUNTIME_LIBRARY", FIELD(cuda_runtime_library)),
      StringKey("ascend_runtime_library", "KVPORT_ASCEND_RUNTIME_LIBRARY",
                FIELD(ascend_runtime_library)),
      StringKey("ucx_library", "KVPORT_UCX_LIBRARY", FIELD(ucx_library)),
      StringKey("log_level", "KVPORT_LOG_LEVEL", FIELD(log_level), CheckLogLevel),
      StringKey("log_format", "KVPORT_LOG_FORMAT", FIELD(log_format), CheckLogFormat),
  };
  return keys;
}

#undef FIELD

}  // namespace

const std::vector<KeySpec>& ConfigKeys() {
  static const std::vector<KeySpec> keys = MakeKeys();
  return keys;
}

std::vector<std::string> CheckCrossKeyRules(const Config& c) {
  std::vector<std::string> errors;
  const NodeSettings& n = c.node;
  if (n.max_value_bytes > n.capacity) {
    errors.push_back(fmt::format(
        "max_value_bytes ({}) is larger than capacity ({}): such an object could never be "
        "stored; lower max_value_bytes or raise capacity",
        FormatSize(n.max_value_bytes), FormatSize(n.capacity)));
  }
  for (const auto& [key, value] :
       {std::pair<const char*, uint64_t>{"max_reserved_bytes", n.max_reserved_bytes},
        {"max_pinned_bytes", n.max_pinned_bytes}}) {
    if (value > n.capacity) {
      errors.push_back(fmt::format(
          "{} ({}) is larger than capacity ({}): a cap on arena bytes above the arena never "
          "applies; lower it, or write 0 for the automatic capacity / 2",
          key, FormatSize(value), FormatSize(n.capacity)));
    }
  }
  if (c.write_quorum > c.replicas) {
    errors.push_back(
        fmt::format("write_quorum ({}) is more than replicas ({}): a write could never succeed",
                    c.write_quorum, c.replicas));
  }
  if (!n.cluster.empty() && n.etcd.empty()) {
    errors.push_back(
        fmt::format("cluster '{}' needs etcd: the etcd endpoints the node registers at "
                    "(HOST:PORT[,HOST:PORT...])",
                    n.cluster));
  }
  if (n.etcd_tls_cert_file.empty() != n.etcd_tls_key_file.empty()) {
    errors.push_back(
        "etcd_tls_cert_file and etcd_tls_key_file go together: the client certificate etcd "
        "asks for (--client-cert-auth) and its key");
  }
  if (!n.etcd_tls_cert_file.empty() && n.etcd_tls_ca_file.empty()) {
    errors.push_back(
        "etcd_tls_cert_file needs etcd_tls_ca_file: the CA that signed etcd's certificate");
  }
  if (n.etcd_user.empty() != n.etcd_password_file.empty()) {
    errors.push_back(
        "etcd_user and etcd_password_file go together (the password is read from the file, "
        "never written in the config)");
  }
  const uint64_t one_key = uint64_t{n.max_key_bytes} + n.max_namespace_bytes + n.max_meta_bytes;
  if (n.max_frame_bytes < one_key) {
    errors.push_back(fmt::format(
        "max_frame_bytes ({} bytes) cannot hold one key with its namespace and metadata "
        "(max_key_bytes + max_namespace_bytes + max_meta_bytes = {} bytes)",
        n.max_frame_bytes, one_key));
  }
  return errors;
}

}  // namespace kvport::config_internal
