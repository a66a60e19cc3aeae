// SPDX-License-Identifier: Apache-2.0
// Giving a load generator CPUs of its own: a server measured on the cores its client also runs
// on is measured against the scheduler as much as against the client (on a 2-CPU machine
// redis-benchmark, redis-server and a node's I/O threads took turns on the same cores, and a
// row moved 2x between runs). Redis's own benchmarking advice is the same: pin redis-benchmark
// to another core than the server.
#pragma once

#include <sched.h>

#include <string>
#include <vector>

#include "kvport/status.h"

namespace kvport::bench {

// The CPUs this thread may run on (sched_getaffinity), in increasing order.
Result<std::vector<int>> AllowedCpus();

struct CpuSplit {
  std::vector<int> servers;  // the servers measured: the lower part
  std::vector<int> clients;  // the load generators: the upper half (rounded down), at least one
  // False with fewer than 2 CPUs: everything runs everywhere, and `servers` and `clients` both
  // hold every CPU.
  bool split = false;
};

CpuSplit SplitCpus(const std::vector<int>& allowed);

// "0-3", "0,2,5-7".
std::string FormatCpuList(const std::vector<int>& cpus);

// Runs the calling thread on `cpus` until destroyed, then on the CPUs it had. Threads and
// processes started meanwhile (std::thread, posix_spawn) inherit `cpus`: that is how a server
// or client started inside the scope stays on its side.
class ScopedCpuAffinity {
 public:
  explicit ScopedCpuAffinity(const std::vector<int>& cpus);
  ~ScopedCpuAffinity();
  ScopedCpuAffinity(const ScopedCpuAffinity&) = delete;
  ScopedCpuAffinity& operator=(const ScopedCpuAffinity&) = delete;

  // Why the affinity could not be set (it is then unchanged); OK when it was.
  const Status& status() const { return status_; }

 private:
  cpu_set_t saved_;
  bool restore_ = false;
  Status status_;
};

}  // namespace kvport::bench
