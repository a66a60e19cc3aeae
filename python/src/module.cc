// SPDX-License-Identifier: Apache-2.0
// kvport._core: the C++ client, an embedded node, config check and doctor, for Python.
//
// A thin layer: kvport/__init__.py turns these raw results (ints, tuples) into IntEnums and result
// objects, and eic/ builds the vendor-compatible facade on top. Rules kept everywhere here:
//   - the GIL is released around every call that may block (network, node start/stop, runtime
//     loading); Python objects are only touched with it held;
//   - buffers are the caller's memory (call_buffers.h), never copied, and referenced until the
//     call returns; device memory is staged when registered and refused otherwise;
//   - a client or node that close()/stop() ends while other threads call it is guarded by a
//     CallGate (call_gate.h): the object is destroyed only after the calls inside returned;
//   - the GIL is released and taken back through WithoutGil only, destructors included;
//   - a non-OK Status becomes the Python exception class kvport registers with _set_error_class,
//     raised as cls(code_name, message, code_number).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fmt/core.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "call_buffers.h"
#include "call_gate.h"
#include "device/doctor_report.h"
#include "gil.h"
#include "kvport/client.h"
#include "kvport/config.h"
#include "kvport/device.h"
#include "kvport/log.h"
#include "kvport/server.h"
#include "kvport/size.h"
#include "kvport/status.h"
#include "kvport/transport.h"
#include "lmcache_l2_connector.h"

namespace py = pybind11;

namespace kvport::python {

std::atomic<bool> interpreter_exiting{false};
std::atomic<std::thread::id> finalizing_thread;
std::atomic<int> parked_threads{0};

namespace {

py::object& ErrorClass() {
  static py::object* cls = new py::object(py::reinterpret_borrow<py::object>(PyExc_RuntimeError));
  return *cls;  // leaked on purpose: it must outlive interpreter finalization order
}

void ThrowIfError(const Status& status) {
  if (!status.ok()) throw StatusError{status};
}

template <typename T>
T ValueOrThrow(Result<T>&& result) {
  ThrowIfError(result.status());
  return std::move(result).value();
}

py::str KeyText(const std::string& key) {
  return py::reinterpret_steal<py::str>(
      PyUnicode_DecodeUTF8(key.data(), static_cast<Py_ssize_t>(key.size()), "surrogateescape"));
}

std::chrono::milliseconds Millis(double seconds) {
  if (!(seconds >= 0)) throw py::value_error("a timeout is seconds >= 0");
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0 + 0.5));
}

double Seconds(std::chrono::milliseconds ms) {
  return std::chrono::duration<double>(ms).count();
}

// GetOptions, ExistOptions or DelOptions from the arguments every keyed call takes.
template <typename Options>
Options KeyOptions(const std::string& ns, bool any_namespace, double timeout) {
  Options options;
  options.ns = ns;
  options.any_namespace = any_namespace;
  options.timeout = Millis(timeout);
  return options;
}

py::list CodeList(const std::vector<KeyCode>& codes) {
  py::list list(codes.size());
  for (size_t i = 0; i < codes.size(); ++i)
    list[i] = static_cast<int>(codes[i]);
  return list;
}

std::string ErrorText(const Status& error) {
  return error.ok() ? std::string() : error.ToString();
}

// (overall, codes, error)
py::tuple BatchTuple(const BatchResult& r) {
  return py::make_tuple(static_cast<int>(r.status), CodeList(r.codes), ErrorText(r.error));
}

// (overall, codes, value_sizes, metas, error)
py::tuple GetTuple(const GetResult& r) {
  py::list metas(r.metas.size());
  for (size_t i = 0; i < r.metas.size(); ++i)
    metas[i] = py::bytes(r.metas[i]);
  return py::make_tuple(static_cast<int>(r.status), CodeList(r.codes), py::cast(r.value_sizes),
                        metas, ErrorText(r.error));
}

py::dict StatsDict(const std::vector<std::pair<std::string, uint64_t>>& counters) {
  py::dict dict;
  for (const auto& [name, value] : counters)
    dict[py::str(name)] = value;
  return dict;
}

