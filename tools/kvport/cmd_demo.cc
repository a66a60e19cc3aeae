// SPDX-License-Identifier: Apache-2.0
// `kvport demo`: an embedded node driven through the eic:// connector and a CacheEngine by an
// LLM-serving-shaped workload (conversations sharing system prompts, growing turn by turn),
// with every retrieved chunk checked byte for byte. What `make run` runs.
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "commands.h"
#include "demo/demo_report.h"
#include "demo/demo_run.h"
#include "kvport/size.h"

namespace kvport::cli {
namespace {

struct DemoFlags {
  demo::DemoOptions options;
  std::string capacity = "512MiB";
  std::string local_cpu = "0";
  bool quiet = false;
};

// A progress line on stderr: rewritten in place on a terminal; otherwise (a log, a pipe) a
// plain line at each quarter, so logs stay readable.
class ProgressLine {
 public:
  ProgressLine() : tty_(::isatty(STDERR_FILENO) == 1) {}

  void Update(const demo::DemoProgress& p) {
    if (tty_) {
      if (p.done != p.total && p.seconds - last_seconds_ < 0.1) return;
      last_seconds_ = p.seconds;
      std::fprintf(stderr, "\r%s\x1b[K", demo::FormatProgress(p).c_str());
      if (p.done == p.total) std::fputc('\n', stderr);
    } else if (p.done * 4 / p.total != last_quarter_) {
      last_quarter_ = p.done * 4 / p.total;
      std::fprintf(stderr, "%s\n", demo::FormatProgress(p).c_str());
    }
    std::fflush(stderr);
  }

 private:
  bool tty_;
  double last_seconds_ = -1;
  int last_quarter_ = 0;
};

int RunDemoCommand(DemoFlags& f) {
  demo::DemoOptions& o = f.options;
  Result<uint64_t> capacity = ParseSize(f.capacity, SizeUnit::kBytes);
  if (!capacity.ok()) return Fail(capacity.status().WithContext("--capacity"));
  o.capacity_bytes = *capacity;
  Result<uint64_t> local = ParseSize(f.local_cpu, SizeUnit::kBytes);
  if (!local.ok()) return Fail(local.status().WithContext("--local-cpu"));
  o.local_cpu_bytes = *local;

  // The connector hands every retrieved chunk over in a freshly allocated buffer. glibc serves
  // multi-MiB allocations with mmap and returns them to the kernel on free, so each chunk read
  // would fault in new pages, which costs ~25 us per 4 KiB page on the VMs this runs on (about
  // 0.15 GB/s: slower than the network path it measures). Keeping freed memory in the heap
  // lets buffers be reused. Process-wide, which is why it is here and not in a library.
#ifdef M_MMAP_THRESHOLD
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  ProgressLine line;
  Result<demo::DemoReport> report = demo::RunDemo(o, [&](const demo::DemoProgress& p) {
    if (!f.quiet) line.Update(p);
  });
  if (!report.ok()) return Fail(report.status());
  std::fputs(demo::FormatDemoReport(*report, o).c_str(), stdout);
  std::fflush(stdout);
  return report->verify_failures() == 0 ? 0 : 1;
}

}  // namespace

void AddDemoCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<DemoFlags>();
  demo::DemoOptions& o = flags->options;
  demo::WorkloadOptions& w = o.workload;
  CLI::App* cmd = app.add_subcommand(
      "demo",
      "Serve an LLM-shaped workload from an embedded node through eic:// and a CacheEngine, "
      "verifying every chunk");
  cmd->footer(
      "The default model shape is Llama-3-8B's KV layout (8 KV heads, head dim 128, bf16, "
      "256-token chunks) with 4 of its 32 layers: 4 MiB chunks instead of 32 MiB, so the "
      "default run (200 requests, about 5 GiB moved) finishes well under a minute on 2 cores. "
      "--layers 32 gives the full model's 32 MiB chunks (then use fewer --requests and a "
      "larger --capacity).");
  cmd->add_option("--url", o.url,
                  "Run against an existing node, eic://HOST:PORT[/NS] (default: embedded)");
  cmd->add_option("--requests", o.requests, "Prompts to serve")->capture_default_str();
  cmd->add_option("--seed", w.seed, "Workload seed (same seed, same prompts)")
      ->capture_default_str();
  cmd->add_option("--model", o.model_name, "Model name in the cache keys")->capture_default_str();
  cmd->add_option("--layers", o.shape.layers, "Model shape: layers")->capture_default_str();
  cmd->add_option("--kv-heads", o.shape.kv_heads, "Model shape: KV heads")->capture_default_str();
  cmd->add_option("--head-dim", o.shape.head_dim, "Model shape: head dim")->capture_default_str();
  cmd->add_option("--dtype", o.shape.dtype, "Model shape: bf16, fp16, fp32, fp8")
      ->capture_default_str();
  cmd->add_option("--chunk-tokens", o.shape.tokens_per_chunk, "Tokens per chunk")
      ->capture_default_str();
  cmd->add_option("--capacity", flags->capacity,
                  "Embedded node capacity (smaller than what the run stores: LRU evicts)")
      ->capture_default_str();
  cmd->add_option("--unix-socket", o.unix_socket,
                  "Embedded node's Unix socket, through which the demo maps its arena (shared "
                  "memory): auto, an absolute path, or \"\" for TCP only")
      ->capture_default_str();
  cmd->add_option("--local-cpu", flags->local_cpu,
                  "CacheEngine local CPU tier in front of the node (0: none)")
      ->capture_default_str();
  cmd->add_option("--ns", o.ns, "Namespace of the demo's chunks")->capture_default_str();
  cmd->add_option("--system-prompts", w.system_prompts, "Shared system prompts")
      ->capture_default_str();
  cmd->add_option("--live-conversations", w.live_conversations,
                  "Conversations taking turns at any moment")
      ->capture_default_str();
  cmd->add_option("--max-turns", w.max_turns, "A conversation lasts 1..N turns")
      ->capture_default_str();
  cmd->add_flag("--quiet", flags->quiet, "No progress line");
  cmd->callback([flags, exit_code] { *exit_code = RunDemoCommand(*flags); });
}

}  // namespace kvport::cli
