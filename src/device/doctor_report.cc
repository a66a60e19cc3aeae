// SPDX-License-Identifier: Apache-2.0
#include "device/doctor_report.h"

#include <fmt/core.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "device/dynamic_library.h"
#include "kvport/host_info.h"
#include "kvport/transport.h"

namespace kvport {
namespace {

std::string MemoryText(uint64_t bytes) {
  if (bytes == 0) return "unknown";
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
}

std::string OrDefault(const std::string& s, std::string_view fallback) {
  return s.empty() ? std::string(fallback) : s;
}

// "libucp.so.0 (/usr/lib/.../libucp.so.0.0.0)", or the name alone when the path says no more.
std::string LibraryText(const std::string& name, const std::string& path) {
  return path.empty() || path == name ? name : name + " (" + path + ")";
}

// "tcp, posix, sysv, cma, self": each transport once, in UCT's order.
std::string UcxTransportText(const UcxInfo& ucx) {
  const std::vector<std::string> names = UcxTransportNames(ucx);
  return names.empty() ? "no transports" : device_internal::JoinNames(names);
}

// Each transport of a UCX that has no RDMA transport, once, without "self" (UCX's loopback
// within one process, which never reaches a node): "tcp, sysv, posix, cma". Empty when UCX has
// an RDMA transport or no transport at all.
std::string UcxSoftwareOnlyText(const UcxInfo& ucx) {
  if (UcxHasRdma(ucx)) return "";
  std::vector<std::string> names = UcxTransportNames(ucx);
  std::erase(names, "self");
  return device_internal::JoinNames(names);
}

}  // namespace

DoctorReport BuildDoctorReport(const RuntimeOptions& options, const DeviceRuntime& host,
                               const DeviceRuntime& cuda, const DeviceRuntime& ascend,
                               const UcxRuntime& ucx, std::vector<std::string> rdma_devices) {
  DoctorReport r;
  r.architecture = HostArchitecture();
  r.cpu_count = HostCpuCount();
  r.memory_bytes = HostPhysicalMemoryBytes();
  r.options = options;
  r.runtimes = {host.info(), cuda.info(), ascend.info()};
  r.ucx = ucx.info();
  r.rdma_devices = std::move(rdma_devices);

  TransportEnvironment env;
  env.cuda = &cuda;
  env.ucx = &ucx;
  env.rdma_devices = r.rdma_devices;

  const std::string rdma_seen = r.rdma_devices.empty()
                                    ? "no RDMA devices under /sys/class/infiniband"
                                    : "RDMA devices: " + device_internal::JoinNames(r.rdma_devices);
  r.transports.push_back({"tcp", true, "built in"});
  r.transports.push_back(
      {"shm", true,
       "built in: to a node on this host that offers it (its unix_socket), chosen by "
       "eic_trans_type 0, 2 and 3"});
  if (ucx.usable()) {
    r.transports.push_back(
        {"rdma", true,
         fmt::format("UCX {} ({}){}, node-checked UCX messages with a node that offers UCX (kvport "
                     "serve --ucx); {}",
                     r.ucx.version, UcxTransportText(r.ucx),
                     UcxHasRdma(r.ucx) ? ""
                                       : ": no RDMA hardware transport, UCX over TCP or "
                                         "shared memory",
                     rdma_seen)});
  } else {
    r.transports.push_back(
        {"rdma", false,
         fmt::format("needs a usable UCX: UCX {}; {}", RuntimeStateName(ucx.state()), rdma_seen)});
  }
  Result<TransportChoice> gdr = ResolveTransport(3, env);
  r.transports.push_back({"gdr", gdr.ok(), gdr.ok() ? gdr->reason : gdr.status().message()});

  for (int value = 0; value <= 3; ++value) {
    TransTypeReport t;
    t.value = value;
    t.name = std::string(TransportKindName(static_cast<TransportKind>(value)));
    Result<TransportChoice> choice = ResolveTransport(value, env);
    t.works = choice.ok();
    t.outcome = choice.ok() ? choice->reason : choice.status().message();
    r.trans_types.push_back(std::move(t));
  }
  return r;
}

std::string FormatDoctorText(const DoctorReport& r) {
  std::string out;
  auto line = [&out](std::string_view text) {
    out += text;
    out += '\n';
  };
  line("host");
  line(fmt::format("  architecture  {}", r.architecture));
  line(fmt::format("  cpus          {}", r.cpu_count));
  line(fmt::format("  memory        {}", MemoryText(r.memory_bytes)));
  line("runtimes");
  line(fmt::format("  looked for    cuda_runtime_library={}, ascend_runtime_library={}",
                   OrDefault(r.options.cuda_runtime_library, "(standard names)"),
                   OrDefault(r.options.ascend_runtime_library, "(standard names)")));
  for (const RuntimeInfo& rt : r.runtimes) {
    line(fmt::format("  {:<7} {}", RuntimeKindName(rt.kind), RuntimeStateName(rt.state)));
    if (rt.kind == RuntimeKind::kHost) continue;
    if (!rt.library.empty()) {
      line(fmt::format("    library   {}", LibraryText(rt.library, rt.library_path)));
    }
    if (!rt.version.empty() || !rt.driver_version.empty()) {
      std::string v = OrDefault(rt.version, "unknown");
      if (!rt.driver_version.empty()) v += ", driver " + rt.driver_version;
      line(fmt::format("    version   {}", v));
    }
    if (rt.state == RuntimeState::kAvailable) {
      line(fmt::format("    devices   {}", rt.device_count));
    } else {
      line(fmt::format("    reason    {}", rt.reason));
    }
  }
  line(fmt::format("ucx       {}", RuntimeStateName(r.ucx.state)));
  line(fmt::format("  looked for    ucx_library={}",
                   OrDefault(r.options.ucx_library, "(libucp.so.0)")));
  if (!r.ucx.library.empty()) {
    line(fmt::format("  library       {}", LibraryText(r.ucx.library, r.ucx.library_path)));
  }
  if (!r.ucx.version.empty())
    line(fmt::format("  version       {} (this build uses the {} API)", r.ucx.version,
                     UcxBuildApiVersion()));
  if (r.ucx.state == RuntimeState::kAvailable) {
    line(fmt::format("  memory types  {}", device_internal::JoinNames(r.ucx.memory_types)));
    std::string resources;
    for (const UcxResource& res : r.ucx.resources) {
      if (!resources.empty()) resources += ", ";
      resources += res.transport + "/" + res.device;
    }
    line(fmt::format("  resources     {}", OrDefault(resources, "none")));
    // Said plainly, since a node with `ucx: true` starts either way: without an RDMA transport
    // UCX moves bytes over its software transports, no faster than kvport's own TCP, and a node
    // serves them as a node-checked path (docs/operations.md, "Running a node with RDMA").
    if (const std::string software = UcxSoftwareOnlyText(r.ucx); !software.empty()) {
      line(fmt::format(
          "  note          UCX has only software transports here ({}): a node's UCX path is "
          "node-checked and no faster than TCP",
          software));
      if (!r.rdma_devices.empty()) {
        line(fmt::format(
            "  note          RDMA devices {} are on this host but UCX reaches none of them: is "
            "/dev/infiniband withheld from this process? (docs/operations.md, \"Running a node "
            "with RDMA\")",
            device_internal::JoinNames(r.rdma_devices)));
      }
    }
  } else {
    line(fmt::format("  reason        {}", r.ucx.reason));
  }
  line("transports");
  for (const TransportReport& t : r.transports) {
    line(
        fmt::format("  {:<5} {}: {}", t.name, t.available ? "available" : "unavailable", t.detail));
  }
  line("eic_trans_type");
  for (const TransTypeReport& t : r.trans_types) {
    line(
        fmt::format("  {} {:<15} {}: {}", t.value, t.name, t.works ? "works" : "fails", t.outcome));
  }
  for (const TransTypeReport& t : r.trans_types) {
    if (t.value != r.configured_trans_type) continue;
    line(fmt::format("configured      eic_trans_type {} (from {}) {}", t.value,
                     OrDefault(r.configured_trans_type_origin, "an unknown source"),
                     t.works ? "works here" : "fails here"));
  }
  return out;
}

std::string FormatDoctorJson(const DoctorReport& r) {
  using Json = nlohmann::ordered_json;
  Json runtimes = Json::array();
  for (const RuntimeInfo& rt : r.runtimes) {
    runtimes.push_back({{"name", RuntimeKindName(rt.kind)},
                        {"state", RuntimeStateName(rt.state)},
                        {"library", rt.library},
                        {"library_path", rt.library_path},
                        {"version", rt.version},
                        {"driver_version", rt.driver_version},
                        {"device_count", rt.device_count},
                        {"reason", rt.reason}});
  }
  Json transports = Json::array();
  for (const TransportReport& t : r.transports) {
    transports.push_back({{"name", t.name}, {"available", t.available}, {"detail", t.detail}});
  }
  Json ucx_resources = Json::array();
  for (const UcxResource& res : r.ucx.resources) {
    ucx_resources.push_back({{"transport", res.transport},
                             {"device", res.device},
                             {"memory_domain", res.memory_domain}});
  }
  Json trans_types = Json::array();
  for (const TransTypeReport& t : r.trans_types) {
    trans_types.push_back(
        {{"value", t.value}, {"name", t.name}, {"works", t.works}, {"outcome", t.outcome}});
  }
  const Json out = {
      {"host",
       {{"architecture", r.architecture}, {"cpus", r.cpu_count}, {"memory_bytes", r.memory_bytes}}},
      {"options",
       {{"cuda_runtime_library", r.options.cuda_runtime_library},
        {"ascend_runtime_library", r.options.ascend_runtime_library},
        {"ucx_library", r.options.ucx_library}}},
      {"runtimes", std::move(runtimes)},
      {"ucx",
       {{"state", RuntimeStateName(r.ucx.state)},
        {"library", r.ucx.library},
        {"library_path", r.ucx.library_path},
        {"version", r.ucx.version},
        {"build_api", UcxBuildApiVersion()},
        {"memory_types", r.ucx.memory_types},
        {"resources", std::move(ucx_resources)},
        {"reason", r.ucx.reason}}},
      {"rdma_devices", r.rdma_devices},
      {"transports", std::move(transports)},
      {"eic_trans_types", std::move(trans_types)},
      {"configured_trans_type",
       {{"value", r.configured_trans_type}, {"origin", r.configured_trans_type_origin}}},
  };
  // Library paths and runtime messages are bytes: invalid UTF-8 becomes U+FFFD, so the output
  // is always valid JSON (docs/configuration.md, "JSON output and escaping").
  return out.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace) + "\n";
}

}  // namespace kvport