// Values a same-host node lent in place (Client::MGetInPlace), shared by the Lent object and
// every LentValue taken from it: the lease ends when the last of them is gone, so a memoryview
// of a value can never outlive the bytes it shows.
struct Lease {
  LentValues lent;
  ~Lease() {
    WithoutGil([&] { lent.Release(); });  // tells the node (ARENA_RELEASE)
  }
};

// One lent value, read-only, through the buffer protocol (memoryview(value) keeps it alive).
struct PyLentValue {
  std::shared_ptr<Lease> lease;
  size_t index = 0;
};

// What mget_in_place returns: the GetTuple of the call and the values of its hits.
class PyLent {
 public:
  explicit PyLent(LentValues lent) : lease_(std::make_shared<Lease>()) {
    lease_->lent = std::move(lent);
    result_ = GetTuple(lease_->lent.result());
    size_ = lease_->lent.result().codes.size();
  }

  py::tuple result() const { return result_; }
  size_t size() const { return size_; }

  // Key i's value as a LentValue, or None when the key was not read (a miss, an error).
  py::object Value(size_t i) const {
    if (i >= size_) throw py::index_error("mget_in_place: no key " + std::to_string(i));
    if (lease_ == nullptr) throw py::value_error("mget_in_place: the values were released");
    if (lease_->lent.result().codes[i] != KeyCode::kSuccess) return py::none();
    return py::cast(PyLentValue{lease_, i});
  }

  bool valid() const { return lease_ != nullptr && lease_->lent.valid(); }
  // Drops this object's hold on the lease; it ends once no LentValue remains either.
  void Release() { lease_.reset(); }

 private:
  std::shared_ptr<Lease> lease_;
  py::tuple result_;
  size_t size_ = 0;
};

// Where a Python object says its memory lives: None for host memory, else (kind, device index or
// -1, name, whether kvport can stage it). The eic facade asks before it reads a buffer itself.
py::object DeviceOf(py::handle item) {
  const Placement placement = PlacementOf(item);
  if (!placement.device) return py::none();
  return py::make_tuple(static_cast<int>(placement.kind), placement.index, placement.name,
                        placement.supported);
}

class PyClient {
 public:
  PyClient() : client_(std::make_unique<Client>()) {}
  ~PyClient() {
    // No call is inside: each holds a reference to this object. Closing joins the client's
    // threads, without the GIL.
    if (gate_.open()) WithoutGil([&] { gate_.Close([&] { client_.reset(); }); });
  }

  // Idempotent. Waits for the calls other threads have inside (each bounded by its timeout),
  // then closes the connections; every later call raises Error (Unavailable, "closed").
  void Close() {
    WithoutGil([&] { gate_.Close([&] { client_.reset(); }); });
  }
  bool closed() const { return !gate_.open(); }

  void Init(const std::string& instance_id, const std::string& endpoint, int transport_type,
            const std::string& log_dir, int log_level, const std::string& flag_file,
            int connections, double timeout, double connect_timeout, uint64_t staging_cache_bytes,
            const std::string& cuda_runtime_library, const std::string& ascend_runtime_library,
            const std::string& token, const std::string& token_file, int replicas, int write_quorum,
            int64_t busy_poll_us, const std::string& tls_ca_file, const std::string& tls_cert_file,
            const std::string& tls_key_file, bool tls_verify_hostname,
            const std::vector<std::string>& ucx_devices, bool checksums,
            const std::vector<std::string>& unchecked_namespaces) {
    CallGate::Pass pass = Enter("init");
    InitOptions options;
    options.tls_verify_hostname = tls_verify_hostname;
    options.checksums = checksums;
    options.unchecked_namespaces = unchecked_namespaces;
    options.busy_poll = std::chrono::microseconds(busy_poll_us);
    options.ucx_devices = ucx_devices;
    options.token = token;
    options.token_file = token_file;
    options.tls_ca_file = tls_ca_file;
    options.tls_cert_file = tls_cert_file;
    options.tls_key_file = tls_key_file;
    options.replicas = replicas;
    options.write_quorum = write_quorum;
    options.transport_type = transport_type;
    options.log_dir = log_dir;
    options.log_level = log_level;
    options.flag_file = flag_file;
    options.connections = connections;
    options.timeout = Millis(timeout);
    options.connect_timeout = Millis(connect_timeout);
    options.staging_cache_bytes = staging_cache_bytes;
    options.cuda_runtime_library = cuda_runtime_library;
    options.ascend_runtime_library = ascend_runtime_library;
    Status status = WithoutGil([&] { return client_->Init(instance_id, endpoint, options); });
    ThrowIfError(status);
  }

