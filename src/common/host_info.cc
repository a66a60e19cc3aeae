// SPDX-License-Identifier: Apache-2.0
#include "kvport/host_info.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>

namespace kvport {

uint64_t HostPhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

std::string HostArchitecture() {
  struct utsname u {};
  if (uname(&u) != 0) return "unknown";
  return u.machine;
}

unsigned HostCpuCount() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<unsigned>(n) : 1u;
}

std::string HostBootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

uint64_t ProcessResidentBytes(int pid) {
  const std::string path =
      pid == 0 ? std::string("/proc/self/statm") : "/proc/" + std::to_string(pid) + "/statm";
  std::ifstream in(path);
  uint64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  const long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? resident * static_cast<uint64_t>(page) : 0;
}

}  // namespace kvport
