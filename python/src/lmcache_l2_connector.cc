// SPDX-License-Identifier: Apache-2.0
// LMCacheL2Connector: the object LMCache's `native_plugin` L2 adapter (lmcache/v1/distributed/
// l2_adapters/native_plugin_l2_adapter.py) constructs from `adapter_params` and drives through
// its NativeConnectorL2Adapter: submit_batch_{get,set,exists,delete} return a future id at once,
// and every finished call is handed back by drain_completions() as (future_id, ok, error,
// per-key results), announced on one eventfd (event_fd()) that LMCache's demux thread polls.
//
// Design:
//   - One kvport::Client. Gets, exists and deletes are started on the submitting thread (the
//     GIL released): their request frames are small, so submit returns at once (over TCP it
//     waits when the connection it takes is writing a set's values: a connection writes one frame
//     at a time). A set is started by its lane's thread instead, because sending its values over
//     TCP blocks until the node has read them, and LMCache calls submit with its adapter lock held.
//   - One lane (one C++ thread) per kind of call finishes that kind's calls, so a large set or get
//     in flight never holds back a lookup. A lane checks every call it holds with Ready(), which
//     also takes a shared-memory call's next step (the copy into or out of the node's arena); when
//     none is ready it waits for its oldest call (the waiting thread reads the connection, so the
//     answers of the calls behind it arrive meanwhile). No Python thread per call, no GIL taken.
//   - Buffers are the caller's memory (CallBuffers, zero copy): a get fills LMCache's memory
//     objects in place, over TCP from the socket, over shared memory from the arena. Their Python
//     references are dropped only on a thread holding the GIL (drain_completions, close, the
//     destructor); the lanes only move the calls around.
//   - Per-key results: True when the key was stored / read / exists / deleted. A read counts only
//     when the stored value is exactly as long as the caller's buffer: a value of another length
//     (another layout stored under the key) is a failure, never a hit on half a buffer. `ok` is
//     False when the call failed as a whole or a key failed for a reason other than a miss (a
//     set: any key not stored); `error` then says why. drain_completions(codes=True) gives each
//     key's kvport.KeyCode instead of a bool.
//   - close() refuses new calls, waits for those in flight (each bounded by its timeout: a node
//     that went away fails them as Unavailable), then closes the connections and the eventfd.
#include "lmcache_l2_connector.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fmt/core.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "call_buffers.h"
#include "call_gate.h"
#include "gil.h"
#include "kvport/client.h"
#include "kvport/status.h"

namespace py = pybind11;

namespace kvport::python {
namespace {

enum class OpKind : size_t { kGet = 0, kSet = 1, kExists = 2, kDelete = 3 };
constexpr size_t kLanes = 4;

const char* OpName(OpKind kind) {
  switch (kind) {
    case OpKind::kGet:
      return "get";
    case OpKind::kSet:
      return "set";
    case OpKind::kExists:
      return "exists";
    case OpKind::kDelete:
      return "delete";
  }
  return "?";
}

// The options every call of one connector is made with.
struct CallOptions {
  SetOptions set;
  GetOptions get;
  ExistOptions exist;
  DelOptions del;
};

// One submitted batch: its keys and buffers (kept valid until the call is waited for), the call
// in flight, and once finished its outcome.
struct Op {
  uint64_t id = 0;
  OpKind kind = OpKind::kGet;
  std::vector<std::string> keys;
  std::unique_ptr<CallBuffers> buffers;  // gets and sets; destroyed with the GIL held
  Pending<GetResult> get;                // kGet
  Pending<BatchResult> batch;            // kSet, kExists, kDelete
  bool started = false;

  bool ok = false;
  std::string error;
  std::vector<KeyCode> codes;

  void Start(Client& client, const CallOptions& options) {
    switch (kind) {
      case OpKind::kGet:
        get = client.MGetAsync(keys, options.get, buffers->io());
        break;
      case OpKind::kSet:
        batch = client.MSetAsync(keys, buffers->io(), options.set);
        break;
      case OpKind::kExists:
        batch = client.MExistAsync(keys, options.exist);
        break;
      case OpKind::kDelete:
        batch = client.MDelAsync(keys, options.del);
        break;
    }
    started = true;
  }

  bool Ready() { return kind == OpKind::kGet ? get.Ready() : batch.Ready(); }

