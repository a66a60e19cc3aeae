// SPDX-License-Identifier: Apache-2.0
#include "bench/disk_bench.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "bench/bench_node.h"
#include "bench/child_process.h"
#include "bench/model_shape.h"
#include "bench/phase_driver.h"
#include "kvport/client.h"
#include "kvport/server.h"
#include "kvport/size.h"

namespace kvport::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

void Note(const DiskBenchLog& log, std::string_view text) {
  if (log) log(text);
}

bool Failed(const PhaseResult& p) {
  return !p.error.empty() || p.failed_keys > 0;
}

// --- The data set ------------------------------------------------------------------------------
//
// Key i is "d<i>". Its value is one byte, 'a' + i % 26, repeated, with a 16-byte stamp naming
// the key at both ends (a value shorter than two stamps holds a prefix of one): a read is
// checked byte for byte (the ends against the stamp, the body with one memcmp of itself shifted
// by a byte), so a value of another key, a shifted, torn or zeroed one fails.

constexpr size_t kStampBytes = 16;
constexpr uint64_t kStampMagic = 0x6b64706f7274766bull;  // "kvportdk"

std::string KeyOf(uint64_t i) {
  return fmt::format("d{}", i);
}

uint8_t FillOf(uint64_t i) {
  return static_cast<uint8_t>('a' + i % 26);
}

void StampOf(uint64_t i, uint8_t* out) {
  std::memcpy(out, &kStampMagic, 8);
  std::memcpy(out + 8, &i, 8);
}

void MakeValue(uint64_t i, uint8_t* out, uint64_t size) {
  std::memset(out, FillOf(i), size);
  uint8_t stamp[kStampBytes];
  StampOf(i, stamp);
  std::memcpy(out, stamp, std::min<uint64_t>(kStampBytes, size));
  if (size >= 2 * kStampBytes) std::memcpy(out + size - kStampBytes, stamp, kStampBytes);
}

bool CheckValue(uint64_t i, const uint8_t* got, uint64_t length, uint64_t size) {
  if (length != size) return false;
  uint8_t stamp[kStampBytes];
  StampOf(i, stamp);
  const uint64_t head = std::min<uint64_t>(kStampBytes, size);
  const uint64_t tail = size >= 2 * kStampBytes ? kStampBytes : 0;
  if (std::memcmp(got, stamp, head) != 0) return false;
  if (tail > 0 && std::memcmp(got + size - tail, stamp, tail) != 0) return false;
  const uint64_t body = size - head - tail;
  if (body == 0) return true;
  const uint8_t* b = got + head;
  return b[0] == FillOf(i) && (body == 1 || std::memcmp(b, b + 1, body - 1) == 0);
}

// --- The node ----------------------------------------------------------------------------------

std::optional<uint64_t> FindCounter(const ServerStats& stats, std::string_view name) {
  for (const auto& [counter, value] : stats.counters) {
    if (counter == name) return value;
  }
  return std::nullopt;
}

Status InitClient(Client& client, const Server& server, const BenchOptions& o) {
  InitOptions init;
  init.connections = o.connections;
  init.busy_poll = std::chrono::microseconds(o.busy_poll_us);
  init.timeout = std::chrono::seconds(120);
  init.transport_type = 1;  // TCP
  return client.Init("kvport-bench", server.address(), init);
}

