// SPDX-License-Identifier: Apache-2.0
#include "bench/scale_run.h"

#include <hiredis/hiredis.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <thread>

#include "bench/child_process.h"
#include "bench/load_connection.h"
#include "bench/redis_server.h"
#include "kvport/client.h"
#include "kvport/host_info.h"
#include "kvport/size.h"

namespace kvport::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kArenaBlock = 4096;  // store::Arena::kBlockBytes: a value's space rounds up
constexpr size_t kFillBatch = 256;
constexpr std::string_view kConnectionKey = "scale/connection-value";

// The node's max_index_bytes for `objects` objects: far more than an object's index entries take
// in either tier (a few hundred bytes), so the budget never evicts or drops what is measured.
uint64_t IndexBudget(uint64_t objects) {
  return objects * 4096 + (64ull << 20);
}

uint64_t RoundUpToBlock(uint64_t bytes) {
  return (bytes + kArenaBlock - 1) / kArenaBlock * kArenaBlock;
}

// MemAvailable from /proc/meminfo: what a new process can still take without swapping others
// out (the host is shared); 0 when unknown.
uint64_t AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string name;
  uint64_t kib = 0;
  std::string unit;
  while (in >> name >> kib >> unit) {
    if (name == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

// Object i's key: "scale/" then i in decimal, zero-padded to `key_bytes` in all.
std::string ObjectKey(uint64_t i, uint32_t key_bytes) {
  std::string digits = std::to_string(i);
  const size_t width = key_bytes > 6 ? key_bytes - 6 : 0;
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return "scale/" + digits;
}

// Object i's value: a fixed pattern with i in its first 8 bytes (when it has 8), so a read of
// another key's bytes is caught.
void StampValue(uint64_t i, std::span<uint8_t> value) {
  std::memset(value.data(), 0x5a, value.size());
  std::memcpy(value.data(), &i, std::min<size_t>(sizeof i, value.size()));
}

bool HasStamp(uint64_t i, std::span<const uint8_t> value) {
  const size_t n = std::min<size_t>(sizeof i, value.size());
  if (std::memcmp(value.data(), &i, n) != 0) return false;
  return std::all_of(value.begin() + n, value.end(), [](uint8_t b) { return b == 0x5a; });
}

CallLatency Summarise(const LatencyHistogram& h) {
  return {h.Percentile(0.5), h.Percentile(0.99)};
}

// ---- the two systems --------------------------------------------------------------------------

// A system under measurement: a process of its own, a control connection for what the data
// calls do not cover (its object count, a LIST page), and data connections (LoadConnection).
class ScaleTarget {
 public:
  virtual ~ScaleTarget() = default;
  virtual int pid() const = 0;
  virtual Result<std::unique_ptr<LoadConnection>> Connect() = 0;
  virtual Result<uint64_t> ObjectCount() = 0;
  // The bytes the system keeps for values apart from its heap (kvport: arena blocks in use).
  virtual Result<uint64_t> ValueStoreBytes() = 0;
  // One page of at most `keys` keys from the start of the key space: the keys it holds.
  virtual Result<size_t> ListPage(uint32_t keys) = 0;
  // Holds no more than it holds now: each new object evicts (redis: maxmemory at its
  // used_memory, allkeys-lru; kvport's arena was sized for the objects written).
  virtual Status CapAtCurrentSize() = 0;
  // Objects evicted so far.
  virtual Result<uint64_t> Evictions() = 0;
};

// A `kvport serve` child process configured for the run (its config in a private folder).
class KvportTarget : public ScaleTarget {
 public:
  // `extra_args` go to `kvport serve` after the others (a disk tier's flags).
  static Result<std::unique_ptr<KvportTarget>> Start(
      const ScaleOptions& o, uint64_t capacity, uint64_t max_index_bytes, uint32_t max_connections,
      const std::vector<std::string>& extra_args = {}) {
    std::string dir_template = (std::filesystem::temp_directory_path() / "kvport-scale-XXXXXX");
    if (::mkdtemp(dir_template.data()) == nullptr) return Status::FromErrno("mkdtemp", errno);
    std::unique_ptr<KvportTarget> t(new KvportTarget(dir_template));
    const std::string config = t->dir_ + "/node.yaml";
    {
      std::ofstream out(config);
      out << "max_connections: " << max_connections << "\n"
          << "max_index_bytes: " << max_index_bytes << "\n"
          << "idle_timeout_secs: 0\n"
          << "disk_stop_flush_secs: 3600\n";
      if (!out) return Status::IoError("cannot write " + config);
    }
    std::string last_error;
    for (int attempt = 0; attempt < 3; ++attempt) {
      KVPORT_ASSIGN_OR_RETURN(uint16_t port, PickFreeLoopbackPort());
      t->endpoint_ = fmt::format("127.0.0.1:{}", port);
      std::vector<std::string> args{o.kvport_executable,
                                    "--log-level",
                                    "warn",
                                    "serve",
                                    "--config",
                                    config,
                                    "--listen",
                                    t->endpoint_,
                                    "--unix-socket",
                                    "",
                                    "--capacity",
                                    std::to_string(capacity),
                                    "--threads",
                                    std::to_string(o.node_threads)};
      args.insert(args.end(), extra_args.begin(), extra_args.end());
      KVPORT_ASSIGN_OR_RETURN(t->process_, BackgroundProcess::Start(args));
      // A restart reads a disk tier's index back first: minutes for millions of objects.
      const Clock::time_point deadline =
          Clock::now() +
          (extra_args.empty() ? std::chrono::seconds(20) : std::chrono::seconds(900));
      while (Clock::now() < deadline) {
        auto control = std::make_unique<Client>();
        InitOptions io;
        io.transport_type = 1;
        io.connections = 1;
        Status s = control->Init("kvport-scale", t->endpoint_, io);
        if (s.ok()) {
          t->control_ = std::move(control);
          return t;
        }
        last_error = s.ToString();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      t->process_.reset();  // another process may have taken the port: try another
    }
    return Status::Unavailable(
        fmt::format("kvport serve on {} did not answer ({}); run it with the same flags to see "
                    "why",
                    t->endpoint_, last_error));
  }

  ~KvportTarget() override {
    control_.reset();
    process_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  int pid() const override { return process_->pid(); }

  // A clean stop (SIGTERM): the node finishes, flushing what its disk tier still lacks.
  Status Stop() {
    control_.reset();
    return process_->Terminate(std::chrono::hours(1));
  }

  Result<NodeStats> Stats() { return control_->Stats(); }

  Result<std::unique_ptr<LoadConnection>> Connect() override {
    return ConnectKvport(endpoint_, "");
  }

  Result<uint64_t> ObjectCount() override {
    KVPORT_ASSIGN_OR_RETURN(NodeStats stats, control_->Stats());
    return stats.Get("objects");
  }

  Result<uint64_t> ValueStoreBytes() override {
    KVPORT_ASSIGN_OR_RETURN(NodeStats stats, control_->Stats());
    return stats.Get("used_bytes");
  }

  Result<size_t> ListPage(uint32_t keys) override {
    KVPORT_ASSIGN_OR_RETURN(KeyPage page, control_->List("", 0, keys));
    return page.keys.size();
  }

  Status CapAtCurrentSize() override { return Status::Ok(); }

  Result<uint64_t> Evictions() override {
    KVPORT_ASSIGN_OR_RETURN(NodeStats stats, control_->Stats());
    return stats.Get("evictions");
  }

 private:
  explicit KvportTarget(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
  std::string endpoint_;
  std::unique_ptr<BackgroundProcess> process_;
  std::unique_ptr<Client> control_;
};

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

class RedisTarget : public ScaleTarget {
 public:
  static Result<std::unique_ptr<RedisTarget>> Start(const std::string& executable,
                                                    uint32_t max_clients) {
    KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<RedisServer> server,
                            RedisServer::Start(executable, std::chrono::seconds(10),
                                               {"--maxclients", std::to_string(max_clients)}));
    const timeval timeout{60, 0};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", server->port(), timeout);
    if (c == nullptr || c->err != 0) {
      Status s = Status::Unavailable(
          fmt::format("redis control connection: {}", c == nullptr ? "no memory" : c->errstr));
      if (c != nullptr) redisFree(c);
      return s;
    }
    redisSetTimeout(c, timeout);
    return std::unique_ptr<RedisTarget>(new RedisTarget(std::move(server), c));
  }

  ~RedisTarget() override {
    redisFree(control_);
    server_.reset();
  }

  int pid() const override { return server_->pid(); }

  Result<std::unique_ptr<LoadConnection>> Connect() override {
    return ConnectRedis(server_->port());
  }

  Result<uint64_t> ObjectCount() override {
    KVPORT_ASSIGN_OR_RETURN(Reply r, Command({"DBSIZE"}));
    if (r->type != REDIS_REPLY_INTEGER) return Status::IoError("redis DBSIZE: not an integer");
    return static_cast<uint64_t>(r->integer);
  }

  Result<uint64_t> ValueStoreBytes() override { return uint64_t{0}; }

  Result<size_t> ListPage(uint32_t keys) override {
    KVPORT_ASSIGN_OR_RETURN(Reply r, Command({"SCAN", "0", "COUNT", std::to_string(keys)}));
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[1]->type != REDIS_REPLY_ARRAY) {
      return Status::IoError("redis SCAN: unexpected reply");
    }
    return r->element[1]->elements;
  }

  Status CapAtCurrentSize() override {
    KVPORT_ASSIGN_OR_RETURN(uint64_t used, InfoField("memory", "used_memory"));
    KVPORT_ASSIGN_OR_RETURN(Reply policy,
                            Command({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}));
    KVPORT_ASSIGN_OR_RETURN(Reply limit,
                            Command({"CONFIG", "SET", "maxmemory", std::to_string(used)}));
    if (policy->type != REDIS_REPLY_STATUS || limit->type != REDIS_REPLY_STATUS) {
      return Status::IoError("redis CONFIG SET maxmemory: refused");
    }
    return Status::Ok();
  }

  Result<uint64_t> Evictions() override { return InfoField("stats", "evicted_keys"); }

 private:
  RedisTarget(std::unique_ptr<RedisServer> server, redisContext* control)
      : server_(std::move(server)), control_(control) {}

  // A "name:value" line of INFO `section`, as a number.
  Result<uint64_t> InfoField(const std::string& section, const std::string& name) {
    KVPORT_ASSIGN_OR_RETURN(Reply r, Command({"INFO", section}));
    if (r->type != REDIS_REPLY_STRING) {
      return Status::IoError("redis INFO: not a string");
    }
    const std::string text(r->str, r->len);
    const size_t at = text.find("\r\n" + name + ":");
    if (at == std::string::npos) return Status::IoError("redis INFO: no " + name);
    return std::strtoull(text.c_str() + at + 3 + name.size(), nullptr, 10);
  }

  Result<Reply> Command(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    void* raw = redisCommandArgv(control_, static_cast<int>(argv.size()), argv.data(), lens.data());
    if (raw == nullptr)
      return Status::IoError(fmt::format("redis {}: {}", args[0], control_->errstr));
    return Reply(static_cast<redisReply*>(raw));
  }

  std::unique_ptr<RedisServer> server_;
  redisContext* control_;
};

// ---- the measurements -------------------------------------------------------------------------

// Stores objects [0, n) through `conn`, `kFillBatch` per call.
// Stores objects [first_id, first_id + n) through `conn`, `kFillBatch` per call.
Status Fill(LoadConnection& conn, const ScaleOptions& o, uint64_t first_id, uint64_t n,
            uint64_t* wrong) {
  std::vector<uint8_t> bytes(kFillBatch * o.value_bytes);
  std::vector<std::string> keys;
  std::vector<std::span<uint8_t>> values;
  std::vector<KeyAnswer> answers;
  for (uint64_t first = first_id; first < first_id + n; first += kFillBatch) {
    const size_t count = static_cast<size_t>(std::min<uint64_t>(kFillBatch, first_id + n - first));
    keys.clear();
    values.clear();
    for (size_t j = 0; j < count; ++j) {
      keys.push_back(ObjectKey(first + j, o.key_bytes));
      std::span<uint8_t> value(bytes.data() + j * o.value_bytes, o.value_bytes);
      StampValue(first + j, value);
      values.push_back(value);
    }
    KVPORT_RETURN_IF_ERROR(conn.Put(keys, values, {}, &answers));
    *wrong += static_cast<uint64_t>(std::count_if(
        answers.begin(), answers.end(), [](KeyAnswer a) { return a != KeyAnswer::kFound; }));
  }
  return Status::Ok();
}

// MEXIST, MGET and a LIST page, `o.calls` times each, on random stored keys.
Status MeasureCalls(ScaleTarget& target, LoadConnection& conn, const ScaleOptions& o, uint64_t n,
                    ObjectsRow* row) {
  std::mt19937_64 random(o.seed);
  std::uniform_int_distribution<uint64_t> pick(0, n - 1);
  LatencyHistogram exist, get, list;
  std::vector<std::string> keys;
  std::vector<uint64_t> ids;
  std::vector<KeyAnswer> answers;
  std::vector<uint64_t> lengths;
  std::vector<uint8_t> bytes(o.get_keys * o.value_bytes);
  std::vector<std::span<uint8_t>> buffers;
  for (uint32_t g = 0; g < o.get_keys; ++g)
    buffers.emplace_back(bytes.data() + g * o.value_bytes, o.value_bytes);
  auto draw = [&](uint32_t count) {
    keys.clear();
    ids.clear();
    for (uint32_t k = 0; k < count; ++k) {
      ids.push_back(pick(random));
      keys.push_back(ObjectKey(ids.back(), o.key_bytes));
    }
  };
  for (uint32_t call = 0; call < o.calls; ++call) {
    draw(o.exist_keys);
    Clock::time_point start = Clock::now();
    KVPORT_RETURN_IF_ERROR(conn.Exists(keys, &answers));
    exist.Record(static_cast<uint64_t>((Clock::now() - start).count()));
    row->wrong_answers += static_cast<uint64_t>(std::count_if(
        answers.begin(), answers.end(), [](KeyAnswer a) { return a != KeyAnswer::kFound; }));

    draw(o.get_keys);
    start = Clock::now();
    KVPORT_RETURN_IF_ERROR(conn.Get(keys, buffers, &answers, &lengths));
    get.Record(static_cast<uint64_t>((Clock::now() - start).count()));
    for (size_t k = 0; k < keys.size(); ++k) {
      if (answers[k] != KeyAnswer::kFound || lengths[k] != o.value_bytes ||
          !HasStamp(ids[k], buffers[k])) {
        ++row->wrong_answers;
      }
    }

    start = Clock::now();
    KVPORT_ASSIGN_OR_RETURN(size_t listed, target.ListPage(o.list_keys));
    list.Record(static_cast<uint64_t>((Clock::now() - start).count()));
    if (listed == 0) ++row->wrong_answers;  // a page of a non-empty key space is never empty
  }
  row->exist = Summarise(exist);
  row->get = Summarise(get);
  row->list = Summarise(list);
  return Status::Ok();
}

using StartTarget = std::function<Result<std::unique_ptr<ScaleTarget>>(uint64_t objects)>;

Status MeasureObjects(const StartTarget& start, const ScaleOptions& o, uint64_t n,
                      ObjectsRow* row) {
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<ScaleTarget> target, start(n));
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<LoadConnection> conn, target->Connect());
  const uint64_t empty = ProcessResidentBytes(target->pid());
  const Clock::time_point fill_start = Clock::now();
  KVPORT_RETURN_IF_ERROR(Fill(*conn, o, 0, n, &row->wrong_answers));
  row->fill_seconds = std::chrono::duration<double>(Clock::now() - fill_start).count();
  const uint64_t full = ProcessResidentBytes(target->pid());
  row->resident_bytes = full > empty ? full - empty : 0;
  KVPORT_ASSIGN_OR_RETURN(row->value_store_bytes, target->ValueStoreBytes());
  KVPORT_ASSIGN_OR_RETURN(uint64_t held, target->ObjectCount());
  if (held != n) row->wrong_answers += held > n ? held - n : n - held;
  KVPORT_RETURN_IF_ERROR(MeasureCalls(*target, *conn, o, n, row));
  // At capacity: as many new objects again, each making room by evicting.
  KVPORT_RETURN_IF_ERROR(target->CapAtCurrentSize());
  KVPORT_ASSIGN_OR_RETURN(const uint64_t evictions_before, target->Evictions());
  const Clock::time_point evicting_start = Clock::now();
  KVPORT_RETURN_IF_ERROR(Fill(*conn, o, n, n, &row->wrong_answers));
  row->evicting_fill_seconds = std::chrono::duration<double>(Clock::now() - evicting_start).count();
  KVPORT_ASSIGN_OR_RETURN(const uint64_t evictions_after, target->Evictions());
  row->evictions = evictions_after - evictions_before;
  return Status::Ok();
}

// Every connection says one thing (a one-key EXISTS), then all stay open.
Status MeasureConnections(const StartTarget& start, const ScaleOptions& o, const BenchLog& log,
                          std::string_view system, ConnectionsRow* row) {
  row->connections = o.connections;
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<ScaleTarget> target, start(0));
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<LoadConnection> writer, target->Connect());
  std::vector<uint8_t> value(o.connection_value_bytes);
  StampValue(0, value);
  const std::vector<std::string> keys{std::string(kConnectionKey)};
  const std::vector<std::span<uint8_t>> values{std::span<uint8_t>(value)};
  std::vector<KeyAnswer> answers;
  KVPORT_RETURN_IF_ERROR(writer->Put(keys, values, {}, &answers));
  const uint64_t base = ProcessResidentBytes(target->pid());

  std::vector<std::unique_ptr<LoadConnection>> connections;
  connections.reserve(o.connections);
  for (uint32_t i = 0; i < o.connections; ++i) {
    KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<LoadConnection> c, target->Connect());
    KVPORT_RETURN_IF_ERROR(c->Exists(keys, &answers));
    if (answers.size() != 1 || answers[0] != KeyAnswer::kFound) ++row->wrong_answers;
    connections.push_back(std::move(c));
    if ((i + 1) % 2000 == 0) Note(log, fmt::format("{}: {} connections open", system, i + 1));
  }
  const uint64_t idle = ProcessResidentBytes(target->pid());
  row->idle_bytes = idle > base ? idle - base : 0;

  std::vector<uint8_t> buffer(o.connection_value_bytes);
  const std::vector<std::span<uint8_t>> buffers{std::span<uint8_t>(buffer)};
  std::vector<uint64_t> lengths;
  for (std::unique_ptr<LoadConnection>& c : connections) {
    std::memset(buffer.data(), 0, buffer.size());
    KVPORT_RETURN_IF_ERROR(c->Get(keys, buffers, &answers, &lengths));
    if (answers.size() != 1 || answers[0] != KeyAnswer::kFound ||
        lengths[0] != o.connection_value_bytes || !HasStamp(0, buffer)) {
      ++row->wrong_answers;
    }
  }
  const uint64_t after = ProcessResidentBytes(target->pid());
  row->after_read_bytes = after > base ? after - base : 0;
  return Status::Ok();
}

