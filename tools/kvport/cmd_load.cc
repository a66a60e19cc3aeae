// SPDX-License-Identifier: Apache-2.0
// `kvport load`: an open-loop load shaped like the engines' (bench/load_run.h) against a node
// and redis-server in one run, stepping the offered rate up to saturation: what an engine feels
// (the tail latency of a probe or a page read at a given load), where `kvport bench` measures
// peak throughput in a closed loop. A subcommand of its own rather than a mode of `kvport bench`:
// its options (rates, arrivals, the engines' mix, popularity) share little with the bench's
// phases, and each help then lists only what applies.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

#include "bench/load_report.h"
#include "bench/load_run.h"
#include "bench/model_shape.h"
#include "commands.h"
#include "kvport/size.h"

namespace kvport::cli {
namespace {

struct LoadFlags {
  bench::LoadOptions options;
  std::string arrivals = "poisson";
  std::string rates;
  std::string page_size = "64KiB";
  std::optional<int> layers, kv_heads, head_dim, tokens_per_page;
  std::optional<std::string> dtype;
  std::string mix = "lmcache=0.45,hicache=0.45,write=0.1";
  std::optional<std::string> capacity;
  std::string csv;
  std::string plot;
  std::string gnuplot = "gnuplot";
};

// "a=1,b=2" into the mix weights. InvalidArgument naming what is wrong.
Status ParseMix(std::string_view text, bench::LoadOptions* o) {
  o->lmcache_weight = o->hicache_weight = o->write_weight = 0;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t eq = item.find('=');
    const std::string name(item.substr(0, eq));
    double weight = -1;
    try {
      size_t used = 0;
      const std::string value(eq == std::string_view::npos ? "" : item.substr(eq + 1));
      weight = std::stod(value, &used);
      if (used != value.size()) weight = -1;
    } catch (const std::exception&) {
      weight = -1;
    }
    double* target = name == "lmcache"   ? &o->lmcache_weight
                     : name == "hicache" ? &o->hicache_weight
                     : name == "write"   ? &o->write_weight
                                         : nullptr;
    if (target == nullptr || !(weight >= 0)) {
      return Status::InvalidArgument(
          "--mix: expected lmcache=W,hicache=W,write=W with weights "
          "of at least 0, got '" +
          std::string(item) + "'");
    }
    *target = weight;
  }
  return Status::Ok();
}

Status ParseRates(std::string_view text, std::vector<double>* rates) {
  rates->clear();
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string item(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    try {
      size_t used = 0;
      const double r = std::stod(item, &used);
      if (used == item.size() && r > 0) {
        rates->push_back(r);
        continue;
      }
    } catch (const std::exception&) {
    }
    return Status::InvalidArgument("--rates: expected sequences per second above 0, got '" + item +
                                   "'");
  }
  return Status::Ok();
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Status::IoError("cannot write " + path);
  return Status::Ok();
}

int RunLoadCommand(LoadFlags& f) {
  bench::LoadOptions& o = f.options;
  if (f.arrivals == "fixed") {
    o.arrivals = bench::Arrivals::kFixed;
  } else if (f.arrivals != "poisson") {
    return Fail(Status::InvalidArgument("--arrivals: fixed or poisson, got '" + f.arrivals + "'"));
  }
  if (!f.rates.empty()) {
    Status s = ParseRates(f.rates, &o.rates);
    if (!s.ok()) return Fail(s);
  }
  Result<uint64_t> page = ParseSize(f.page_size, SizeUnit::kBytes);
  if (!page.ok()) return Fail(page.status().WithContext("--page-size"));
  o.page_bytes = *page;
  if (f.layers || f.kv_heads || f.head_dim || f.tokens_per_page || f.dtype) {
    bench::ModelShape shape;  // Llama-3-8B, for the parts not given
    shape.layers = f.layers.value_or(shape.layers);
    shape.kv_heads = f.kv_heads.value_or(shape.kv_heads);
    shape.head_dim = f.head_dim.value_or(shape.head_dim);
    shape.tokens_per_chunk = f.tokens_per_page.value_or(64);  // SGLang HiCache's page
    shape.dtype = f.dtype.value_or(shape.dtype);
    Result<uint64_t> bytes = bench::ChunkBytes(shape);
    if (!bytes.ok()) return Fail(bytes.status());
    o.page_bytes = *bytes;
  }
  Status mix = ParseMix(f.mix, &o);
  if (!mix.ok()) return Fail(mix);
  if (f.capacity) {
    Result<uint64_t> capacity = ParseSize(*f.capacity, SizeUnit::kBytes);
    if (!capacity.ok()) return Fail(capacity.status().WithContext("--capacity"));
    o.node_capacity = *capacity;
  }

  const bool tty = isatty(STDERR_FILENO) != 0;
  size_t last_step = SIZE_MAX;
  std::string last_system;
  auto progress = [&](std::string_view system, size_t step, size_t steps, double offered,
                      const bench::LoadProgress& p) {
    const bool new_step = step != last_step || system != last_system;
    last_step = step;
    last_system = std::string(system);
    if (!tty && !new_step) return;
    std::fprintf(stderr,
                 "%sload: %.*s step %zu/%zu at %.1f/s: %.1f s, %llu sequences, %llu failed%s",
                 tty ? "\r\033[K" : "", static_cast<int>(system.size()), system.data(), step + 1,
                 steps, offered, p.elapsed, static_cast<unsigned long long>(p.sequences),
                 static_cast<unsigned long long>(p.failed), tty ? "" : "\n");
    std::fflush(stderr);
  };
  Result<bench::LoadReport> report = bench::RunLoad(
      o,
      [tty](std::string_view note) {
        std::fprintf(stderr, "%sload: %.*s\n", tty ? "\r\033[K" : "", static_cast<int>(note.size()),
                     note.data());
      },
      progress);
  if (tty) std::fputs("\r\033[K", stderr);
  if (!report.ok()) return Fail(report.status());
  std::fputs(bench::FormatLoadText(*report).c_str(), stdout);
  std::fflush(stdout);
  if (!f.plot.empty() && f.csv.empty()) f.csv = f.plot + ".csv";
  if (!f.csv.empty()) {
    Status s = WriteFile(f.csv, bench::FormatLoadCsv(*report));
    if (!s.ok()) return Fail(s);
  }
  if (!f.plot.empty()) {
    Status s = bench::PlotLoadCurve(f.csv, f.plot, f.gnuplot);
    if (!s.ok()) return Fail(s);
  }
  if (!report->AllCorrect()) {
    return Fail(
        Status::Internal("some answers were wrong or failed (the wrong and failed "
                         "columns)"));
  }
  return 0;
}

}  // namespace

void AddLoadCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<LoadFlags>();
  bench::LoadOptions& o = flags->options;
  CLI::App* cmd = app.add_subcommand(
      "load",
      "Open-loop load shaped like the engines' (LMCache's prefix probe, metadata and data gets; "
      "SGLang HiCache's batch_exists then batch_get of the leading hits; writes of new pages), "
      "Zipf-popular prompts, at offered rates stepped up to saturation, against a node and "
      "redis-server in one run; latency from each sequence's intended start (coordinated "
      "omission corrected) as p50/p99/p99.9/max (docs/performance.md, \"What an engine feels "
      "under an open-loop load\")");
  cmd->add_option("--url", o.url,
                  "An existing node (HOST:PORT, eic://HOST:PORT) (default: an embedded node in "
                  "this process)");
  cmd->add_option("--connections", o.connections,
                  "Engine workers: connections, a thread and a client each (1-1024), each with "
                  "buffers of --get-batch + --write-batch pages")
      ->capture_default_str();
  cmd->add_option("--arrivals", flags->arrivals,
                  "poisson (exponential gaps) or fixed (evenly spaced) arrivals of sequences")
      ->capture_default_str();
  cmd->add_option("--rate", o.rate, "Offered sequences per second of the first step")
      ->capture_default_str();
  cmd->add_option(
         "--steps", o.steps,
         "Steps of the curve, each --step-factor times the last rate; a system's curve "
         "ends at its first saturated step (it fell behind: over 1% of the intended starts "
         "not reached, or under 90% of the intended rate done)")
      ->capture_default_str();
  cmd->add_option("--step-factor", o.step_factor, "Rate of a step over the last one's")
      ->capture_default_str();
  cmd->add_option("--rates", flags->rates,
                  "The offered rates of the steps instead, a list (\"100,200,400\")");
  cmd->add_option("--seconds", o.seconds, "Per step and system")->capture_default_str();
  cmd->add_option("--objects", o.objects,
                  "Pages in the key space (prompts of --prompt-pages); the prefill writes a "
                  "quarter to all of each prompt, and writes cycle through a quarter as many new "
                  "ones")
      ->capture_default_str();
  cmd->add_option("--page-size", flags->page_size, "Bytes per page, with units")
      ->capture_default_str();
  cmd->add_option("--layers", flags->layers,
                  "Page size from a model shape instead: layers (the shape's other parts default "
                  "to Llama-3-8B, 64 tokens per page)");
  cmd->add_option("--kv-heads", flags->kv_heads, "Model shape: KV heads (default 8)");
  cmd->add_option("--head-dim", flags->head_dim, "Model shape: head dim (default 128)");
  cmd->add_option("--dtype", flags->dtype, "Model shape: bf16, fp16, fp32, fp8 (default bf16)");
  cmd->add_option("--tokens-per-page", flags->tokens_per_page,
                  "Model shape: tokens per page (default 64)");
  cmd->add_option("--prompt-pages", o.prompt_pages,
                  "Pages per prompt: what LMCache's prefix probe asks for")
      ->capture_default_str();
  cmd->add_option("--probe-pages", o.probe_pages, "Pages per SGLang HiCache batch_exists")
      ->capture_default_str();
  cmd->add_option("--get-batch", o.get_batch, "Pages per get call at most")->capture_default_str();
  cmd->add_option("--write-batch", o.write_batch, "New pages per write sequence")
      ->capture_default_str();
  cmd->add_option("--zipf", o.zipf, "Zipf exponent of the prompts' popularity (0: uniform)")
      ->capture_default_str();
  cmd->add_option("--mix", flags->mix, "Weights of the sequences")->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the random streams")->capture_default_str();
  cmd->add_option("--ns", o.ns, "Namespace of the keys on kvport")->capture_default_str();
  cmd->add_option("--capacity", flags->capacity,
                  "Embedded node capacity (default: twice the bytes of every key)");
  cmd->add_option("--node-threads", o.node_threads,
                  "Embedded node I/O threads (0: one per server CPU)")
      ->capture_default_str();
  cmd->add_flag(
      "--no-redis", [o = &o](int64_t) { o->redis = false; },
      "Skip redis-server (default: the same load against it, MGET/MSET and pipelined "
      "EXISTS per batch)");
  cmd->add_option("--redis-server", o.redis_server,
                  "redis-server executable (a path, or a name looked up in PATH)")
      ->capture_default_str();
  cmd->add_option("--csv", flags->csv, "Write the curve as CSV to this file");
  cmd->add_option("--plot", flags->plot,
                  "Draw the curve (p99 against achieved rate) as a PNG to this file with gnuplot "
                  "(the CSV beside it, FILE.csv, unless --csv is given)");
  cmd->add_option("--gnuplot", flags->gnuplot, "gnuplot executable")->capture_default_str();
  cmd->callback([flags, exit_code] { *exit_code = RunLoadCommand(*flags); });
}

}  // namespace kvport::cli