  // Waits for the call (at once when Ready) and records its outcome.
  void Finish() {
    try {
      if (kind == OpKind::kGet) {
        Result<GetResult> result = get.Wait();
        if (!result.ok()) return FailAll(result.status());
        Settle(*result, &result->value_sizes);
      } else {
        Result<BatchResult> result = batch.Wait();
        if (!result.ok()) return FailAll(result.status());
        Settle(*result, nullptr);
      }
    } catch (const std::exception& e) {
      FailAll(
          Status::Internal(fmt::format("{} of {} keys: {}", OpName(kind), keys.size(), e.what())));
    }
  }

  void FailAll(const Status& status) {
    ok = false;
    error = status.ToString();
    codes.assign(keys.size(), KeyCodeFromCallFailure(status));
  }

  void Settle(const BatchResult& result, const std::vector<uint64_t>* value_sizes) {
    if (result.codes.size() != keys.size()) {
      return FailAll(Status::Internal(fmt::format("{}: {} key codes for {} keys", OpName(kind),
                                                  result.codes.size(), keys.size())));
    }
    codes = result.codes;
    error = result.error.ok() ? std::string() : result.error.ToString();
    if (value_sizes != nullptr) {
      // A read is a hit only when the value fills the caller's buffer exactly: a shorter one
      // (another layout stored under the key) would leave the rest of the buffer stale.
      for (size_t i = 0; i < codes.size(); ++i) {
        const uint64_t want = buffers->io()[i].size;
        const uint64_t got = i < value_sizes->size() ? (*value_sizes)[i] : 0;
        if (codes[i] == KeyCode::kSuccess && got != want) {
          codes[i] = KeyCode::kFailed;
          if (error.empty()) {
            error = fmt::format("key '{}': stored value of {} bytes, the buffer holds {}", keys[i],
                                got, want);
          }
        }
      }
    }
    ok = true;
    for (KeyCode code : codes) {
      const bool miss_is_answer = kind != OpKind::kSet && code == KeyCode::kKeyNotExist;
      if (code != KeyCode::kSuccess && !miss_is_answer) ok = false;
    }
    if (ok) error.clear();
  }
};

// Finished calls waiting for drain_completions, announced on one eventfd.
class Completions {
 public:
  Completions() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_ < 0) {
      throw StatusError{Status::Unavailable(fmt::format("eventfd: errno {}", errno))};
    }
  }
  ~Completions() { CloseFd(); }
  Completions(const Completions&) = delete;
  Completions& operator=(const Completions&) = delete;

  int fd() const {
    std::lock_guard lock(fd_mu_);
    return fd_;
  }

  void Post(std::vector<std::unique_ptr<Op>>* done) {
    if (done->empty()) return;
    {
      std::lock_guard lock(mu_);
      for (auto& op : *done)
        done_.push_back(std::move(op));
    }
    done->clear();
    // After the push: a drain that read the counter before it still finds the calls, and one
    // that finds nothing after this write is woken again by it. Never fails short of a closed fd.
    const uint64_t one = 1;
    std::lock_guard lock(fd_mu_);
    if (fd_ >= 0) (void)!::write(fd_, &one, sizeof(one));
  }

  // The finished calls, oldest first; resets the eventfd (LMCache's poller never reads it).
  std::vector<std::unique_ptr<Op>> Take() {
    {
      std::lock_guard lock(fd_mu_);
      uint64_t count = 0;
      if (fd_ >= 0) (void)!::read(fd_, &count, sizeof(count));
    }
    std::lock_guard lock(mu_);
    return std::exchange(done_, {});
  }