// A node with a disk tier in `o.disk_dir` takes `o.disk_objects` objects into a small memory
// tier (most are evicted to the disk as they come; its clean stop writes the rest), is stopped
// and started again on the same folder.
Status MeasureRestart(const ScaleOptions& o, RestartRow* row) {
  const uint64_t n = o.disk_objects;
  row->objects = n;
  const uint64_t memory =
      std::clamp<uint64_t>(n * RoundUpToBlock(o.value_bytes) / 8, 64ull << 20, 1ull << 30);
  // A record: a block of header and names, then the value in whole blocks (store/disk_record.h).
  const uint64_t disk = std::max<uint64_t>(
      n * (kArenaBlock + RoundUpToBlock(o.value_bytes)) / 4 * 5 + (256ull << 20), 2ull << 30);
  std::error_code error;
  std::filesystem::create_directories(o.disk_dir, error);
  const std::filesystem::space_info space = std::filesystem::space(o.disk_dir, error);
  if (error) return Status::IoError(o.disk_dir + ": " + error.message());
  if (disk > space.available / 10 * 9) {
    row->skipped = fmt::format("needs about {} of disk in {}, {} free", FormatSize(disk),
                               o.disk_dir, FormatSize(space.available));
    return Status::Ok();
  }
  const std::string folder = o.disk_dir + "/kvport-scale-disk";
  std::filesystem::remove_all(folder, error);
  const std::vector<std::string> disk_args{"--disk", folder, "--disk-capacity",
                                           std::to_string(disk)};
  // The disk tier's index may take half of max_index_bytes; past that it drops what is evicted.
  const uint64_t max_index_bytes = IndexBudget(n);
  {
    KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<KvportTarget> node,
                            KvportTarget::Start(o, memory, max_index_bytes, 64, disk_args));
    KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<LoadConnection> conn, node->Connect());
    const Clock::time_point fill_start = Clock::now();
    KVPORT_RETURN_IF_ERROR(Fill(*conn, o, 0, n, &row->wrong_answers));
    row->fill_seconds = std::chrono::duration<double>(Clock::now() - fill_start).count();
    KVPORT_ASSIGN_OR_RETURN(NodeStats stats, node->Stats());
    row->dropped = stats.Get("disk_queue_drops") + stats.Get("disk_index_drops") +
                   stats.Get("disk_evicted_objects");
    conn.reset();
    const Clock::time_point stop_start = Clock::now();
    KVPORT_RETURN_IF_ERROR(node->Stop());
    row->stop_seconds = std::chrono::duration<double>(Clock::now() - stop_start).count();
  }
  const Clock::time_point start = Clock::now();
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<KvportTarget> node,
                          KvportTarget::Start(o, memory, max_index_bytes, 64, disk_args));
  row->restart_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  KVPORT_ASSIGN_OR_RETURN(NodeStats stats, node->Stats());
  row->restored = stats.Get("disk_objects") + stats.Get("objects");
  row->disk_index_bytes = stats.Get("disk_index_bytes");
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<LoadConnection> conn, node->Connect());
  std::mt19937_64 random(o.seed);
  std::uniform_int_distribution<uint64_t> pick(0, n - 1);
  std::vector<uint8_t> value(o.value_bytes);
  const std::vector<std::span<uint8_t>> buffers{std::span<uint8_t>(value)};
  std::vector<KeyAnswer> answers;
  std::vector<uint64_t> lengths;
  LatencyHistogram reads;
  for (uint32_t call = 0; call < o.calls; ++call) {
    const uint64_t id = pick(random);
    const Clock::time_point read_start = Clock::now();
    KVPORT_RETURN_IF_ERROR(conn->Get({ObjectKey(id, o.key_bytes)}, buffers, &answers, &lengths));
    const auto took = static_cast<uint64_t>((Clock::now() - read_start).count());
    if (call == 0) row->first_read_ns = took;
    reads.Record(took);
    if (answers[0] == KeyAnswer::kMissing) {
      ++row->read_misses;
    } else if (answers[0] != KeyAnswer::kFound || lengths[0] != o.value_bytes ||
               !HasStamp(id, value)) {
      ++row->wrong_answers;
    }
  }
  row->read = Summarise(reads);
  node.reset();
  std::filesystem::remove_all(folder, error);
  return Status::Ok();
}

