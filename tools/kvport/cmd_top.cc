// SPDX-License-Identifier: Apache-2.0
// `kvport top --url eic://HOST:PORT [--interval S] [--iterations N] [--plain]`: a live view of a
// node from its STATS, refreshed every interval: requests per second by kind, GB/s in and out,
// hit rate, used/capacity, evictions, connections, and p50/p99 latency per op.
//
// On a terminal the view is redrawn in place until Ctrl-C (or N refreshes); otherwise (a pipe,
// a file, or --plain) each refresh is printed as a block of plain lines ending with an empty
// line, for scripts and tests. Rates are over the last interval, so the first view comes one
// interval after the start.
#include <fmt/core.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "common/escape_text.h"
#include "common/monotonic_clock.h"
#include "kvport/client.h"
#include "kvport/size.h"

namespace kvport::cli {
namespace {

struct TopOptions {
  std::string url;
  std::string token_file;
  double interval_secs = 1.0;
  unsigned iterations = 0;  // 0: until interrupted
  bool plain = false;
  double timeout_secs = 5;
};

struct Sample {
  NodeStats stats;
  MonotonicClock::time_point at;
};

// The ops shown, in this order, with the STATS name of each (op_<name>, latency_<name>_p50_us).
constexpr const char* kOps[] = {"mget",          "mset",         "mexist", "mdel", "arena_get",
                                "arena_reserve", "arena_commit", "list",   "stats"};

std::string Bar(double fraction, int width) {
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int filled = static_cast<int>(std::lround(fraction * width));
  return "[" + std::string(static_cast<size_t>(filled), '#') +
         std::string(static_cast<size_t>(width - filled), '.') + "]";
}

std::string Rate(double per_second) {
  if (per_second >= 1e6) return fmt::format("{:.2f}M", per_second / 1e6);
  if (per_second >= 1e4) return fmt::format("{:.1f}k", per_second / 1e3);
  return fmt::format("{:.1f}", per_second);
}

std::string View(const std::string& node, const Sample& before, const Sample& now) {
  const double secs = std::max(1e-9, std::chrono::duration<double>(now.at - before.at).count());
  auto delta = [&](const char* name) {
    const uint64_t a = before.stats.Get(name), b = now.stats.Get(name);
    return b >= a ? static_cast<double>(b - a) : 0.0;  // a restarted node: no negative rate
  };
  const NodeStats& s = now.stats;
  std::string out = fmt::format("kvport top  node {}  interval {:.2f} s\n", EscapeText(node), secs);

  out += "ops/s      ";
  double other = delta("op_hello") + delta("op_ping") + delta("op_node_info") +
                 delta("op_shm_attach") + delta("op_arena_release");
  for (const char* op : kOps)
    out += fmt::format(" {} {}", op, Rate(delta(("op_" + std::string(op)).c_str()) / secs));
  out += fmt::format(" other {}\n", Rate(other / secs));

  out += fmt::format("throughput  in {:.3f} GB/s  out {:.3f} GB/s\n",
                     delta("bytes_received") / secs / 1e9, delta("bytes_sent") / secs / 1e9);

  const double hits = delta("hits"), misses = delta("misses");
  out += hits + misses > 0
             ? fmt::format("hit rate    {:.1f} %  ({} hits/s, {} misses/s)\n",
                           100.0 * hits / (hits + misses), Rate(hits / secs), Rate(misses / secs))
             : std::string("hit rate    -  (no lookups)\n");
  out += fmt::format("            total {} hits, {} misses\n", s.Get("hits"), s.Get("misses"));

  const uint64_t capacity = s.Get("capacity_bytes"), used = s.Get("used_bytes");
  const double fraction =
      capacity > 0 ? static_cast<double>(used) / static_cast<double>(capacity) : 0;
  out += fmt::format("memory      {} {:.1f} %  used {} of {}  reserved {}  objects {}\n",
                     Bar(fraction, 30), 100.0 * fraction, FormatSize(used), FormatSize(capacity),
                     FormatSize(s.Get("reserved_bytes")), s.Get("objects"));
  out += fmt::format("evictions   {}/s  (total {})  expirations total {}\n",
                     Rate(delta("evictions") / secs), s.Get("evictions"), s.Get("expirations"));
  out += fmt::format("connections {}  (accepted {}, refused {})  errors {}/s\n",
                     s.Get("connections"), s.Get("connections_accepted"),
                     s.Get("connections_refused"), Rate(delta("error_responses") / secs));
  out += fmt::format("latency     {:<12} {:>10} {:>10} {:>12}\n", "op", "p50_us", "p99_us",
                     "requests");
  for (const char* op : kOps) {
    const std::string name(op);
    const uint64_t count = s.Get("op_" + name);
    if (count == 0) continue;
    out += fmt::format("            {:<12} {:>10} {:>10} {:>12}\n", name,
                       s.Get("latency_" + name + "_p50_us"), s.Get("latency_" + name + "_p99_us"),
                       count);
  }
  return out;
}

int RunTop(const TopOptions& o) {
  if (o.url.empty()) return Fail(Status::InvalidArgument("pass --url eic://HOST:PORT"));
  if (!(o.interval_secs > 0)) return Fail(Status::InvalidArgument("--interval must be > 0"));
  InitOptions init;
  init.transport_type = 1;  // STATS only: no shared memory needed
  init.connections = 1;
  init.token_file = o.token_file;  // else $KVPORT_TOKEN
  init.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_secs * 1000));
  Result<std::string> url_ns = EndpointNamespace(o.url);
  if (!url_ns.ok()) return Fail(url_ns.status());
  Client client;
  Status init_status = client.Init("kvport-top", o.url, init);
  if (!init_status.ok()) return Fail(init_status);