// Waits until the node's disk queue holds at most `bytes` (STATS disk_pending_bytes), polling
// its counters; Timeout past `deadline`.
Status WaitForQueue(const Server& server, uint64_t bytes, Clock::time_point deadline) {
  for (;;) {
    const uint64_t pending = server.Stats().Get("disk_pending_bytes");
    if (pending <= bytes) return Status::Ok();
    if (Clock::now() >= deadline) {
      return Status::Timeout(
          fmt::format("the node's disk queue still held {} (waiting for {} at most)",
                      FormatSize(pending), FormatSize(bytes)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Per thread: one batch of keys and value (or read) buffers.
struct Batch {
  std::vector<uint64_t> index;
  std::vector<std::string> keys;
  std::vector<uint8_t> bytes;
};

// Puts keys [*next, end) in batches on `limits.threads` threads, claiming a batch per call;
// with `pace` a call starts only while the node's disk queue has room for what every thread's
// call evicts.
void PutKeys(const BenchOptions& o, Client& client, const Server& server, uint64_t begin,
             uint64_t end, bool pace, Clock::time_point deadline, PhaseResult* result) {
  const int threads = o.worker_threads();
  std::vector<Batch> batches(threads);
  for (Batch& b : batches)
    b.bytes.assign(o.batch * o.value_bytes, 0);  // written before the timing: no page faults
  std::atomic<uint64_t> next{begin};
  const uint64_t in_flight = static_cast<uint64_t>(threads) * o.batch * o.value_bytes;
  const uint64_t room = kDiskQueueBytes > in_flight ? kDiskQueueBytes - in_flight : 0;
  PhaseLimits limits;
  limits.threads = threads;
  limits.calls = (end - begin + o.batch - 1) / o.batch;
  limits.max_time = std::chrono::duration<double>(o.max_seconds);
  SetOptions set;
  set.ns = o.ns;
  RunTimedPhase(
      limits,
      [&](int thread, uint64_t) -> Result<CallOutcome> {
        if (pace) KVPORT_RETURN_IF_ERROR(WaitForQueue(server, room, deadline));
        const uint64_t first = next.fetch_add(o.batch);
        CallOutcome out;
        if (first >= end) return out;
        const uint64_t n = std::min<uint64_t>(o.batch, end - first);
        Batch& b = batches[thread];
        b.keys.clear();
        IOBuffers values;
        values.reserve(n);
        for (uint64_t k = 0; k < n; ++k) {
          uint8_t* v = b.bytes.data() + k * o.value_bytes;
          MakeValue(first + k, v, o.value_bytes);
          b.keys.push_back(KeyOf(first + k));
          values.Append(static_cast<const void*>(v), o.value_bytes);
        }
        KVPORT_ASSIGN_OR_RETURN(BatchResult r, client.MSet(b.keys, values, set));
        out.keys = n;
        for (KeyCode code : r.codes) {
          if (code == KeyCode::kSuccess) {
            out.bytes += o.value_bytes;
          } else {
            ++out.failed_keys;
          }
        }
        return out;
      },
      result);
}

// The keys of [0, count) the node has (MEXIST, 1024 at a time).
Result<std::vector<uint64_t>> KeysPresent(const BenchOptions& o, Client& client, uint64_t count) {
  std::vector<uint64_t> present;
  ExistOptions exist;
  exist.ns = o.ns;
  for (uint64_t first = 0; first < count; first += 1024) {
    std::vector<std::string> keys;
    for (uint64_t i = first; i < std::min<uint64_t>(count, first + 1024); ++i)
      keys.push_back(KeyOf(i));
    KVPORT_ASSIGN_OR_RETURN(BatchResult r, client.MExist(keys, exist));
    for (size_t k = 0; k < keys.size(); ++k) {
      if (r.codes[k] == KeyCode::kSuccess) present.push_back(first + k);
    }
  }
  return present;
}

// Writes back and drops from the page cache every file in `dir`, so that the next reads of
// them come from the disk (fdatasync first: only clean pages can be dropped). The files done;
// the first error in *note.
uint64_t DropFromPageCache(const fs::path& dir, std::string* note) {
  uint64_t files = 0;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file()) continue;
    const int fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (note->empty()) *note = fmt::format("open {}: {}", entry.path().string(), strerror(errno));
      continue;
    }
    const int synced = ::fdatasync(fd);
    const int dropped = synced == 0 ? ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) : errno;
    ::close(fd);
    if (synced != 0 || dropped != 0) {
      if (note->empty()) {
        *note = fmt::format("{} {}: {}", synced != 0 ? "fdatasync" : "posix_fadvise",
                            entry.path().string(), strerror(synced != 0 ? errno : dropped));
      }
      continue;
    }
    ++files;
  }
  if (ec && note->empty()) *note = fmt::format("listing {}: {}", dir.string(), ec.message());
  return files;
}

// Gets each of `keys` once, in that order, in batches on the bench's threads, every value
// checked.
void GetKeys(const BenchOptions& o, Client& client, const std::vector<uint64_t>& keys,
             PhaseResult* result) {
  const int threads = o.worker_threads();
  std::vector<Batch> batches(threads);
  for (Batch& b : batches)
    b.bytes.assign(o.batch * o.value_bytes, 0);
  std::atomic<uint64_t> next{0};
  PhaseLimits limits;
  limits.threads = threads;
  limits.calls = (keys.size() + o.batch - 1) / o.batch;
  limits.max_time = std::chrono::duration<double>(o.max_seconds);
  GetOptions get;
  get.ns = o.ns;
  RunTimedPhase(
      limits,
      [&](int thread, uint64_t) -> Result<CallOutcome> {
        const uint64_t first = next.fetch_add(o.batch);
        CallOutcome out;
        if (first >= keys.size()) return out;
        const uint64_t n = std::min<uint64_t>(o.batch, keys.size() - first);
        Batch& b = batches[thread];
        b.keys.clear();
        b.index.clear();
        IOBuffers buffers;
        buffers.reserve(n);
        for (uint64_t k = 0; k < n; ++k) {
          uint8_t* r = b.bytes.data() + k * o.value_bytes;
          std::memset(r, 0, std::min<uint64_t>(kStampBytes, o.value_bytes));  // a stale stamp
          b.index.push_back(keys[first + k]);
          b.keys.push_back(KeyOf(keys[first + k]));
          buffers.Append(static_cast<void*>(r), o.value_bytes);
        }
        KVPORT_ASSIGN_OR_RETURN(GetResult r, client.MGet(b.keys, get, buffers));
        out.keys = n;
        for (uint64_t k = 0; k < n; ++k) {
          if (r.codes[k] == KeyCode::kSuccess &&
              CheckValue(b.index[k], b.bytes.data() + k * o.value_bytes, r.value_sizes[k],
                         o.value_bytes)) {
            out.bytes += r.value_sizes[k];
          } else {
            ++out.failed_keys;
          }
        }
        return out;
      },
      result);
}

// --- fio ---------------------------------------------------------------------------------------

// One fio job: `rw` ("write", "randread") over `file` with O_DIRECT, as a phase. Its stderr
// joins its stdout (through /bin/sh), so that a failure says why.
Result<PhaseResult> RunFio(const std::string& fio, const std::string& engine, const std::string& rw,
                           const fs::path& file, uint64_t size, uint64_t block, int depth,
                           double max_seconds) {
  std::vector<std::string> args = {"/bin/sh",
                                   "-c",
                                   "exec \"$0\" \"$@\" 2>&1",
                                   fio,
                                   "--name=kvport-bench-" + rw,
                                   "--filename=" + file.string(),
                                   fmt::format("--size={}", size),
                                   fmt::format("--bs={}", block),
                                   "--direct=1",
                                   "--ioengine=" + engine,
                                   fmt::format("--iodepth={}", depth),
                                   "--rw=" + rw,
                                   "--output-format=json"};
  // The reads are bounded like the bench's phases; the layout is written whole.
  if (rw != "write") {
    args.push_back(fmt::format("--runtime={}", std::max<int64_t>(1, std::llround(max_seconds))));
  }
  int status = 0;
  const auto deadline = std::chrono::seconds(
      std::max<int64_t>(120, static_cast<int64_t>(std::ceil(20 * max_seconds))));
  KVPORT_ASSIGN_OR_RETURN(std::string output, RunCapturingStdout(args, deadline, &status));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::Unavailable(fmt::format("fio --rw={} --ioengine={} exited with status {}: {}",
                                           rw, engine, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                                           output.substr(0, 1000)));
  }
  KVPORT_ASSIGN_OR_RETURN(PhaseResult p, ParseFioJson(output, rw == "write" ? "write" : "read"));
  p.variant = fmt::format("{} qd{}", engine, depth);  // bs: the value size
  return p;
}