  py::tuple MSet(py::handle keys, py::handle values, const std::string& ns, int64_t ttl_seconds,
                 std::optional<std::vector<std::string>> metas, double timeout) {
    CallGate::Pass pass = Enter("mset");
    std::vector<std::string> key_list = Keys(keys);
    CallBuffers buffers(values, Access::kRead, client_.get());
    SetOptions options;
    options.ns = ns;
    options.ttl_seconds = ttl_seconds;
    options.timeout = Millis(timeout);
    const std::vector<std::string> no_metas;
    Result<BatchResult> result = WithoutGil(
        [&] { return client_->MSet(key_list, buffers.io(), options, metas ? *metas : no_metas); });
    return BatchTuple(ValueOrThrow(std::move(result)));
  }

  py::tuple MGet(py::handle keys, py::handle buffers_in, const std::string& ns, bool any_namespace,
                 double timeout) {
    CallGate::Pass pass = Enter("mget");
    std::vector<std::string> key_list = Keys(keys);
    CallBuffers buffers(buffers_in, Access::kWrite, client_.get());
    const auto options = KeyOptions<GetOptions>(ns, any_namespace, timeout);
    Result<GetResult> result =
        WithoutGil([&] { return client_->MGet(key_list, options, buffers.io()); });
    return GetTuple(ValueOrThrow(std::move(result)));
  }

  PyLent MGetInPlace(py::handle keys, const std::string& ns, bool any_namespace, double timeout) {
    CallGate::Pass pass = Enter("mget_in_place");
    std::vector<std::string> key_list = Keys(keys);
    const auto options = KeyOptions<GetOptions>(ns, any_namespace, timeout);
    Result<LentValues> result = WithoutGil([&] { return client_->MGetInPlace(key_list, options); });
    return PyLent(ValueOrThrow(std::move(result)));
  }

  py::tuple MGetMeta(py::handle keys, const std::string& ns, bool any_namespace, double timeout) {
    CallGate::Pass pass = Enter("mget_meta");
    std::vector<std::string> key_list = Keys(keys);
    const auto options = KeyOptions<GetOptions>(ns, any_namespace, timeout);
    Result<GetResult> result = WithoutGil([&] { return client_->MGetMeta(key_list, options); });
    return GetTuple(ValueOrThrow(std::move(result)));
  }

  py::tuple MExist(py::handle keys, const std::string& ns, bool any_namespace, double timeout) {
    CallGate::Pass pass = Enter("mexist");
    std::vector<std::string> key_list = Keys(keys);
    const auto options = KeyOptions<ExistOptions>(ns, any_namespace, timeout);
    Result<BatchResult> result = WithoutGil([&] { return client_->MExist(key_list, options); });
    return BatchTuple(ValueOrThrow(std::move(result)));
  }

  py::tuple MDel(py::handle keys, const std::string& ns, bool any_namespace, double timeout) {
    CallGate::Pass pass = Enter("mdel");
    std::vector<std::string> key_list = Keys(keys);
    const auto options = KeyOptions<DelOptions>(ns, any_namespace, timeout);
    Result<BatchResult> result = WithoutGil([&] { return client_->MDel(key_list, options); });
    return BatchTuple(ValueOrThrow(std::move(result)));
  }

