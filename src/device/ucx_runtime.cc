// SPDX-License-Identifier: Apache-2.0
// UCX, reached through libucp with dlopen/dlsym; never linked. See kvport/ucx.h.
//
// The calls' types come from UCX's own headers (decltype of their declarations, which are never
// linked), so a structure whose layout a release changes is caught by the version check, not by
// a wrong read: a libucp older than the headers' API is refused, a newer one keeps the ABI of
// the older API (UCX's compatibility rule, which ucp_init_version checks as well).
#include "kvport/ucx.h"

#include <fmt/core.h>

#include <algorithm>

#include "device/dynamic_library.h"

#include "device/ucx_api.h"

namespace kvport {

Status UcxRuntime::RequireUsable(std::string_view purpose) const {
  if (usable()) return Status::Ok();
  return Status::NotSupported(fmt::format("{} needs a usable UCX; {}", purpose, reason()));
}

std::vector<std::string> UcxTransportNames(const UcxInfo& info) {
  std::vector<std::string> names;
  for (const UcxResource& r : info.resources) {
    if (std::find(names.begin(), names.end(), r.transport) == names.end())
      names.push_back(r.transport);
  }
  return names;
}

bool UcxHasRdma(const UcxInfo& info) {
  for (const UcxResource& r : info.resources) {
    const std::string_view t = r.transport;
    if (t.starts_with("rc") || t.starts_with("dc") || t.starts_with("ud") || t == "srd") {
      return true;
    }
  }
  return false;
}

bool UcxRuntime::SupportsMemoryType(std::string_view name) const {
  const std::vector<std::string>& types = info().memory_types;
  return std::find(types.begin(), types.end(), name) != types.end();
}

namespace {

#if KVPORT_HAVE_UCX

using device_internal::DescribeLibrary;
using device_internal::JoinNames;
using device_internal::OpenedLibrary;
using device_internal::ResolveSymbol;
using device_internal::UcxApi;

bool Resolve(void* handle, UcxApi* api, std::vector<std::string>* missing) {
  bool ok = true;
  ok &= ResolveSymbol(handle, "ucp_get_version", api->get_version, missing);
  ok &= ResolveSymbol(handle, "ucp_config_read", api->config_read, missing);
  ok &= ResolveSymbol(handle, "ucp_config_modify", api->config_modify, missing);
  ok &= ResolveSymbol(handle, "ucp_config_release", api->config_release, missing);
  ok &= ResolveSymbol(handle, "ucp_init_version", api->init_version, missing);
  ok &= ResolveSymbol(handle, "ucp_cleanup", api->cleanup, missing);
  ok &= ResolveSymbol(handle, "ucp_context_query", api->context_query, missing);
  ok &= ResolveSymbol(handle, "ucs_status_string", api->status_string, missing);
  ok &= ResolveSymbol(handle, "uct_query_components", api->query_components, missing);
  ok &= ResolveSymbol(handle, "uct_release_component_list", api->release_component_list, missing);
  ok &= ResolveSymbol(handle, "uct_component_query", api->component_query, missing);
  ok &= ResolveSymbol(handle, "uct_md_config_read", api->md_config_read, missing);
  ok &= ResolveSymbol(handle, "uct_config_release", api->md_config_release, missing);
  ok &= ResolveSymbol(handle, "uct_md_open", api->md_open, missing);
  ok &= ResolveSymbol(handle, "uct_md_close", api->md_close, missing);
  ok &= ResolveSymbol(handle, "uct_md_query_tl_resources", api->md_query_tl_resources, missing);
  ok &=
      ResolveSymbol(handle, "uct_release_tl_resource_list", api->release_tl_resource_list, missing);
  ok &= ResolveSymbol(handle, "ucp_worker_create", api->worker_create, missing);
  ok &= ResolveSymbol(handle, "ucp_worker_destroy", api->worker_destroy, missing);
  ok &= ResolveSymbol(handle, "ucp_worker_progress", api->worker_progress, missing);
  ok &= ResolveSymbol(handle, "ucp_worker_get_efd", api->worker_get_efd, missing);
  ok &= ResolveSymbol(handle, "ucp_worker_arm", api->worker_arm, missing);
  ok &= ResolveSymbol(handle, "ucp_worker_set_am_recv_handler", api->worker_set_am_recv_handler,
                      missing);
  ok &= ResolveSymbol(handle, "ucp_listener_create", api->listener_create, missing);
  ok &= ResolveSymbol(handle, "ucp_listener_destroy", api->listener_destroy, missing);
  ok &= ResolveSymbol(handle, "ucp_listener_query", api->listener_query, missing);
  ok &= ResolveSymbol(handle, "ucp_listener_reject", api->listener_reject, missing);
  ok &= ResolveSymbol(handle, "ucp_ep_create", api->ep_create, missing);
  ok &= ResolveSymbol(handle, "ucp_ep_close_nbx", api->ep_close_nbx, missing);
  ok &= ResolveSymbol(handle, "ucp_am_send_nbx", api->am_send_nbx, missing);
  ok &= ResolveSymbol(handle, "ucp_am_recv_data_nbx", api->am_recv_data_nbx, missing);
  ok &= ResolveSymbol(handle, "ucp_request_check_status", api->request_check_status, missing);
  ok &= ResolveSymbol(handle, "ucp_request_cancel", api->request_cancel, missing);
  ok &= ResolveSymbol(handle, "ucp_request_free", api->request_free, missing);
  void* names = device_internal::LookupSymbol(handle, "ucs_memory_type_names");
  if (names == nullptr) {
    missing->emplace_back("ucs_memory_type_names");
    ok = false;
  }
  api->memory_type_names = static_cast<const char**>(names);
  return ok;
}

// Every transport/device pair of every memory domain of every component, as `ucx_info -d`
// lists them. A memory domain that fails to open is skipped (an RDMA component whose device
// vanished must not hide the others).
std::vector<UcxResource> ListResources(const UcxApi& api) {
  std::vector<UcxResource> out;
  uct_component_h* components = nullptr;
  unsigned component_count = 0;
  if (api.query_components(&components, &component_count) != UCS_OK) return out;
  for (unsigned c = 0; c < component_count; ++c) {
    uct_component_attr_t attr{};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    if (api.component_query(components[c], &attr) != UCS_OK) continue;
    std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = mds.data();
    if (mds.empty() || api.component_query(components[c], &attr) != UCS_OK) continue;
    for (const uct_md_resource_desc_t& md_desc : mds) {
      uct_md_config_t* config = nullptr;
      if (api.md_config_read(components[c], nullptr, nullptr, &config) != UCS_OK) continue;
      uct_md_h md = nullptr;
      const ucs_status_t opened = api.md_open(components[c], md_desc.md_name, config, &md);
      api.md_config_release(config);
      if (opened != UCS_OK) continue;
      uct_tl_resource_desc_t* tls = nullptr;
      unsigned tl_count = 0;
      if (api.md_query_tl_resources(md, &tls, &tl_count) == UCS_OK) {
        for (unsigned t = 0; t < tl_count; ++t)
          out.push_back({tls[t].tl_name, tls[t].dev_name, md_desc.md_name});
        api.release_tl_resource_list(tls);
      }
      api.md_close(md);
    }
  }
  api.release_component_list(components);
  return out;
}

// Makes a context as the transport would, to learn the memory types it supports.
Status ProbeContext(const UcxApi& api, std::vector<std::string>* memory_types) {
  KVPORT_ASSIGN_OR_RETURN(ucp_context_h context, api.CreateContext());
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  const ucs_status_t status = api.context_query(context, &attr);
  if (status == UCS_OK) {
    for (int type = 0; type < UCS_MEMORY_TYPE_LAST; ++type) {
      if ((attr.memory_types & (uint64_t{1} << type)) != 0)
        memory_types->emplace_back(api.memory_type_names[type]);
    }
  }
  api.cleanup(context);
  if (status != UCS_OK)
    return Status::Unavailable("ucp_context_query failed: " + api.StatusText(status));
  return Status::Ok();
}

UcxInfo Open(std::string_view library, UcxApi* api_out) {
  UcxInfo info;
  std::vector<std::string> candidates;
  if (library.empty()) {
    candidates = {"libucp.so.0", "libucp.so"};
  } else {
    candidates.emplace_back(library);
  }
  OpenedLibrary lib = device_internal::OpenFirstLibrary("libucp", candidates);
  if (lib.handle == nullptr) {
    info.state = lib.failure;
    info.reason = lib.reason;
    return info;
  }
  info.library = lib.name;
  info.library_path = lib.path;
  const std::string described = DescribeLibrary(lib);
  UcxApi api;
  std::vector<std::string> missing;
  if (!Resolve(lib.handle, &api, &missing)) {
    info.state = RuntimeState::kUnusable;
    info.reason = fmt::format("{} loaded but lacks {}", described, JoinNames(missing));
    return info;
  }
  unsigned major = 0, minor = 0, release = 0;
  api.get_version(&major, &minor, &release);
  info.version = fmt::format("{}.{}.{}", major, minor, release);
  if (major < UCP_API_MAJOR || (major == UCP_API_MAJOR && minor < UCP_API_MINOR)) {
    info.state = RuntimeState::kUnusable;
    info.reason = fmt::format("{} is UCX {}, older than {}.{}, the API this build of kvport uses",
                              described, info.version, UCP_API_MAJOR, UCP_API_MINOR);
    return info;
  }
  info.resources = ListResources(api);
  Status probed = ProbeContext(api, &info.memory_types);
  if (!probed.ok()) {
    info.state = RuntimeState::kUnusable;
    info.reason =
        fmt::format("{} (UCX {}) loaded but {}", described, info.version, probed.message());
    return info;
  }
  info.state = RuntimeState::kAvailable;
  *api_out = api;
  return info;
}

// A runtime, with its calls when usable.
class LoadedUcx final : public UcxRuntime {
 public:
  explicit LoadedUcx(std::string_view library) : info_(Open(library, &api_)) {}
  const UcxInfo& info() const override { return info_; }
  const UcxApi* api() const { return usable() ? &api_ : nullptr; }

