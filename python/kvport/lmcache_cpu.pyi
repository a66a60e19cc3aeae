# SPDX-License-Identifier: Apache-2.0
# Type stubs for kvport.lmcache_cpu (docs/python.md, "vLLM on a CPU"). The module imports LMCache
# and vLLM, so the inference lane checks this stub (python/inference/tests/
# test_engine_module_stubs.py), in the venv where it imports.

from typing import Any, Dict, List, Optional, Tuple

import torch

# sizes, strides, offset (in lanes), lanes: a block's keys or values as one strided view
Strided = Tuple[List[int], List[int], int, int]

class VLLMCPUPagedCopy:
    num_layers: int
    kv_heads: int
    head_size: int
    dtype: torch.dtype
    layouts: Dict[int, torch.Tensor]
    strided: Dict[int, Optional[Tuple[Strided, Strided]]]
    def __init__(self, num_layers: int, kv_heads: int, head_size: int,
                 dtype: torch.dtype) -> None: ...
    @classmethod
    def from_metadata(cls, metadata: Any) -> VLLMCPUPagedCopy: ...
    def get_shape(self, num_tokens: int) -> torch.Size: ...
    def from_gpu(self, memory_obj: Any, start: int, end: int, **kwargs: Any) -> None: ...
    def to_gpu(self, memory_obj: Any, start: int, end: int, **kwargs: Any) -> None: ...
    def batched_from_gpu(self, memory_objs: List[Any], starts: List[int], ends: List[int],
                         **kwargs: Any) -> None: ...
    def batched_to_gpu(self, memory_objs: Optional[List[Any]] = None,
                       starts: Optional[List[int]] = None, ends: Optional[List[int]] = None,
                       **kwargs: Any) -> None: ...

def install() -> bool: ...