  // (keys, next_cursor)
  py::tuple List(const std::string& ns, uint64_t cursor, uint32_t max_keys) {
    CallGate::Pass pass = Enter("list");
    Result<KeyPage> result = WithoutGil([&] { return client_->List(ns, cursor, max_keys); });
    KeyPage page = ValueOrThrow(std::move(result));
    py::list keys(page.keys.size());
    for (size_t i = 0; i < page.keys.size(); ++i)
      keys[i] = KeyText(page.keys[i]);
    return py::make_tuple(keys, page.next_cursor);
  }

  // {"counters": {name: value}, "namespaces": [(name, objects, bytes)]}
  static py::dict StatsOf(const NodeStats& stats) {
    py::list namespaces;
    for (const auto& ns : stats.namespaces) {
      namespaces.append(py::make_tuple(KeyText(ns.name), ns.objects, ns.bytes));
    }
    py::dict dict;
    dict["counters"] = StatsDict(stats.counters);
    dict["namespaces"] = namespaces;
    return dict;
  }

  py::dict Stats() {
    CallGate::Pass pass = Enter("stats");
    Result<NodeStats> result = WithoutGil([&] { return client_->Stats(); });
    return StatsOf(ValueOrThrow(std::move(result)));
  }

  // One dict per node: id, address, epoch, error ("" when it answered) and its stats dict.
  py::list StatsPerNode() {
    CallGate::Pass pass = Enter("stats_per_node");
    Result<std::vector<NodeReport>> result = WithoutGil([&] { return client_->StatsPerNode(); });
    py::list nodes;
    for (const NodeReport& report : ValueOrThrow(std::move(result))) {
      py::dict node;
      node["id"] = KeyText(report.id);
      node["address"] = report.address;
      node["epoch"] = report.epoch;
      node["error"] = report.status.ok() ? std::string() : report.status.ToString();
      node["stats"] = StatsOf(report.stats);
      nodes.append(node);
    }
    return nodes;
  }

  void Ping() {
    CallGate::Pass pass = Enter("ping");
    Status status = WithoutGil([&] { return client_->Ping(); });
    ThrowIfError(status);
  }

  // A device buffer must be registered with its own kind and device (what the object says of
  // itself is checked first: the client knows only addresses).
  void RegisterMemory(py::handle buffers_in, int kind, int device_id) {
    if (kind < 0 || kind > static_cast<int>(RuntimeKind::kAscend)) {
      throw py::value_error("memory kind must be 0 (host), 1 (cuda) or 2 (ascend)");
    }
    CallGate::Pass pass = Enter("register_memory");
    CallBuffers buffers(buffers_in, Access::kRead, nullptr);
    const MemoryInfo info{static_cast<RuntimeKind>(kind), device_id};
    for (size_t i = 0; i < buffers.placements().size(); ++i) {
      const Placement& placement = buffers.placements()[i];
      if (!placement.device) continue;
      if (placement.kind != info.kind) {
        ThrowIfError(Status::InvalidArgument(fmt::format(
            "register_memory: buffer {} is in {} memory: register it with kind=MemoryKind.{}", i,
            placement.name, placement.kind == RuntimeKind::kAscend ? "ASCEND" : "CUDA")));
      }
      if (placement.index >= 0 && placement.index != device_id) {
        ThrowIfError(Status::InvalidArgument(
            fmt::format("register_memory: buffer {} is on {}: register it with device_id={}", i,
                        placement.name, placement.index)));
      }
    }
    ThrowIfError(WithoutGil([&] { return client_->RegisterMemory(buffers.io(), info); }));
  }

  void UnregisterMemory(py::handle buffers_in) {
    CallGate::Pass pass = Enter("unregister_memory");
    CallBuffers buffers(buffers_in, Access::kRead, nullptr);
    ThrowIfError(client_->UnregisterMemory(buffers.io()));
  }