 private:
  UcxApi api_;  // filled by Open when usable
  const UcxInfo info_;
};

#else  // !KVPORT_HAVE_UCX

UcxInfo Open(std::string_view /*library*/) {
  UcxInfo info;
  info.state = RuntimeState::kAbsent;
  info.reason =
      "this build of kvport has no UCX support (UCX's headers, Debian's libucx-dev, "
      "were not installed when it was built)";
  return info;
}

class LoadedUcx final : public UcxRuntime {
 public:
  explicit LoadedUcx(std::string_view library) : info_(Open(library)) {}
  const UcxInfo& info() const override { return info_; }

 private:
  const UcxInfo info_;
};

#endif

}  // namespace

std::unique_ptr<UcxRuntime> OpenUcxRuntime(std::string_view library) {
  return std::make_unique<LoadedUcx>(library);
}

#if KVPORT_HAVE_UCX
namespace device_internal {

std::string UcxApi::StatusText(ucs_status_t status) const {
  return fmt::format("{} ({})", status_string(status), static_cast<int>(status));
}

Result<ucp_context_h> UcxApi::CreateContext(std::string_view net_devices) const {
  ucp_config_t* config = nullptr;
  ucs_status_t status = config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) {
    return Status::Unavailable("ucp_config_read failed: " + StatusText(status) +
                               " (check the UCX_* environment variables)");
  }
  if (!net_devices.empty()) {
    status = config_modify(config, "NET_DEVICES", std::string(net_devices).c_str());
    if (status != UCS_OK) {
      config_release(config);
      return Status::InvalidArgument(
          fmt::format("UCX devices '{}' refused: {}", net_devices, StatusText(status)));
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  ucp_context_h context = nullptr;
  status = init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, config, &context);
  config_release(config);
  if (status != UCS_OK) {
    return Status::Unavailable("ucp_init failed: " + StatusText(status) +
                               " (no transport for active messages? see UCX_TLS)");
  }
  return context;
}

const UcxApi* UcxApiOf(const UcxRuntime& runtime) {
  const auto* loaded = dynamic_cast<const LoadedUcx*>(&runtime);
  return loaded != nullptr ? loaded->api() : nullptr;
}

}  // namespace device_internal
#endif

std::string_view UcxBuildApiVersion() {
#if KVPORT_HAVE_UCX
  static const std::string version = fmt::format("{}.{}", UCP_API_MAJOR, UCP_API_MINOR);
  return version;
#else
  return "";
#endif
}

}  // namespace kvport