void RunFioBaseline(const BenchOptions& o, const fs::path& run_dir, uint64_t keys,
                    DiskBenchReport* report, const DiskBenchLog& log) {
  const std::string fio = FindProgram(o.fio);
  if (fio.empty()) {
    report->fio_skipped = fmt::format(
        "fio not found ({}; Debian's fio package, which scripts/bootstrap installs)", o.fio);
    return;
  }
  // O_DIRECT wants whole blocks: the value size rounded up to 4 KiB (the disk tier pads its
  // records to 4 KiB blocks too).
  constexpr uint64_t kBlock = 4096;
  const uint64_t block = (o.value_bytes + kBlock - 1) / kBlock * kBlock;
  const uint64_t size = std::max<uint64_t>(keys, 1) * block;
  const fs::path file = run_dir / "fio.dat";
  std::string failures;
  for (const char* engine : {"io_uring", "libaio"}) {
    Note(log, fmt::format("fio: {} {} of {} blocks, O_DIRECT, {}, iodepth {}", "write",
                          FormatSize(size), FormatSize(block), engine, o.fio_depth()));
    Result<PhaseResult> written =
        RunFio(fio, engine, "write", file, size, block, o.fio_depth(), o.max_seconds);
    if (!written.ok()) {
      failures += (failures.empty() ? "" : "; ") + written.status().message();
      continue;
    }
    Note(log, fmt::format("fio: randread of {} blocks over it", FormatSize(block)));
    Result<PhaseResult> read =
        RunFio(fio, engine, "randread", file, size, block, o.fio_depth(), o.max_seconds);
    if (!read.ok()) {
      failures += (failures.empty() ? "" : "; ") + read.status().message();
      continue;
    }
    report->fio_write = std::move(written).value();
    report->fio_read = std::move(read).value();
    if (!failures.empty()) report->fio_note = "io_uring failed, libaio used: " + failures;
    return;
  }
  report->fio_write = PhaseResult{};
  report->fio_read = PhaseResult{};
  report->fio_skipped = "fio failed: " + failures;
}