  std::string transport() {
    CallGate::Pass pass = Enter("transport");
    return std::string(client_->transport());
  }
  std::string transport_reason() {
    CallGate::Pass pass = Enter("transport_reason");
    return client_->transport_reason();
  }
  uint64_t checksum_mismatches() {
    CallGate::Pass pass = Enter("checksum_mismatches");
    return client_->checksum_mismatches();
  }
  std::string endpoint() {
    CallGate::Pass pass = Enter("endpoint");
    return client_->endpoint();
  }
  std::optional<std::string> default_namespace() {
    CallGate::Pass pass = Enter("default_namespace");
    return client_->default_namespace();
  }
  bool is_cluster() {
    CallGate::Pass pass = Enter("is_cluster");
    return client_->is_cluster();
  }

 private:
  // The client for one call (hold the Pass while using client_), or Error once closed.
  CallGate::Pass Enter(const char* what) {
    std::optional<CallGate::Pass> pass = gate_.TryEnter();
    if (!pass)
      throw StatusError{Status::Unavailable(fmt::format("{}: the client is closed", what))};
    return std::move(*pass);
  }

  std::unique_ptr<Client> client_;  // reset by Close(), once no call is inside
  CallGate gate_;
};

class PyServer {
 public:
  PyServer(const std::string& listen, const std::string& unix_socket, bool shared_memory,
           uint32_t max_leases_per_session, uint32_t max_reservations_per_session,
           uint64_t capacity_bytes, unsigned threads, uint64_t max_value_bytes,
           uint64_t max_key_bytes, uint64_t max_meta_bytes, uint64_t max_batch_keys,
           const std::string& tokens_file, bool insecure, const std::string& cluster,
           const std::vector<std::string>& etcd, const std::string& advertise,
           const std::string& node_id, uint32_t lease_ttl_secs, const std::string& tls_cert_file,
           const std::string& tls_key_file, const std::string& tls_ca_file, int64_t busy_poll_us,
           bool ucx) {
    ServerOptions options;
    options.busy_poll = std::chrono::microseconds(busy_poll_us);
    options.ucx = ucx;
    options.tls_cert_file = tls_cert_file;
    options.tls_key_file = tls_key_file;
    options.tls_ca_file = tls_ca_file;
    options.cluster = cluster;
    options.etcd = etcd;
    options.advertise = advertise;
    options.node_id = node_id;
    options.lease_ttl_secs = lease_ttl_secs;
    options.tokens_file = tokens_file;
    options.insecure = insecure;
    options.listen = listen;
    options.unix_socket = unix_socket;
    options.shared_memory = shared_memory;
    options.max_leases_per_session = max_leases_per_session;
    options.max_reservations_per_session = max_reservations_per_session;
    options.capacity_bytes = capacity_bytes;
    options.threads = threads;
    options.max_value_bytes = max_value_bytes;
    options.max_key_bytes = max_key_bytes;
    options.max_meta_bytes = max_meta_bytes;
    options.max_batch_keys = max_batch_keys;
    options.shutdown_grace = std::chrono::seconds(2);
    Result<std::unique_ptr<Server>> started = WithoutGil([&] { return Server::Start(options); });
    server_ = ValueOrThrow(std::move(started));
  }

  ~PyServer() {
    // No call is inside: each holds a reference to this object. Stopping joins the I/O
    // threads, without the GIL.
    if (gate_.open()) WithoutGil([&] { gate_.Close([&] { server_.reset(); }); });
  }

  std::string address() {
    CallGate::Pass pass = Enter();
    return server_->address();
  }
  uint16_t port() {
    CallGate::Pass pass = Enter();
    return server_->port();
  }
  std::string unix_socket_path() {
    CallGate::Pass pass = Enter();
    return server_->unix_socket_path();
  }
  uint64_t epoch() {
    CallGate::Pass pass = Enter();
    return server_->epoch();
  }
  void ReloadTokens() {
    CallGate::Pass pass = Enter();
    ThrowIfError(WithoutGil([&] { return server_->ReloadTokens(); }));
  }
  bool running() const { return gate_.open(); }

