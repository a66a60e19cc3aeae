// SPDX-License-Identifier: Apache-2.0
// Facts about the host this process runs on.
#pragma once

#include <cstdint>
#include <string>

#include "kvport/export.h"

namespace kvport {

// Physical memory of this host in bytes (sysconf _SC_PHYS_PAGES * _SC_PAGESIZE); 0 if unknown.
KVPORT_API uint64_t HostPhysicalMemoryBytes();

// The CPU architecture this binary runs on, as uname reports it ("x86_64", "aarch64").
KVPORT_API std::string HostArchitecture();

// Number of online CPUs, at least 1.
KVPORT_API unsigned HostCpuCount();

// The running kernel's boot id (/proc/sys/kernel/random/boot_id, without the newline): the same
// for every process on this host until it reboots, so a client compares it with a node's to
// know the node is on its host (docs/transports.md). Empty if unreadable.
KVPORT_API std::string HostBootId();

// The resident set size of process `pid` (0: this process) in bytes, from /proc/PID/statm: its
// anonymous, file-backed and shared-memory pages (a node's arena is shared memory); 0 when it
// cannot be read.
KVPORT_API uint64_t ProcessResidentBytes(int pid = 0);

}  // namespace kvport
