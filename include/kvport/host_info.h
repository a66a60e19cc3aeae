// Facts about the host this process runs on.
#pragma once

#include <cstdint>
#include <string>

namespace kvport {

// Physical memory of this host in bytes (sysconf _SC_PHYS_PAGES * _SC_PAGESIZE); 0 if unknown.
uint64_t HostPhysicalMemoryBytes();

// The CPU architecture this binary runs on, as uname reports it ("x86_64", "aarch64").
std::string HostArchitecture();

// Number of online CPUs, at least 1.
unsigned HostCpuCount();

}  // namespace kvport
