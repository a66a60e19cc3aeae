// SPDX-License-Identifier: Apache-2.0
// The UCX calls kvport makes, resolved from libucp (and, through its dependencies, libucs and
// libuct) by ucx_runtime.cc. Internal to the device layer, and only in a build with UCX's
// headers (KVPORT_HAVE_UCX): the types are UCX's own, taken with decltype from its declarations,
// which are never linked.
#pragma once

#if KVPORT_HAVE_UCX

#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

#include "kvport/status.h"
#include "kvport/ucx.h"

namespace kvport::device_internal {

struct UcxApi {
  // Finding out what UCX offers (the runtime's probe).
  decltype(&ucp_get_version) get_version = nullptr;
  decltype(&ucp_config_read) config_read = nullptr;
  decltype(&ucp_config_release) config_release = nullptr;
  decltype(&ucp_config_modify) config_modify = nullptr;
  decltype(&ucp_init_version) init_version = nullptr;
  decltype(&ucp_cleanup) cleanup = nullptr;
  decltype(&ucp_context_query) context_query = nullptr;
  decltype(&ucs_status_string) status_string = nullptr;
  decltype(&uct_query_components) query_components = nullptr;
  decltype(&uct_release_component_list) release_component_list = nullptr;
  decltype(&uct_component_query) component_query = nullptr;
  decltype(&uct_md_config_read) md_config_read = nullptr;
  decltype(&uct_config_release) md_config_release = nullptr;
  decltype(&uct_md_open) md_open = nullptr;
  decltype(&uct_md_close) md_close = nullptr;
  decltype(&uct_md_query_tl_resources) md_query_tl_resources = nullptr;
  decltype(&uct_release_tl_resource_list) release_tl_resource_list = nullptr;
  const char** memory_type_names = nullptr;  // ucs_memory_type_names[UCS_MEMORY_TYPE_LAST]
  // Workers, endpoints, a listener and active messages (ucx_worker.cc).
  decltype(&ucp_worker_create) worker_create = nullptr;
  decltype(&ucp_worker_destroy) worker_destroy = nullptr;
  decltype(&ucp_worker_progress) worker_progress = nullptr;
  decltype(&ucp_worker_get_efd) worker_get_efd = nullptr;
  decltype(&ucp_worker_arm) worker_arm = nullptr;
  decltype(&ucp_worker_set_am_recv_handler) worker_set_am_recv_handler = nullptr;
  decltype(&ucp_listener_create) listener_create = nullptr;
  decltype(&ucp_listener_destroy) listener_destroy = nullptr;
  decltype(&ucp_listener_query) listener_query = nullptr;
  decltype(&ucp_listener_reject) listener_reject = nullptr;
  decltype(&ucp_ep_create) ep_create = nullptr;
  decltype(&ucp_ep_close_nbx) ep_close_nbx = nullptr;
  decltype(&ucp_am_send_nbx) am_send_nbx = nullptr;
  decltype(&ucp_am_recv_data_nbx) am_recv_data_nbx = nullptr;
  decltype(&ucp_request_check_status) request_check_status = nullptr;
  decltype(&ucp_request_cancel) request_cancel = nullptr;
  decltype(&ucp_request_free) request_free = nullptr;

  // "Destination is unreachable (-6)".
  std::string StatusText(ucs_status_t status) const;
  // A UCP context with this process's UCX_* configuration and the features the UCX transport
  // uses (active messages, an event fd to sleep on); with
  // `net_devices` (UCX_NET_DEVICES' syntax: "mlx5_0:1", "eth0"), limited to those devices. The
  // caller cleans it up.
  Result<ucp_context_h> CreateContext(std::string_view net_devices = "") const;
};

// The calls of a usable runtime; null for one that is absent or unusable.
const UcxApi* UcxApiOf(const UcxRuntime& runtime);

}  // namespace kvport::device_internal

#endif  // KVPORT_HAVE_UCX
