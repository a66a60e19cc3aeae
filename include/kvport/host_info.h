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

}  // namespace kvport