std::optional<double> Ratio(const PhaseResult& a, const PhaseResult& b) {
  if (a.system.empty() || b.system.empty() || Failed(a) || Failed(b)) return std::nullopt;
  if (b.gb_per_second() <= 0) return std::nullopt;
  return a.gb_per_second() / b.gb_per_second();
}

}  // namespace

Result<PhaseResult> ParseFioJson(const std::string& output, const std::string& rw) {
  const size_t open = output.find('{');
  const size_t close = output.rfind('}');
  if (open == std::string::npos || close == std::string::npos || close < open) {
    return Status::Corruption("fio printed no JSON: " + output.substr(0, 1000));
  }
  const nlohmann::json j =
      nlohmann::json::parse(output.substr(open, close - open + 1), nullptr, false);
  if (j.is_discarded() || !j.contains("jobs") || !j["jobs"].is_array() || j["jobs"].empty()) {
    return Status::Corruption("fio's JSON has no jobs: " + output.substr(0, 1000));
  }
  const nlohmann::json& job = j["jobs"][0];
  if (job.value("error", 0) != 0) {
    return Status::Corruption(fmt::format("fio's job reports error {}", job.value("error", 0)));
  }
  if (!job.contains(rw) || !job[rw].is_object()) {
    return Status::Corruption(fmt::format("fio's job has no \"{}\" part", rw));
  }
  const nlohmann::json& part = job[rw];
  const uint64_t io_bytes = part.value("io_bytes", uint64_t{0});
  // bw_bytes: bytes/s (fio 3.x); older fio has only bw, in KiB/s.
  double bw = part.value("bw_bytes", 0.0);
  if (bw <= 0) bw = part.value("bw", 0.0) * 1024;
  if (io_bytes == 0 || bw <= 0) {
    return Status::Corruption(fmt::format("fio's job moved no bytes ({})", rw));
  }
  PhaseResult p;
  p.system = "fio";
  p.op = rw == "read" ? Op::kGet : Op::kPut;
  p.bytes = io_bytes;
  p.calls = part.value("total_ios", uint64_t{0});
  p.keys = p.calls;
  p.seconds = static_cast<double>(io_bytes) / bw;
  return p;
}

