// SPDX-License-Identifier: Apache-2.0
// What `kvport doctor` reports about this host, built here so that it can be tested without
// running the CLI (tools/kvport/cmd_doctor.cc only prints it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvport/device.h"
#include "kvport/ucx.h"

namespace kvport {

struct TransportReport {
  std::string name;        // "tcp", "shm", "rdma", "gdr"
  bool available = false;  // usable by a client of this build on this host
  std::string detail;      // why not, or what it is
};

struct TransTypeReport {
  int value = 0;        // eic_trans_type
  std::string name;     // "TCP"
  bool works = false;   // a client configured with it initializes
  std::string outcome;  // the transport it resolves to, or the error message
};

struct DoctorReport {
  std::string architecture;
  unsigned cpu_count = 0;
  uint64_t memory_bytes = 0;
  RuntimeOptions options;             // where the runtimes were looked for
  std::vector<RuntimeInfo> runtimes;  // host, cuda, ascend
  UcxInfo ucx;
  std::vector<std::string> rdma_devices;
  std::vector<TransportReport> transports;   // tcp, shm, rdma, gdr
  std::vector<TransTypeReport> trans_types;  // 0..3
  // The eic_trans_type the configuration asks for and where that came from ("default",
  // "file:PATH", "env:VAR"); -1 when the caller did not say.
  int configured_trans_type = -1;
  std::string configured_trans_type_origin;
};

// Builds the report from the given runtimes (tests pass fakes; the CLI the process-wide ones)
// and host facts (kvport/host_info.h).
DoctorReport BuildDoctorReport(const RuntimeOptions& options, const DeviceRuntime& host,
                               const DeviceRuntime& cuda, const DeviceRuntime& ascend,
                               const UcxRuntime& ucx, std::vector<std::string> rdma_devices);

// Human-readable, one fact per line.
std::string FormatDoctorText(const DoctorReport& report);
// One JSON object (see docs/portability.md for the fields).
std::string FormatDoctorJson(const DoctorReport& report);

}  // namespace kvport
