# SPDX-License-Identifier: Apache-2.0
# Type stubs for kvport.vllm_connector (docs/python.md, "vLLM on a CPU"): vLLM's
# LMCacheConnectorV1, with kvport's CPU KV copy installed when it is constructed, and vLLM's
# LMCacheMPConnector, imported when it is constructed.

from typing import Any

class LMCacheConnectorV1:
    def __init__(self, *args: Any, **kwargs: Any) -> None: ...

class LMCacheMPConnector:
    def __new__(cls, *args: Any, **kwargs: Any) -> Any: ...
    @classmethod
    def get_required_kvcache_layout(cls, *args: Any, **kwargs: Any) -> Any: ...
    @classmethod
    def build_kv_connector_stats(cls, *args: Any, **kwargs: Any) -> Any: ...
    @classmethod
    def build_prom_metrics(cls, *args: Any, **kwargs: Any) -> Any: ...
