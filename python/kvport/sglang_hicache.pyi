# SPDX-License-Identifier: Apache-2.0
# Type stubs for kvport.sglang_hicache (docs/python.md, "SGLang HiCache").
# The base class and the argument types are SGLang's (sglang.srt.mem_cache.hicache_storage).

from typing import Any, Dict, List, Optional

from sglang.srt.mem_cache.hicache_storage import (
    HiCacheStorage,
    HiCacheStorageConfig,
    HiCacheStorageExtraInfo,
    PoolTransfer,
    PoolTransferResult,
)

from . import Client

class HiCacheKvport(HiCacheStorage):
    namespace: str
    ttl: int
    client: Client
    config: HiCacheStorageConfig
    is_mla: bool
    rank_suffix: str
    shared_suffix: str
    registered_pools: Dict[str, Any]
    def __init__(
        self, storage_config: HiCacheStorageConfig, kwargs: Optional[dict] = ...
    ) -> None: ...
    def register_mem_pool_host(self, mem_pool_host: Any) -> None: ...
    def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None: ...
    def close(self) -> None: ...
    def batch_set_v1(
        self, keys: List[str], host_indices: Any,
        extra_info: Optional[HiCacheStorageExtraInfo] = ...,
    ) -> List[bool]: ...
    def batch_get_v1(
        self, keys: List[str], host_indices: Any,
        extra_info: Optional[HiCacheStorageExtraInfo] = ...,
    ) -> List[bool]: ...
    def batch_exists(
        self, keys: List[str], extra_info: Optional[HiCacheStorageExtraInfo] = ...
    ) -> int: ...
    def exists(self, key: str) -> bool: ...
    def get(self, key: str, target_location: Any = ..., target_sizes: Any = ...) -> Any: ...
    def set(
        self, key: str, value: Any = ..., target_location: Any = ..., target_sizes: Any = ...
    ) -> bool: ...
    def batch_get(
        self, keys: List[str], target_locations: Any = ..., target_sizes: Any = ...
    ) -> Any: ...
    def batch_set(
        self, keys: List[str], values: Any = ..., target_locations: Any = ...,
        target_sizes: Any = ...,
    ) -> bool: ...
    def batch_exists_v2(
        self, keys: List[str], pool_transfers: Optional[List[PoolTransfer]] = ...,
        extra_info: Optional[HiCacheStorageExtraInfo] = ...,
    ) -> PoolTransferResult: ...
    def batch_set_v2(
        self, transfers: List[PoolTransfer],
        extra_info: Optional[HiCacheStorageExtraInfo] = ...,
    ) -> Dict[str, List[bool]]: ...
    def batch_get_v2(
        self, transfers: List[PoolTransfer],
        extra_info: Optional[HiCacheStorageExtraInfo] = ...,
    ) -> Dict[str, List[bool]]: ...
    def clear(self) -> None: ...
