# SPDX-License-Identifier: Apache-2.0
"""vLLM's LMCache connector with kvport's CPU KV copy (kvport.lmcache_cpu), for vLLM's CPU
backend. Name it as vLLM's connector module:

    --kv-transfer-config '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both",
                           "kv_connector_module_path": "kvport.vllm_connector"}'

LMCacheConnectorV1 here is vLLM's own class; it installs the copy when it is constructed, before
LMCache builds its engine. Installing it any earlier would import LMCache (and numba) when vLLM
imports this module to read the connector's class, which is before vLLM's CPU worker rebinds its
kernels: that scan over every loaded module fails on a numba (llvmlite) object. On other
platforms the copy changes nothing and LMCache's own copies are used."""

from __future__ import annotations

from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1
from vllm.distributed.kv_transfer.kv_connector.v1.lmcache_connector import (
    LMCacheConnectorV1 as _VLLMLMCacheConnectorV1,
)


class LMCacheConnectorV1(_VLLMLMCacheConnectorV1):
    """vLLM's LMCacheConnectorV1, with kvport's CPU KV copy installed first."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from kvport import lmcache_cpu

        lmcache_cpu.install()
        super().__init__(*args, **kwargs)


def _lmcache_mp_connector_class() -> Any:
    from vllm.distributed.kv_transfer.kv_connector.v1.lmcache_mp_connector import (
        LMCacheMPConnector as _VLLMLMCacheMPConnector,
    )

    return _VLLMLMCacheMPConnector


class LMCacheMPConnector(KVConnectorBase_V1):
    """vLLM's LMCacheMPConnector (LMCache's multiprocess mode), imported when it is first
    constructed. vLLM's own module imports LMCache (and numba) at its top, so naming it as the
    connector class imports them when vLLM reads the class, before its CPU worker rebinds its
    kernels, and that start fails as above. Constructing this class builds vLLM's connector and
    returns it; its class-level hooks are vLLM's connector's, imported at their first call."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return _lmcache_mp_connector_class()(*args, **kwargs)

    @classmethod
    def get_required_kvcache_layout(cls, *args: Any, **kwargs: Any) -> Any:
        return _lmcache_mp_connector_class().get_required_kvcache_layout(*args, **kwargs)

    @classmethod
    def build_kv_connector_stats(cls, *args: Any, **kwargs: Any) -> Any:
        return _lmcache_mp_connector_class().build_kv_connector_stats(*args, **kwargs)

    @classmethod
    def build_prom_metrics(cls, *args: Any, **kwargs: Any) -> Any:
        return _lmcache_mp_connector_class().build_prom_metrics(*args, **kwargs)