  // Graceful: lets requests in flight finish. Idempotent; a stats() or reload_tokens() that
  // another thread has inside finishes first, and every call after it raises Error.
  void Stop() {
    WithoutGil([&] { gate_.Close([&] { server_.reset(); }); });
  }

  py::dict Stats() {
    CallGate::Pass pass = Enter();
    ServerStats stats = WithoutGil([&] { return server_->Stats(); });
    py::list namespaces;
    for (const auto& ns : stats.namespaces) {
      namespaces.append(py::make_tuple(KeyText(ns.ns), ns.objects, ns.bytes));
    }
    py::dict dict;
    dict["counters"] = StatsDict(stats.counters);
    dict["namespaces"] = namespaces;
    return dict;
  }

 private:
  // The node for one call (hold the Pass while using server_), or Error once stopped.
  CallGate::Pass Enter() {
    std::optional<CallGate::Pass> pass = gate_.TryEnter();
    if (!pass) throw StatusError{Status::Unavailable("the node was stopped")};
    return std::move(*pass);
  }

  std::unique_ptr<Server> server_;  // reset by Stop(), once no call is inside
  CallGate gate_;
};

uint64_t ParseBytes(const std::string& text) {
  return ValueOrThrow(ParseSize(text, SizeUnit::kBytes));
}

// `kvport config check --json`, as a string (kvport/__init__.py parses it).
std::string ConfigCheckJson(std::optional<std::string> path) {
  ConfigSources sources;
  if (path) sources.file = *path;
  sources.log_warnings = false;
  Result<Config> loaded = WithoutGil([&] { return LoadConfig(sources); });  // reads a file
  return DescribeConfigJson(ValueOrThrow(std::move(loaded)));
}

// `kvport doctor --json`, as a string.
std::string DoctorJson(const std::string& cuda_runtime_library,
                       const std::string& ascend_runtime_library, const std::string& ucx_library) {
  RuntimeOptions options;
  options.cuda_runtime_library = cuda_runtime_library;
  options.ascend_runtime_library = ascend_runtime_library;
  options.ucx_library = ucx_library;
  Result<std::string> report = WithoutGil([&]() -> Result<std::string> {
    KVPORT_RETURN_IF_ERROR(ConfigureDeviceRuntimes(options));  // opens runtimes with dlopen
    return FormatDoctorJson(BuildDoctorReport(options, HostRuntime(), CudaRuntime(),
                                              AscendRuntime(), *OpenUcxRuntime(ucx_library),
                                              ListRdmaDevices()));
  });
  return ValueOrThrow(std::move(report));
}

}  // namespace
}  // namespace kvport::python

