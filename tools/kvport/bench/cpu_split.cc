// SPDX-License-Identifier: Apache-2.0
#include "bench/cpu_split.h"

#include <fmt/core.h>

#include <cerrno>
#include <cstring>

namespace kvport::bench {

Result<std::vector<int>> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) {
    return Status::Internal(fmt::format("sched_getaffinity: {}", std::strerror(errno)));
  }
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

CpuSplit SplitCpus(const std::vector<int>& allowed) {
  CpuSplit split;
  if (allowed.size() < 2) {
    split.servers = split.clients = allowed;
    return split;
  }
  const size_t clients = allowed.size() / 2;
  split.servers.assign(allowed.begin(), allowed.end() - static_cast<ptrdiff_t>(clients));
  split.clients.assign(allowed.end() - static_cast<ptrdiff_t>(clients), allowed.end());
  split.split = true;
  return split;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1)
      ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

ScopedCpuAffinity::ScopedCpuAffinity(const std::vector<int>& cpus) {
  CPU_ZERO(&saved_);
  if (::sched_getaffinity(0, sizeof(saved_), &saved_) != 0) {
    status_ = Status::Internal(fmt::format("sched_getaffinity: {}", std::strerror(errno)));
    return;
  }
  cpu_set_t wanted;
  CPU_ZERO(&wanted);
  for (int cpu : cpus) {
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &wanted);
  }
  if (::sched_setaffinity(0, sizeof(wanted), &wanted) != 0) {
    status_ = Status::Internal(
        fmt::format("sched_setaffinity to CPUs {}: {}", FormatCpuList(cpus), std::strerror(errno)));
    return;
  }
  restore_ = true;
}

ScopedCpuAffinity::~ScopedCpuAffinity() {
  if (restore_) ::sched_setaffinity(0, sizeof(saved_), &saved_);
}

}  // namespace kvport::bench