void MeasureSystem(const StartTarget& start, const ScaleOptions& o, const BenchLog& log,
                   uint64_t (*memory_needed)(const ScaleOptions&, uint64_t), SystemScale* out) {
  for (uint64_t n : o.object_counts) {
    ObjectsRow row;
    row.objects = n;
    const uint64_t needed = memory_needed(o, n);
    const uint64_t available = AvailableMemoryBytes();
    if (available != 0 && needed > available / 10 * 9) {
      row.skipped = fmt::format("needs about {}, the host has {} available", FormatSize(needed),
                                FormatSize(available));
    } else {
      Note(log, fmt::format("{}: {} objects of {} bytes", out->system, n, o.value_bytes));
      Status s = MeasureObjects(start, o, n, &row);
      if (!s.ok()) row.skipped = s.ToString();
    }
    out->objects.push_back(std::move(row));
  }
  if (o.connections > 0) {
    Note(log, fmt::format("{}: {} connections", out->system, o.connections));
    Status s = MeasureConnections(start, o, log, out->system, &out->connections);
    if (!s.ok()) out->connections.skipped = s.ToString();
  }
}

// A generous estimate of what a count takes (the skip rule only).
uint64_t KvportMemoryNeeded(const ScaleOptions& o, uint64_t n) {
  return n * (RoundUpToBlock(o.value_bytes) + o.key_bytes + 1024);
}
uint64_t RedisMemoryNeeded(const ScaleOptions& o, uint64_t n) {
  return n * (o.value_bytes + o.key_bytes + 256);
}

