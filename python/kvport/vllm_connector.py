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

from vllm.distributed.kv_transfer.kv_connector.v1.lmcache_connector import (
    LMCacheConnectorV1 as _VLLMLMCacheConnectorV1,
)


class LMCacheConnectorV1(_VLLMLMCacheConnectorV1):
    """vLLM's LMCacheConnectorV1, with kvport's CPU KV copy installed first."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from kvport import lmcache_cpu

        lmcache_cpu.install()
        super().__init__(*args, **kwargs)
