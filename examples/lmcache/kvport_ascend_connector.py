"""vLLM KV connector module: LMCache-Ascend's connector with kvport.lmcache.patch() applied.

For vLLM-Ascend with LMCache-Ascend on an LMCache core of the v0.4.4 era, whose EIC connector
loads libcudart when it is constructed (see examples/lmcache/README.md). Put this file's folder
on PYTHONPATH and name it in the kv-transfer-config instead of LMCache-Ascend's module:

    --kv-transfer-config '{"kv_connector":"LMCacheAscendConnectorV1Dynamic",
                           "kv_role":"kv_both",
                           "kv_connector_module_path":"kvport_ascend_connector"}'

vLLM imports kv_connector_module_path in every process that creates the KV connector, so the
patch runs in each of them, after LMCache-Ascend has installed its own patches of LMCache and
before any EICConnector is constructed. On a core that loads libcudart defensively itself
(_LMCACHE_EIC_CUDART_OPTIONAL) patch() changes nothing.
"""

import logging

# LMCache-Ascend first: importing its connector module applies LMCache-Ascend's patches.
from lmcache_ascend.integration.vllm.lmcache_ascend_connector_v1 import (  # noqa: F401
    LMCacheAscendConnectorV1Dynamic,
)

import kvport.lmcache

logging.getLogger(__name__).info("kvport.lmcache.patch(): %s", kvport.lmcache.patch())

__all__ = ["LMCacheAscendConnectorV1Dynamic"]
