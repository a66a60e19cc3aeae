// SPDX-License-Identifier: Apache-2.0
#include "bench/load_report.h"

#include <fmt/core.h>

#include <cstdio>
#include <cstdlib>
#include <map>

#include <sys/wait.h>

#include "kvport/size.h"

namespace kvport::bench {
namespace {

// "850us", "1.25ms", "2.1s"; "-" for an empty histogram.
std::string Duration(const LatencyHistogram& h, double p) {
  if (h.count() == 0) return "-";
  const double ns = static_cast<double>(p >= 1 ? h.max() : h.Percentile(p));
  if (ns < 1e6) return fmt::format("{:.0f}us", ns / 1e3);
  if (ns < 1e9) return fmt::format("{:.2f}ms", ns / 1e6);
  return fmt::format("{:.2f}s", ns / 1e9);
}

std::string Quantiles(const LatencyHistogram& h) {
  return fmt::format("{:>8} {:>8} {:>8} {:>8}", Duration(h, 0.5), Duration(h, 0.99),
                     Duration(h, 0.999), Duration(h, 1));
}

void AppendSystem(const std::vector<LoadStep>& steps, std::string* out) {
  for (const LoadStep& s : steps) {
    *out += fmt::format(
        "{:<7} {:>9.1f} {:>9.1f} {:>9.1f} {:>6.2f} | {} | {} | {} | {:>8} {:>8} | {:>6} {:>5} "
        "{:>6}{}\n",
        s.system, s.offered, s.step_seconds > 0 ? s.intended() / s.step_seconds : 0, s.achieved(),
        s.gb_per_second(), Quantiles(s.latency.sequence), Quantiles(s.latency.probe),
        Quantiles(s.latency.get), Duration(s.latency.put, 0.5), Duration(s.latency.put, 0.99),
        s.misses, s.wrong, s.failed, s.saturated() ? "  saturated" : "");
    if (!s.error.empty()) *out += fmt::format("        first failure: {}\n", s.error);
  }
}

double Ratio(const LatencyHistogram& num, const LatencyHistogram& den, double p) {
  if (num.count() == 0 || den.count() == 0 || den.Percentile(p) == 0) return 0;
  return static_cast<double>(num.Percentile(p)) / static_cast<double>(den.Percentile(p));
}

}  // namespace

std::string FormatLoadText(const LoadReport& report) {
  const LoadOptions& o = report.options;
  std::string out = fmt::format(
      "kvport load: {} connections (a thread each), {} arrivals, {} s per step; {} pages of {} "
      "({} prompts of {} pages, zipf {}); mix lmcache {} / hicache {} (probe {}) / write {} "
      "(batch {}), gets of at most {} pages\n",
      o.connections, ArrivalsName(o.arrivals), o.seconds, o.objects, FormatSize(o.page_bytes),
      o.prompts(), o.prompt_pages, o.zipf, o.lmcache_weight, o.hicache_weight, o.probe_pages,
      o.write_weight, o.write_batch, o.get_batch);
  out += fmt::format("kvport: {}\n", report.node);
  if (report.cpus.split) {
    out += fmt::format("servers on CPUs {}, load generator on CPUs {}\n",
                       FormatCpuList(report.cpus.servers), FormatCpuList(report.cpus.clients));
  }
  out +=
      "Latency from each sequence's intended start (coordinated omission corrected); rates in "
      "sequences/s (arrived: the starts the arrivals asked for, which vary around the offered "
      "rate).\n";
  out += fmt::format(
      "{:<7} {:>9} {:>9} {:>9} {:>6} | {:^35} | {:^35} | {:^35} | {:^17} | {:>6} {:>5} {:>6}\n", "",
      "offered", "arrived", "achieved", "GB/s", "sequence p50 p99 p99.9 max",
      "probe p50 p99 p99.9 max", "get p50 p99 p99.9 max", "put p50 p99", "misses", "wrong",
      "failed");
  AppendSystem(report.kvport, &out);
  AppendSystem(report.redis, &out);
  if (!report.redis_skipped.empty())
    out += fmt::format("redis: skipped: {}\n", report.redis_skipped);

  // Ratios at the offered rates both systems ran (redis / kvport: above 1, kvport is faster).
  std::map<double, const LoadStep*> redis_at;
  for (const LoadStep& s : report.redis)
    redis_at[s.offered] = &s;
  bool header = false;
  for (const LoadStep& k : report.kvport) {
    const auto it = redis_at.find(k.offered);
    if (it == redis_at.end()) continue;
    const LoadStep& r = *it->second;
    if (!header) {
      out += "redis / kvport at the same offered rate (above 1: kvport is faster):\n";
      out += fmt::format("{:>9} {:>9} {:>10} {:>10} {:>10} {:>10}\n", "offered", "achieved",
                         "seq p50", "seq p99", "probe p99", "get p99");
      header = true;
    }
    out += fmt::format("{:>9.1f} {:>9.2f} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f}\n", k.offered,
                       k.achieved() > 0 ? r.achieved() / k.achieved() : 0,
                       Ratio(r.latency.sequence, k.latency.sequence, 0.5),
                       Ratio(r.latency.sequence, k.latency.sequence, 0.99),
                       Ratio(r.latency.probe, k.latency.probe, 0.99),
                       Ratio(r.latency.get, k.latency.get, 0.99));
  }
  return out;
}

std::string FormatLoadCsv(const LoadReport& report) {
  std::string out =
      "system,offered_per_s,achieved_per_s,gb_per_s,saturated,sequences,unstarted,pages_read,"
      "misses,wrong,failed";
  for (const char* h : {"sequence", "probe", "meta", "get", "put"})
    out += fmt::format(",{0}_count,{0}_p50_us,{0}_p99_us,{0}_p999_us,{0}_max_us", h);
  out += "\n";
  auto us = [](const LatencyHistogram& h, double p) {
    return (p >= 1 ? h.max() : h.Percentile(p)) / 1e3;
  };
  for (const std::vector<LoadStep>* steps : {&report.kvport, &report.redis}) {
    for (const LoadStep& s : *steps) {
      out += fmt::format("{},{:.2f},{:.2f},{:.4f},{},{},{},{},{},{},{}", s.system, s.offered,
                         s.achieved(), s.gb_per_second(), s.saturated() ? 1 : 0, s.sequences,
                         s.unstarted, s.pages_read, s.misses, s.wrong, s.failed);
      for (const LatencyHistogram* h : {&s.latency.sequence, &s.latency.probe, &s.latency.meta,
                                        &s.latency.get, &s.latency.put}) {
        out += fmt::format(",{},{:.1f},{:.1f},{:.1f},{:.1f}", h->count(), us(*h, 0.5), us(*h, 0.99),
                           us(*h, 0.999), us(*h, 1));
      }
      out += "\n";
    }
  }
  return out;
}

Status PlotLoadCurve(const std::string& csv_path, const std::string& png_path,
                     const std::string& gnuplot) {
  // The CSV's columns: 3 achieved_per_s, 13 sequence_p50_us, 14 sequence_p99_us,
  // 19 probe_p99_us. A colour per system, a dash pattern per quantity.
  const std::string script = fmt::format(
      "set datafile separator ','\n"
      "set terminal png size 1000,640\n"
      "set output '{1}'\n"
      "set title 'kvport load: latency from the intended start against throughput (open "
      "loop)'\n"
      "set xlabel 'achieved sequences per second'\n"
      "set ylabel 'latency (ms)'\n"
      "set logscale y\n"
      "set key outside right top\n"
      "set grid\n"
      "sel(s, c) = (strcol(1) eq s) ? column(c) / 1000.0 : NaN\n"
      "plot '{0}' every ::1 using 3:(sel('kvport', 14)) with linespoints lc rgb '#1f77b4' dt 1 "
      "pt 7 title 'kvport sequence p99', \\\n"
      "     '{0}' every ::1 using 3:(sel('kvport', 19)) with linespoints lc rgb '#1f77b4' dt 2 "
      "pt 6 title 'kvport probe p99', \\\n"
      "     '{0}' every ::1 using 3:(sel('kvport', 13)) with linespoints lc rgb '#1f77b4' dt 3 "
      "pt 1 title 'kvport sequence p50', \\\n"
      "     '{0}' every ::1 using 3:(sel('redis', 14)) with linespoints lc rgb '#d62728' dt 1 "
      "pt 7 title 'redis sequence p99', \\\n"
      "     '{0}' every ::1 using 3:(sel('redis', 19)) with linespoints lc rgb '#d62728' dt 2 "
      "pt 6 title 'redis probe p99', \\\n"
      "     '{0}' every ::1 using 3:(sel('redis', 13)) with linespoints lc rgb '#d62728' dt 3 "
      "pt 1 title 'redis sequence p50'\n",
      csv_path, png_path);
  const std::string command = gnuplot + " 2>&1";
  FILE* pipe = popen(command.c_str(), "w");
  if (pipe == nullptr) return Status::Internal("cannot run " + gnuplot);
  const bool written = std::fwrite(script.data(), 1, script.size(), pipe) == script.size();
  const int rc = pclose(pipe);
  if (rc != 0 && WIFEXITED(rc) && WEXITSTATUS(rc) == 127) {
    return Status::NotFound(gnuplot +
                            " not found: install it (scripts/bootstrap gnuplot-nox) for --plot");
  }
  if (!written || rc != 0) {
    return Status::Internal(fmt::format("{} failed (status {}) drawing {}", gnuplot, rc, png_path));
  }
  return Status::Ok();
}

}  // namespace kvport::bench