std::optional<double> DiskBenchReport::GetVsFio() const {
  return Ratio(get, fio_read);
}

std::optional<double> DiskBenchReport::PutVsFioWrite() const {
  return Ratio(put, fio_write);
}

std::optional<double> DiskBenchReport::RestartMsPerGib() const {
  if (restored_disk_bytes == 0) return std::nullopt;
  return restart_ms / (static_cast<double>(restored_disk_bytes) / (uint64_t{1} << 30));
}

bool DiskBenchReport::AllPassed() const {
  return !Failed(put) && !Failed(get) && put_queue_drops == 0 && keys_on_disk > 0;
}

Result<DiskBenchReport> RunDiskBench(BenchOptions o, const DiskBenchLog& log) {
  if (o.shape) {
    KVPORT_ASSIGN_OR_RETURN(o.value_bytes, ChunkBytes(*o.shape));
  }
  if (o.disk_dir.empty()) return Status::InvalidArgument("--disk: no folder given");
  KVPORT_RETURN_IF_ERROR(o.Validate());
  o.fio_iodepth = o.fio_depth();
  DiskBenchReport report;
  report.options = o;
  report.keys_written = o.disk_keys();
  report.keys_filled = std::min(report.keys_written, o.disk_memory_bytes / o.value_bytes);
  // Room for the data set twice (the gets evict objects to disk again) and the records' 4 KiB
  // headers.
  report.disk_capacity = 2 * o.disk_data_bytes + (uint64_t{64} << 20);

  std::error_code ec;
  fs::create_directories(o.disk_dir, ec);
  if (ec) return Status::IoError(fmt::format("--disk {}: {}", o.disk_dir, ec.message()));
  const fs::path run_dir = fs::path(o.disk_dir) / fmt::format("kvport-bench-disk.{}", ::getpid());
  fs::remove_all(run_dir, ec);  // left by an earlier run of the same pid
  fs::create_directories(run_dir, ec);
  if (ec) return Status::IoError(fmt::format("--disk: {}: {}", run_dir.string(), ec.message()));
  report.run_dir = run_dir.string();
  struct RemoveAtEnd {
    fs::path dir;
    ~RemoveAtEnd() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  } remove_at_end{run_dir};

  ServerOptions so = EmbeddedServerOptions(o.disk_memory_bytes, o.node_threads, o.busy_poll_us,
                                           o.value_bytes, std::max<uint64_t>(o.batch, 1024));
  so.disk_dir = (run_dir / "tier").string();
  so.disk_capacity = report.disk_capacity;
  Result<std::unique_ptr<Server>> started = Server::Start(so);
  if (!started.ok()) return started.status().WithContext("starting the embedded node");
  std::unique_ptr<Server> server = std::move(started).value();
  report.node = fmt::format("embedded {} (memory {}, {}; disk tier {}, capacity {})",
                            server->address(), FormatSize(so.capacity_bytes),
                            so.threads == 0 ? std::string("one I/O thread per CPU")
                                            : fmt::format("{} I/O threads", so.threads),
                            so.disk_dir, FormatSize(so.disk_capacity));
  Note(log, "disk: node " + report.node);

  // Put: the memory's worth untimed, then the rest timed until the disk queue is empty.
  auto client = std::make_unique<Client>();
  KVPORT_RETURN_IF_ERROR(InitClient(*client, *server, o));
  const Clock::time_point give_up =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(4 * o.max_seconds + 60));
  Note(log, fmt::format("disk: filling the node's memory, {} untimed",
                        FormatSize(report.keys_filled * o.value_bytes)));
  PhaseResult fill;
  PutKeys(o, *client, *server, 0, report.keys_filled, /*pace=*/true, give_up, &fill);
  if (Failed(fill)) {
    return Status::Internal(fmt::format(
        "filling the node's memory failed: {}",
        fill.error.empty() ? fmt::format("{} keys not stored", fill.failed_keys) : fill.error));
  }
  KVPORT_RETURN_IF_ERROR(WaitForQueue(*server, 0, give_up));
  const ServerStats before_put = server->Stats();
  report.put.system = "kvport";
  report.put.variant = "disk";
  report.put.op = Op::kPut;
  Note(log, fmt::format("disk: put, {} evicting to disk",
                        FormatSize((report.keys_written - report.keys_filled) * o.value_bytes)));
  const Clock::time_point put_started = Clock::now();
  PutKeys(o, *client, *server, report.keys_filled, report.keys_written, /*pace=*/true, give_up,
          &report.put);
  report.put_ack_seconds = report.put.seconds;
  if (Status drained = WaitForQueue(*server, 0, give_up); !drained.ok()) {
    if (report.put.error.empty()) report.put.error = drained.ToString();
  }
  report.put.seconds = std::chrono::duration<double>(Clock::now() - put_started).count();
  const ServerStats after_put = server->Stats();
  report.put_disk_writes = after_put.Get("disk_writes") - before_put.Get("disk_writes");
  report.put_queue_drops = after_put.Get("disk_queue_drops") - before_put.Get("disk_queue_drops");

  // Restart over the same folder.
  client.reset();
  server->Stop();
  server.reset();
  Note(log, "disk: restarting the node over the same folder");
  const Clock::time_point restart_started = Clock::now();
  started = Server::Start(so);
  report.restart_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - restart_started).count();
  if (!started.ok()) return started.status().WithContext("restarting the node over its disk tier");
  server = std::move(started).value();
  {
    const ServerStats s = server->Stats();
    report.restore_ms = FindCounter(s, "disk_restore_ms");
    report.restored_objects = s.Get("disk_restored");
    report.restored_disk_bytes = s.Get("disk_bytes");
  }

  // Get: every key the restarted node has (all on disk), once each, shuffled, from the disk.
  client = std::make_unique<Client>();
  KVPORT_RETURN_IF_ERROR(InitClient(*client, *server, o));
  KVPORT_ASSIGN_OR_RETURN(std::vector<uint64_t> on_disk,
                          KeysPresent(o, *client, report.keys_written));
  report.keys_on_disk = on_disk.size();
  std::shuffle(on_disk.begin(), on_disk.end(), std::mt19937_64(20240601));
  report.page_cache_files = DropFromPageCache(so.disk_dir, &report.page_cache_note);
  report.get.system = "kvport";
  report.get.variant = "disk";
  report.get.op = Op::kGet;
  if (on_disk.empty()) {
    report.get.error = "no key of the data set was on disk after the restart";
  } else {
    Note(log, fmt::format("disk: get, {} keys from disk, once each", on_disk.size()));
    const ServerStats before_get = server->Stats();
    GetKeys(o, *client, on_disk, &report.get);
    const ServerStats after_get = server->Stats();
    report.get_disk_hits = after_get.Get("disk_hits") - before_get.Get("disk_hits");
    report.get_disk_writes = after_get.Get("disk_writes") - before_get.Get("disk_writes");
    report.get_queue_drops = after_get.Get("disk_queue_drops") - before_get.Get("disk_queue_drops");
  }
  client.reset();
  server->Stop();
  server.reset();

  RunFioBaseline(o, run_dir, report.keys_written, &report, log);
  return report;
}

}  // namespace kvport::bench