  void CloseFd() {
    std::lock_guard lock(fd_mu_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  mutable std::mutex fd_mu_;
  int fd_;  // -1 once closed
  std::mutex mu_;
  std::vector<std::unique_ptr<Op>> done_;
};

// One thread finishing one kind of call (see the file comment).
class Lane {
 public:
  Lane(Client* client, const CallOptions* options, Completions* completions)
      : client_(client), options_(options), completions_(completions), thread_([this] { Run(); }) {}
  ~Lane() { Stop(); }
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  void Push(std::unique_ptr<Op> op) {
    {
      std::lock_guard lock(mu_);
      incoming_.push_back(std::move(op));
    }
    wake_.notify_one();
  }

  // Finishes every call pushed so far, then ends the thread.
  void Stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Run() {
    std::vector<std::unique_ptr<Op>> active;  // oldest first
    std::vector<std::unique_ptr<Op>> done;
    for (;;) {
      {
        std::unique_lock lock(mu_);
        wake_.wait(lock, [&] { return !incoming_.empty() || !active.empty() || stopping_; });
        if (incoming_.empty() && active.empty()) return;  // stopping, nothing left
        for (auto& op : incoming_)
          active.push_back(std::move(op));
        incoming_.clear();
      }
      for (auto& op : active) {
        if (!op->started) op->Start(*client_, *options_);
      }
      for (auto& op : active) {
        if (op->Ready()) {
          op->Finish();
          done.push_back(std::move(op));
        }
      }
      if (done.empty()) {
        active.front()->Finish();  // waits; the calls behind it are read meanwhile
        done.push_back(std::move(active.front()));
      }
      std::erase(active, nullptr);
      completions_->Post(&done);
    }
  }

  Client* const client_;
  const CallOptions* const options_;
  Completions* const completions_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::unique_ptr<Op>> incoming_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

std::chrono::milliseconds SecondsOption(const char* name, double seconds) {
  if (!(seconds > 0)) throw py::value_error(fmt::format("{} is seconds > 0", name));
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0 + 0.5));
}

class LMCacheL2Connector {
 public:
  LMCacheL2Connector(const std::string& endpoint, std::optional<std::string> ns,
                     const std::string& token, const std::string& token_file, int transport_type,
                     int connections, double timeout, double connect_timeout, int64_t ttl_seconds,
                     const std::string& instance_id, const std::string& tls_ca_file,
                     const std::string& tls_cert_file, const std::string& tls_key_file,
                     int replicas, int write_quorum, bool checksums)
      : client_(std::make_unique<Client>()), completions_(std::make_unique<Completions>()) {
    if (endpoint.empty()) throw py::value_error("adapter_params: endpoint is required");
    if (ns) {
      namespace_ = *ns;
    } else {
      Result<std::string> named = EndpointNamespace(endpoint);
      if (!named.ok()) throw StatusError{named.status()};
      namespace_ = *named;
    }
    InitOptions init;
    init.token = token;
    init.token_file = token_file;
    init.transport_type = transport_type;
    init.connections = connections;
    init.timeout = SecondsOption("timeout", timeout);
    init.connect_timeout = SecondsOption("connect_timeout", connect_timeout);
    init.tls_ca_file = tls_ca_file;
    init.tls_cert_file = tls_cert_file;
    init.tls_key_file = tls_key_file;
    init.replicas = replicas;
    init.write_quorum = write_quorum;
    init.checksums = checksums;
    options_.set.ns = namespace_;
    options_.set.ttl_seconds = ttl_seconds;
    options_.get.ns = namespace_;
    options_.exist.ns = namespace_;
    options_.del.ns = namespace_;
    const Status status = WithoutGil([&] { return client_->Init(instance_id, endpoint, init); });
    if (!status.ok()) throw StatusError{status};
    for (size_t i = 0; i < kLanes; ++i) {
      lanes_[i] = std::make_unique<Lane>(client_.get(), &options_, completions_.get());
    }
  }

  ~LMCacheL2Connector() {
    Close();
    completions_.reset();  // the calls' buffers, released with the GIL held (as here)
  }
  LMCacheL2Connector(const LMCacheL2Connector&) = delete;
  LMCacheL2Connector& operator=(const LMCacheL2Connector&) = delete;

  int event_fd() const { return completions_->fd(); }

  uint64_t SubmitGet(py::handle keys, py::handle buffers) {
    return Submit(OpKind::kGet, keys, buffers);
  }
  uint64_t SubmitSet(py::handle keys, py::handle buffers) {
    return Submit(OpKind::kSet, keys, buffers);
  }
  uint64_t SubmitExists(py::handle keys) { return Submit(OpKind::kExists, keys, py::none()); }
  uint64_t SubmitDelete(py::handle keys) { return Submit(OpKind::kDelete, keys, py::none()); }

  // [(future_id, ok, error, per-key results)], oldest first; results are bools, or with `codes`
  // the kvport.KeyCode numbers.
  py::list DrainCompletions(bool codes) {
    std::vector<std::unique_ptr<Op>> done = completions_->Take();
    py::list out(done.size());
    for (size_t i = 0; i < done.size(); ++i) {
      const Op& op = *done[i];
      py::list results(op.codes.size());
      for (size_t k = 0; k < op.codes.size(); ++k) {
        if (codes) {
          results[k] = static_cast<int>(op.codes[k]);
        } else {
          results[k] = py::bool_(op.codes[k] == KeyCode::kSuccess);
        }
      }
      out[i] = py::make_tuple(op.id, op.ok, op.error, results);
    }
    return out;  // `done` goes here, GIL held: the buffers' views are released
  }