  const bool live = !o.plain && ::isatty(STDOUT_FILENO) == 1;
  const auto interval = std::chrono::duration_cast<MonotonicClock::duration>(
      std::chrono::duration<double>(o.interval_secs));
  auto take = [&client]() -> Result<Sample> {
    Sample sample;
    KVPORT_ASSIGN_OR_RETURN(sample.stats, client.Stats());
    sample.at = MonotonicClock::now();
    return sample;
  };
  Result<Sample> before = take();
  if (!before.ok()) return Fail(before.status());
  auto next = before->at;
  for (unsigned i = 0; o.iterations == 0 || i < o.iterations; ++i) {
    next += interval;
    std::this_thread::sleep_until(next);
    Result<Sample> now = take();
    if (!now.ok()) return Fail(now.status());
    std::string view = View(client.endpoint(), *before, *now);
    if (live) {
      // Home and clear, then the view: no alternate screen, so Ctrl-C leaves the last view.
      view = "\x1b[H\x1b[2J" + view;
    } else {
      view += "\n";
    }
    std::fwrite(view.data(), 1, view.size(), stdout);
    std::fflush(stdout);
    before = std::move(now);
  }
  return 0;
}

}  // namespace

void AddTopCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<TopOptions>();
  CLI::App* cmd = app.add_subcommand(
      "top", "Live view of a node (STATS every interval): ops/s, GB/s, hit rate, memory, p50/p99");
  cmd->add_option("--url", o->url, "The node: eic://HOST:PORT or HOST:PORT")->required();
  cmd->add_option("--token-file", o->token_file,
                  "File whose first line is the node's access token (default: $KVPORT_TOKEN)");
  cmd->add_option("--interval", o->interval_secs, "Seconds between refreshes")
      ->capture_default_str();
  cmd->add_option("--iterations", o->iterations, "Refreshes before exiting (0: until Ctrl-C)")
      ->capture_default_str();
  cmd->add_flag("--plain", o->plain,
                "Print each refresh as plain lines (the default when stdout is not a terminal)");
  cmd->add_option("--timeout", o->timeout_secs, "Seconds per STATS call")->capture_default_str();
  cmd->callback([o, exit_code] { *exit_code = RunTop(*o); });
}

}  // namespace kvport::cli