PYBIND11_MODULE(_core, m) {
  using namespace kvport::python;
  const kvport::InitOptions kDefaults;
  const kvport::ServerOptions kServerDefaults;
  m.doc() = "kvport's C++ client and node. Use the kvport and eic packages, not this module.";

  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const StatusError& e) {
      py::tuple args = py::make_tuple(std::string(kvport::StatusCodeName(e.status.code())),
                                      e.status.message(), static_cast<int>(e.status.code()));
      PyErr_SetObject(ErrorClass().ptr(), args.ptr());
    }
  });
  m.def("_set_error_class", [](py::object cls) { ErrorClass() = std::move(cls); });
  // kvport's C++ log lines, kept for Python's logging (the eic drop-in forwards them after
  // each call) instead of written to stderr: kvport::log::Capture and TakeCaptured.
  m.def(
      "capture_log", [](size_t max_lines) { kvport::log::Capture(max_lines); },
      py::arg("max_lines"));
  m.def("take_log", [] {
    size_t dropped = 0;
    std::vector<kvport::log::CapturedLine> lines = kvport::log::TakeCaptured(&dropped);
    py::list out;
    for (auto& line : lines) {
      out.append(py::make_tuple(static_cast<int>(line.level), std::move(line.message)));
    }
    return py::make_tuple(std::move(out), dropped);
  });
  m.def("_interpreter_exiting", [] {
    finalizing_thread.store(std::this_thread::get_id());
    interpreter_exiting.store(true);
  });
  m.def("_parked_threads", [] { return parked_threads.load(); });
  m.def("device_of", &DeviceOf, py::arg("buffer"));
  RegisterLmcacheL2Connector(m);

  py::class_<PyClient>(m, "Client")
      .def(py::init<>())
      // The defaults are kvport::InitOptions' own, so they are written in one place.
      .def("init", &PyClient::Init, py::arg("instance_id"), py::arg("endpoint"), py::kw_only(),
           py::arg("transport_type") = kDefaults.transport_type,
           py::arg("log_dir") = kDefaults.log_dir, py::arg("log_level") = kDefaults.log_level,
           py::arg("flag_file") = kDefaults.flag_file,
           py::arg("connections") = kDefaults.connections,
           py::arg("timeout") = Seconds(kDefaults.timeout),
           py::arg("connect_timeout") = Seconds(kDefaults.connect_timeout),
           py::arg("staging_cache_bytes") = kDefaults.staging_cache_bytes,
           py::arg("cuda_runtime_library") = kDefaults.cuda_runtime_library,
           py::arg("ascend_runtime_library") = kDefaults.ascend_runtime_library,
           py::arg("token") = kDefaults.token, py::arg("token_file") = kDefaults.token_file,
           py::arg("replicas") = kDefaults.replicas,
           py::arg("write_quorum") = kDefaults.write_quorum,
           py::arg("busy_poll_us") = kDefaults.busy_poll.count(),
           py::arg("tls_ca_file") = kDefaults.tls_ca_file,
           py::arg("tls_cert_file") = kDefaults.tls_cert_file,
           py::arg("tls_key_file") = kDefaults.tls_key_file,
           py::arg("tls_verify_hostname") = kDefaults.tls_verify_hostname,
           py::arg("ucx_devices") = kDefaults.ucx_devices,
           py::arg("checksums") = kDefaults.checksums,
           py::arg("unchecked_namespaces") = kDefaults.unchecked_namespaces)
      .def("mset", &PyClient::MSet, py::arg("keys"), py::arg("values"), py::arg("ns"),
           py::arg("ttl_seconds"), py::arg("metas"), py::arg("timeout"))
      .def("mget", &PyClient::MGet, py::arg("keys"), py::arg("buffers"), py::arg("ns"),
           py::arg("any_namespace"), py::arg("timeout"))
      .def("mget_in_place", &PyClient::MGetInPlace, py::arg("keys"), py::arg("ns"),
           py::arg("any_namespace"), py::arg("timeout"))
      .def("mget_meta", &PyClient::MGetMeta, py::arg("keys"), py::arg("ns"),
           py::arg("any_namespace"), py::arg("timeout"))
      .def("mexist", &PyClient::MExist, py::arg("keys"), py::arg("ns"), py::arg("any_namespace"),
           py::arg("timeout"))
      .def("mdel", &PyClient::MDel, py::arg("keys"), py::arg("ns"), py::arg("any_namespace"),
           py::arg("timeout"))
      .def("list", &PyClient::List, py::arg("ns"), py::arg("cursor"), py::arg("max_keys"))
      .def("stats", &PyClient::Stats)
      .def("stats_per_node", &PyClient::StatsPerNode)
      .def("ping", &PyClient::Ping)
      .def("register_memory", &PyClient::RegisterMemory, py::arg("buffers"), py::arg("kind"),
           py::arg("device_id"))
      .def("unregister_memory", &PyClient::UnregisterMemory, py::arg("buffers"))
      .def_property_readonly("transport", &PyClient::transport)
      .def_property_readonly("transport_reason", &PyClient::transport_reason)
      .def_property_readonly("checksum_mismatches", &PyClient::checksum_mismatches)
      .def_property_readonly("endpoint", &PyClient::endpoint)
      .def_property_readonly("default_namespace", &PyClient::default_namespace)
      .def_property_readonly("is_cluster", &PyClient::is_cluster)
      .def_property_readonly("closed", &PyClient::closed)
      .def("close", &PyClient::Close);

  py::class_<PyLentValue>(m, "LentValue", py::buffer_protocol())
      .def_buffer([](PyLentValue& v) {
        static const uint8_t kEmpty = 0;
        const std::span<const uint8_t> bytes = v.lease->lent.value(v.index);
        const uint8_t* data = bytes.empty() ? &kEmpty : bytes.data();
        return py::buffer_info(const_cast<uint8_t*>(data), 1, "B", 1,
                               {static_cast<py::ssize_t>(bytes.size())}, {py::ssize_t{1}},
                               /*readonly=*/true);
      })
      .def("__len__", [](const PyLentValue& v) { return v.lease->lent.value(v.index).size(); });

  py::class_<PyLent>(m, "Lent")
      .def_property_readonly("result", &PyLent::result)
      .def_property_readonly("valid", &PyLent::valid)
      .def("__len__", &PyLent::size)
      .def("value", &PyLent::Value, py::arg("index"))
      .def("release", &PyLent::Release);

  py::class_<PyServer>(m, "Server")
      // The defaults are kvport::ServerOptions' own.
      .def(py::init<const std::string&, const std::string&, bool, uint32_t, uint32_t, uint64_t,
                    unsigned, uint64_t, uint64_t, uint64_t, uint64_t, const std::string&, bool,
                    const std::string&, const std::vector<std::string>&, const std::string&,
                    const std::string&, uint32_t, const std::string&, const std::string&,
                    const std::string&, int64_t, bool>(),
           py::kw_only(), py::arg("listen") = kServerDefaults.listen,
           py::arg("unix_socket") = kServerDefaults.unix_socket,
           py::arg("shared_memory") = kServerDefaults.shared_memory,
           py::arg("max_leases_per_session") = kServerDefaults.max_leases_per_session,
           py::arg("max_reservations_per_session") = kServerDefaults.max_reservations_per_session,
           py::arg("capacity_bytes") = kServerDefaults.capacity_bytes,
           py::arg("threads") = kServerDefaults.threads,
           py::arg("max_value_bytes") = kServerDefaults.max_value_bytes,
           py::arg("max_key_bytes") = kServerDefaults.max_key_bytes,
           py::arg("max_meta_bytes") = kServerDefaults.max_meta_bytes,
           py::arg("max_batch_keys") = kServerDefaults.max_batch_keys,
           py::arg("tokens_file") = kServerDefaults.tokens_file,
           py::arg("insecure") = kServerDefaults.insecure,
           py::arg("cluster") = kServerDefaults.cluster, py::arg("etcd") = kServerDefaults.etcd,
           py::arg("advertise") = kServerDefaults.advertise,
           py::arg("node_id") = kServerDefaults.node_id,
           py::arg("lease_ttl_secs") = kServerDefaults.lease_ttl_secs,
           py::arg("tls_cert_file") = kServerDefaults.tls_cert_file,
           py::arg("tls_key_file") = kServerDefaults.tls_key_file,
           py::arg("tls_ca_file") = kServerDefaults.tls_ca_file,
           py::arg("busy_poll_us") = kServerDefaults.busy_poll.count(),
           py::arg("ucx") = kServerDefaults.ucx)
      .def("reload_tokens", &PyServer::ReloadTokens)
      .def_property_readonly("address", &PyServer::address)
      .def_property_readonly("port", &PyServer::port)
      .def_property_readonly("unix_socket_path", &PyServer::unix_socket_path)
      .def_property_readonly("epoch", &PyServer::epoch)
      .def_property_readonly("running", &PyServer::running)
      .def("stop", &PyServer::Stop)
      .def("stats", &PyServer::Stats);

  m.def("parse_size", &ParseBytes, py::arg("text"));
  m.def("config_check_json", &ConfigCheckJson, py::arg("path"));
  m.def("doctor_json", &DoctorJson, py::arg("cuda_runtime_library"),
        py::arg("ascend_runtime_library"), py::arg("ucx_library"));
  m.attr("VERSION") = KVPORT_VERSION;
}