  // Idempotent. Refuses new calls, waits for those in flight, closes the connections and the
  // eventfd. Finished calls stay for drain_completions.
  void Close() {
    WithoutGil([&] {
      gate_.Close([&] {
        for (auto& lane : lanes_)
          lane.reset();  // each finishes what it holds
        client_.reset();
        completions_->CloseFd();
      });
    });
  }
  bool closed() const { return !gate_.open(); }

  const std::string& ns() const { return namespace_; }
  std::string transport() {
    CallGate::Pass pass = Enter("transport");
    return std::string(client_->transport());
  }
  std::string endpoint() {
    CallGate::Pass pass = Enter("endpoint");
    return client_->endpoint();
  }

 private:
  CallGate::Pass Enter(const char* what) {
    std::optional<CallGate::Pass> pass = gate_.TryEnter();
    if (!pass) {
      throw StatusError{Status::Unavailable(fmt::format("{}: the connector is closed", what))};
    }
    return std::move(*pass);
  }

  uint64_t Submit(OpKind kind, py::handle keys, py::handle buffers) {
    CallGate::Pass pass = Enter(OpName(kind));
    auto op = std::make_unique<Op>();
    op->kind = kind;
    op->keys = Keys(keys);
    if (kind == OpKind::kGet || kind == OpKind::kSet) {
      op->buffers = std::make_unique<CallBuffers>(
          buffers, kind == OpKind::kGet ? Access::kWrite : Access::kRead, client_.get());
      if (op->buffers->io().size() != op->keys.size()) {
        throw py::value_error(fmt::format("submit_batch_{}: {} keys and {} buffers", OpName(kind),
                                          op->keys.size(), op->buffers->io().size()));
      }
    }
    const uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
    op->id = id;
    Lane& lane = *lanes_[static_cast<size_t>(kind)];
    WithoutGil([&] {
      if (kind != OpKind::kSet) op->Start(*client_, options_);
      lane.Push(std::move(op));
    });
    return id;
  }

  std::unique_ptr<Client> client_;
  CallOptions options_;
  std::string namespace_;
  std::unique_ptr<Completions> completions_;
  std::array<std::unique_ptr<Lane>, kLanes> lanes_;  // after what they use
  std::atomic<uint64_t> next_id_{1};
  CallGate gate_;
};

}  // namespace

void RegisterLmcacheL2Connector(py::module_& m) {
  const InitOptions defaults;
  py::class_<LMCacheL2Connector>(m, "LMCacheL2Connector")
      // LMCache passes its adapter_params as these keyword arguments; an unknown one is a
      // TypeError, so a misspelt key is never silently ignored.
      .def(py::init<const std::string&, std::optional<std::string>, const std::string&,
                    const std::string&, int, int, double, double, int64_t, const std::string&,
                    const std::string&, const std::string&, const std::string&, int, int, bool>(),
           py::kw_only(), py::arg("endpoint"), py::arg("namespace") = py::none(),
           py::arg("token") = "", py::arg("token_file") = "",
           py::arg("transport_type") = defaults.transport_type,
           py::arg("connections") = defaults.connections,
           py::arg("timeout") = std::chrono::duration<double>(defaults.timeout).count(),
           py::arg("connect_timeout") =
               std::chrono::duration<double>(defaults.connect_timeout).count(),
           py::arg("ttl_seconds") = int64_t{-1}, py::arg("instance_id") = "lmcache-mp",
           py::arg("tls_ca_file") = "", py::arg("tls_cert_file") = "", py::arg("tls_key_file") = "",
           py::arg("replicas") = defaults.replicas, py::arg("write_quorum") = defaults.write_quorum,
           py::arg("checksums") = defaults.checksums)
      .def("event_fd", &LMCacheL2Connector::event_fd)
      .def("submit_batch_get", &LMCacheL2Connector::SubmitGet, py::arg("keys"), py::arg("buffers"))
      .def("submit_batch_set", &LMCacheL2Connector::SubmitSet, py::arg("keys"), py::arg("buffers"))
      .def("submit_batch_exists", &LMCacheL2Connector::SubmitExists, py::arg("keys"))
      .def("submit_batch_delete", &LMCacheL2Connector::SubmitDelete, py::arg("keys"))
      .def("drain_completions", &LMCacheL2Connector::DrainCompletions, py::arg("codes") = false)
      .def("close", &LMCacheL2Connector::Close)
      .def_property_readonly("closed", &LMCacheL2Connector::closed)
      .def_property_readonly("namespace", &LMCacheL2Connector::ns)
      .def_property_readonly("transport", &LMCacheL2Connector::transport)
      .def_property_readonly("endpoint", &LMCacheL2Connector::endpoint);
}

}  // namespace kvport::python
