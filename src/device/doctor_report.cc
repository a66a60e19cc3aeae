#include "device/doctor_report.h"

#include <fmt/core.h>

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

}  // namespace

DoctorReport BuildDoctorReport(const RuntimeOptions& options, const DeviceRuntime& host,
                               const DeviceRuntime& cuda, const DeviceRuntime& ascend,
                               std::vector<std::string> rdma_devices) {
  DoctorReport r;
  r.architecture = HostArchitecture();
  r.cpu_count = HostCpuCount();
  r.memory_bytes = HostPhysicalMemoryBytes();
  r.options = options;
  r.runtimes = {host.info(), cuda.info(), ascend.info()};
  r.rdma_devices = std::move(rdma_devices);

  TransportEnvironment env;
  env.cuda = &cuda;
  env.rdma_devices = r.rdma_devices;

  const std::string rdma_seen = r.rdma_devices.empty()
                                    ? "no RDMA devices under /sys/class/infiniband"
                                    : "RDMA devices: " + device_internal::JoinNames(r.rdma_devices);
  r.transports.push_back({"tcp", true, "built in"});
  r.transports.push_back({"shm", false, "not built yet"});
  r.transports.push_back({"rdma", false, "not built yet; " + rdma_seen});
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
      line(fmt::format("    library   {}", rt.library_path.empty() || rt.library_path == rt.library
                                               ? rt.library
                                               : rt.library + " (" + rt.library_path + ")"));
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
  auto q = [](std::string_view s) { return JsonQuote(s); };
  auto b = [](bool v) { return v ? "true" : "false"; };
  std::string out = "{";
  out += fmt::format("\"host\":{{\"architecture\":{},\"cpus\":{},\"memory_bytes\":{}}}",
                     q(r.architecture), r.cpu_count, r.memory_bytes);
  out += fmt::format(",\"options\":{{\"cuda_runtime_library\":{},\"ascend_runtime_library\":{}}}",
                     q(r.options.cuda_runtime_library), q(r.options.ascend_runtime_library));
  out += ",\"runtimes\":[";
  for (size_t i = 0; i < r.runtimes.size(); ++i) {
    const RuntimeInfo& rt = r.runtimes[i];
    if (i > 0) out += ',';
    out += fmt::format(
        "{{\"name\":{},\"state\":{},\"library\":{},\"library_path\":{},\"version\":{},"
        "\"driver_version\":{},\"device_count\":{},\"reason\":{}}}",
        q(RuntimeKindName(rt.kind)), q(RuntimeStateName(rt.state)), q(rt.library),
        q(rt.library_path), q(rt.version), q(rt.driver_version), rt.device_count, q(rt.reason));
  }
  out += "],\"rdma_devices\":[";
  for (size_t i = 0; i < r.rdma_devices.size(); ++i) {
    if (i > 0) out += ',';
    out += q(r.rdma_devices[i]);
  }
  out += "],\"transports\":[";
  for (size_t i = 0; i < r.transports.size(); ++i) {
    const TransportReport& t = r.transports[i];
    if (i > 0) out += ',';
    out += fmt::format("{{\"name\":{},\"available\":{},\"detail\":{}}}", q(t.name), b(t.available),
                       q(t.detail));
  }
  out += "],\"eic_trans_types\":[";
  for (size_t i = 0; i < r.trans_types.size(); ++i) {
    const TransTypeReport& t = r.trans_types[i];
    if (i > 0) out += ',';
    out += fmt::format("{{\"value\":{},\"name\":{},\"works\":{},\"outcome\":{}}}", t.value,
                       q(t.name), b(t.works), q(t.outcome));
  }
  out += fmt::format("],\"configured_trans_type\":{{\"value\":{},\"origin\":{}}}}}\n",
                     r.configured_trans_type, q(r.configured_trans_type_origin));
  return out;
}

}  // namespace kvport
