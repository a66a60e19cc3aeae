// SPDX-License-Identifier: Apache-2.0
#include "config/engine_keys.h"

#include <algorithm>
#include <iterator>

namespace kvport::config_internal {
namespace {

struct EngineKey {
  std::string_view key;
  const char* engines;
};

// Sorted by key. From the releases in python/engines/requirements.txt: LMCache 0.5.6's config
// definitions (lmcache/v1/config.py), SGLang 0.5.23's EICStorage and AIBrix 0.8.0's
// EICConnector (every key AIBrix reads, kvport reads too). Keys kvport reads itself are not here.
constexpr EngineKey kEngineKeys[] = {
    {"app_id", "LMCache"},
    {"audit_actual_remote_url", "LMCache"},
    {"blend_check_layers", "LMCache"},
    {"blend_min_tokens", "LMCache"},
    {"blend_recompute_ratios", "LMCache"},
    {"blend_special_str", "LMCache"},
    {"blend_thresholds", "LMCache"},
    {"cache_policy", "LMCache"},
    {"chunk_statistics_auto_exit_target_unique_chunks", "LMCache"},
    {"chunk_statistics_auto_exit_timeout_hours", "LMCache"},
    {"chunk_statistics_auto_start_statistics", "LMCache"},
    {"chunk_statistics_strategy", "LMCache"},
    {"controller_pull_url", "LMCache"},
    {"controller_reply_url", "LMCache"},
    {"cpu_nic_affinity_config", "SGLang"},
    {"eic_namespace", "SGLang"},
    {"enable_async_loading", "LMCache"},
    {"enable_blending", "LMCache"},
    {"enable_chunk_statistics", "LMCache"},
    {"enable_controller", "LMCache"},
    {"enable_gpu_nic_affinity", "SGLang"},
    {"enable_hidden_state_cache", "LMCache"},
    {"enable_kv_events", "LMCache"},
    {"enable_kvget_direct", "SGLang"},
    {"enable_kvget_gpu_direct", "SGLang"},
    {"enable_kvset_direct", "SGLang"},
    {"enable_kvset_gpu_direct", "SGLang"},
    {"enable_lazy_memory_allocator", "LMCache"},
    {"enable_p2p", "LMCache"},
    {"enable_pd", "LMCache"},
    {"enable_scheduler_bypass_lookup", "LMCache"},
    {"external_lookup_client", "LMCache"},
    {"gds_backend", "LMCache"},
    {"gds_buffer_size", "LMCache"},
    {"gds_path", "LMCache"},
    {"gds_path_sharding", "LMCache"},
    {"gpu_nic_affinity_config", "SGLang"},
    {"hidden_state_layers", "LMCache"},
    {"hidden_states_retrieve_mode", "LMCache"},
    {"hit_miss_ratio", "LMCache"},
    {"internal_api_server_enabled", "LMCache"},
    {"internal_api_server_host", "LMCache"},
    {"internal_api_server_include_index_list", "LMCache"},
    {"internal_api_server_port_start", "LMCache"},
    {"internal_api_server_socket_path_prefix", "LMCache"},
    {"lazy_memory_expand_trigger_ratio", "LMCache"},
    {"lazy_memory_initial_ratio", "LMCache"},
    {"lazy_memory_safe_size", "LMCache"},
    {"lazy_memory_step_ratio", "LMCache"},
    {"lmcache_instance_id", "LMCache"},
    {"lmcache_worker_heartbeat_delay_time", "LMCache"},
    {"lmcache_worker_heartbeat_time", "LMCache"},
    {"lmcache_worker_ids", "LMCache"},
    {"lmcache_worker_ports", "LMCache"},
    {"local_cpu_use_hugepages", "LMCache"},
    {"local_disk_path_sharding", "LMCache"},
    {"lookup_server_worker_ids", "LMCache"},
    {"lookup_timeout_ms", "LMCache"},
    {"maru_path", "LMCache"},
    {"maru_pool_size", "LMCache"},
    {"max_hidden_state_cpu_size", "LMCache"},
    {"min_retrieve_tokens", "LMCache"},
    {"mp_host", "LMCache"},
    {"mp_port", "LMCache"},
    {"nixl_backends", "LMCache"},
    {"nixl_buffer_device", "LMCache"},
    {"nixl_buffer_size", "LMCache"},
    {"numa_mode", "LMCache"},
    {"p2p_host", "LMCache"},
    {"p2p_init_ports", "LMCache"},
    {"p2p_lookup_ports", "LMCache"},
    {"pd_allocation_timeout_sec", "LMCache"},
    {"pd_backend_mode", "LMCache"},
    {"pd_bidirectional", "LMCache"},
    {"pd_buffer_device", "LMCache"},
    {"pd_buffer_size", "LMCache"},
    {"pd_condition_poll_interval_sec", "LMCache"},
    {"pd_max_prefill_len", "LMCache"},
    {"pd_peer_alloc_port", "LMCache"},
    {"pd_peer_host", "LMCache"},
    {"pd_peer_init_port", "LMCache"},
    {"pd_peer_query_port", "LMCache"},
    {"pd_proxy_host", "LMCache"},
    {"pd_proxy_port", "LMCache"},
    {"pd_role", "LMCache"},
    {"pd_shutdown_timeout_sec", "LMCache"},
    {"pd_skip_proxy_notification", "LMCache"},
    {"pin_check_interval_sec", "LMCache"},
    {"pin_timeout_sec", "LMCache"},
    {"pre_caching_hash_algorithm", "LMCache"},
    {"priority_limit", "LMCache"},
    {"py_enable_gc", "LMCache"},
    {"remote_config_url", "LMCache"},
    {"remote_storage_plugins", "LMCache"},
    {"reserve_local_cpu_size", "LMCache"},
    {"retrieve_locations", "LMCache"},
    {"run_script_api_enabled", "LMCache"},
    {"runtime_plugin_locations", "LMCache"},
    {"save_decode_cache", "LMCache"},
    {"script_allowed_imports", "LMCache"},
    {"storage_plugins", "LMCache"},
    {"store_location", "LMCache"},
    {"transfer_channel", "LMCache"},
    {"use_gds", "LMCache"},
    {"use_gpu_connector_v3", "LMCache"},
    {"use_layerwise", "LMCache"},
};

}  // namespace

const char* EnginesReading(std::string_view key) {
  const auto* it =
      std::lower_bound(std::begin(kEngineKeys), std::end(kEngineKeys), key,
                       [](const EngineKey& e, std::string_view k) { return e.key < k; });
  return it != std::end(kEngineKeys) && it->key == key ? it->engines : nullptr;
}

}  // namespace kvport::config_internal