std::string Micros(uint64_t ns) {
  return fmt::format("{:.0f}", ns / 1000.0);
}

}  // namespace

double ObjectsRow::BytesPerObject() const {
  return objects == 0 ? 0 : static_cast<double>(resident_bytes) / static_cast<double>(objects);
}

double ObjectsRow::RoundingBytesPerObject(const ScaleOptions& o) const {
  if (objects == 0 || value_store_bytes == 0) return 0;
  return static_cast<double>(value_store_bytes) / static_cast<double>(objects) -
         static_cast<double>(o.value_bytes);
}

double ObjectsRow::IndexBytesPerObject(const ScaleOptions& o) const {
  return BytesPerObject() - static_cast<double>(o.key_bytes + o.value_bytes) -
         RoundingBytesPerObject(o);
}

bool ScaleReport::AllCorrect() const {
  if (restart.wrong_answers != 0) return false;
  for (const SystemScale* s : {&kvport, &redis}) {
    if (s->connections.wrong_answers != 0) return false;
    for (const ObjectsRow& row : s->objects)
      if (row.wrong_answers != 0) return false;
  }
  return true;
}

Result<ScaleReport> RunScale(const ScaleOptions& o, const BenchLog& log) {
  if (o.kvport_executable.empty()) return Status::InvalidArgument("no kvport executable to run");
  if (o.key_bytes < 16 || o.key_bytes > 4096) {
    return Status::InvalidArgument("key bytes must be 16-4096, got " + std::to_string(o.key_bytes));
  }
  if (o.exist_keys == 0 || o.get_keys == 0 || o.list_keys == 0 || o.calls == 0) {
    return Status::InvalidArgument("exist keys, get keys, list keys and calls must be at least 1");
  }
  for (uint64_t n : o.object_counts) {
    if (n == 0) return Status::InvalidArgument("an object count must be at least 1");
  }
  // Each connection is a descriptor here and one in the server, which inherits the limit.
  if (rlimit files{}; ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
  ScaleReport report;
  report.options = o;
  report.kvport.system = "kvport";
  report.redis.system = "redis";

  StartTarget start_kvport = [&o](uint64_t n) -> Result<std::unique_ptr<ScaleTarget>> {
    // n == 0: the connections' node, which holds one value.
    const uint64_t values =
        n == 0 ? RoundUpToBlock(o.connection_value_bytes) : n * RoundUpToBlock(o.value_bytes);
    const uint64_t capacity = values + values / 8 + (4ull << 20);
    const uint64_t max_index_bytes = IndexBudget(n);
    KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<KvportTarget> t,
                            KvportTarget::Start(o, capacity, max_index_bytes, o.connections + 64));
    return std::unique_ptr<ScaleTarget>(std::move(t));
  };
  MeasureSystem(start_kvport, o, log, KvportMemoryNeeded, &report.kvport);
  if (!o.disk_dir.empty() && o.disk_objects > 0) {
    Note(log, fmt::format("kvport: {} objects through a disk tier in {}, a clean stop and a "
                          "restart",
                          o.disk_objects, o.disk_dir));
    Status s = MeasureRestart(o, &report.restart);
    if (!s.ok()) report.restart.skipped = s.ToString();
  }

  if (!o.redis) {
    report.redis.skipped = "--no-redis";
  } else if (Result<std::string> exe = RedisServer::FindExecutable(o.redis_server); !exe.ok()) {
    report.redis.skipped = exe.status().ToString();
  } else {
    StartTarget start_redis = [&o, path = *exe](uint64_t) -> Result<std::unique_ptr<ScaleTarget>> {
      KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<RedisTarget> t,
                              RedisTarget::Start(path, o.connections + 64));
      return std::unique_ptr<ScaleTarget>(std::move(t));
    };
    MeasureSystem(start_redis, o, log, RedisMemoryNeeded, &report.redis);
  }
  return report;
}

