# SPDX-License-Identifier: Apache-2.0
# Type stubs for kvport.vllm_connector (docs/python.md, "vLLM on a CPU"): vLLM's
# LMCacheConnectorV1, with kvport's CPU KV copy installed when it is constructed.

from typing import Any

class LMCacheConnectorV1:
    def __init__(self, *args: Any, **kwargs: Any) -> None: ...