std::string FormatScaleText(const ScaleReport& report) {
  const ScaleOptions& o = report.options;
  std::string out = fmt::format(
      "objects of {} bytes under {}-byte keys; resident memory of the server process "
      "(/proc/PID/statm) per object, less the key and the value; then as many new objects "
      "again at capacity (evicting: kvport's arena sized for the first, redis's maxmemory at its "
      "used_memory, allkeys-lru); calls on one connection, {} of each, in microseconds\n",
      o.value_bytes, o.key_bytes, o.calls);
  out += fmt::format("{:<7} {:>10} {:>9} {:>8} {:>8} {:>7} {:>10} {:>9} {:>15} {:>13} {:>14}  {}\n",
                     "system", "objects", "B/object", "index B", "rounding", "fill s", "evicting s",
                     "evictions", fmt::format("exist{} p50/99", o.exist_keys),
                     fmt::format("get{} p50/99", o.get_keys),
                     fmt::format("list{} p50/99", o.list_keys), "wrong");
  for (const SystemScale* s : {&report.kvport, &report.redis}) {
    if (!s->skipped.empty()) {
      out += fmt::format("{:<7} skipped: {}\n", s->system, s->skipped);
      continue;
    }
    for (const ObjectsRow& row : s->objects) {
      if (!row.skipped.empty()) {
        out += fmt::format("{:<7} {:>10} skipped: {}\n", s->system, row.objects, row.skipped);
        continue;
      }
      out += fmt::format(
          "{:<7} {:>10} {:>9.0f} {:>8.0f} {:>8.0f} {:>7.1f} {:>10.1f} {:>9} {:>15} {:>13} {:>14}  "
          "{}\n",
          s->system, row.objects, row.BytesPerObject(), row.IndexBytesPerObject(o),
          row.RoundingBytesPerObject(o), row.fill_seconds, row.evicting_fill_seconds, row.evictions,
          Micros(row.exist.p50_ns) + "/" + Micros(row.exist.p99_ns),
          Micros(row.get.p50_ns) + "/" + Micros(row.get.p99_ns),
          Micros(row.list.p50_ns) + "/" + Micros(row.list.p99_ns), row.wrong_answers);
    }
  }
  if (o.connections > 0) {
    out += fmt::format(
        "\n{} connections, each after a one-key EXISTS, then after reading a {}-byte value once; "
        "resident memory of the server process per connection\n",
        o.connections, o.connection_value_bytes);
    out += fmt::format("{:<7} {:>14} {:>16}  {}\n", "system", "idle B/conn", "after read B/conn",
                       "wrong");
    for (const SystemScale* s : {&report.kvport, &report.redis}) {
      const ConnectionsRow& c = s->connections;
      if (!s->skipped.empty()) continue;
      if (!c.skipped.empty()) {
        out += fmt::format("{:<7} skipped: {}\n", s->system, c.skipped);
        continue;
      }
      out += fmt::format("{:<7} {:>14.0f} {:>16.0f}  {}\n", s->system,
                         static_cast<double>(c.idle_bytes) / c.connections,
                         static_cast<double>(c.after_read_bytes) / c.connections, c.wrong_answers);
    }
  }
  const RestartRow& r = report.restart;
  if (r.objects > 0) {
    out += fmt::format(
        "\nA disk tier's restart: {} objects written through a node with a small memory tier, a "
        "clean stop, a start on the same folder; then {} single-key reads of random objects\n",
        r.objects, o.calls);
    if (!r.skipped.empty()) {
      out += fmt::format("kvport  skipped: {}\n", r.skipped);
    } else {
      out += fmt::format("{:>9} {:>7} {:>7} {:>10} {:>9} {:>12} {:>13} {:>15} {:>7} {:>6}\n",
                         "fill s", "stop s", "start s", "restored", "dropped", "index B/obj",
                         "first read us", "read p50/99 us", "misses", "wrong");
      out += fmt::format(
          "{:>9.1f} {:>7.1f} {:>7.1f} {:>10} {:>9} {:>12.0f} {:>13} {:>15} {:>7} {:>6}\n",
          r.fill_seconds, r.stop_seconds, r.restart_seconds, r.restored, r.dropped,
          r.restored == 0
              ? 0.0
              : static_cast<double>(r.disk_index_bytes) / static_cast<double>(r.restored),
          Micros(r.first_read_ns), Micros(r.read.p50_ns) + "/" + Micros(r.read.p99_ns),
          r.read_misses, r.wrong_answers);
    }
  }
  return out;
}

}  // namespace kvport::bench
