# SPDX-License-Identifier: Apache-2.0
"""LMCache's engine<->LMCache KV copy for vLLM's CPU backend, which LMCache itself lacks.

LMCache moves a chunk of tokens between vLLM's paged KV cache and one of its own memory objects
through what `lmcache.v1.gpu_connector.CreateGPUConnector` returns. On a CPU platform LMCache
0.5.6 has no such copy ("No supported cpu connector found": vLLM then runs without caching), and
its pure-torch fallback refuses the head-major layout vLLM's CPU backend uses. install() makes
CreateGPUConnector return a VLLMCPUPagedCopy for vLLM on a CPU platform and leaves every other
case to LMCache. Load it through kvport.vllm_connector (vLLM's `kv_connector_module_path`), which
calls install() in each process that builds LMCache's connector.

Where vLLM's CPU backend keeps a token's keys and values inside a block depends on the kernel
it picked for the machine and dtype (its "isa": with "vec" the keys are transposed, with "amx"
keys and values are packed in pairs for the AMX tiles), and vLLM has no kernel that reads them
back. So the copy learns the layout from the kernel the backend writes new tokens with,
cpu_attn_reshape_and_cache, once per block size: _block_layout() has the writer write every
element's index into a scratch block and inverts what it wrote, and _strides() finds that
layout as a strided view of a block (every kernel's is one). A store (vLLM -> LMCache) and a
load (LMCache -> vLLM) copy whole blocks with strided copies through it; the tokens of a chunk
in no whole block are read through the layout element by element and written by the kernel
itself. A layer of vLLM's cache is one contiguous tensor [blocks, kv_heads, block_size,
2 * head_size] (the keys and values of each block side by side); slot s is token s % block_size
of block s // block_size. LMCache's memory object (KV_2LTD) is [2, layers, tokens, kv_heads *
head_size], the format of its GPU copies, so a chunk a CPU engine stores is the bytes a GPU
engine stores, whichever kernel wrote the cache.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch
import lmcache.v1.gpu_connector as _lmcache_connectors
from lmcache import torch_device_type
from lmcache.utils import EngineType
from lmcache.v1.gpu_connector.gpu_connectors import GPUConnectorInterface
from lmcache.v1.memory_management import MemoryFormat, MemoryObj


_DIGIT = 128  # every integer below 256 is exact in fp32, fp16 and bf16


def _block_layout(dtype: torch.dtype, kv_heads: int, head_size: int,
                  block_size: int) -> torch.Tensor:
    """[2, block_size, kv_heads, head_size]: the offset, inside one block of a layer of vLLM's
    CPU cache, of each key (0) and value (1) element, as vLLM's own kernel for this dtype and
    block size places it. The kernel writes each element's index, one base-128 digit per pass;
    a kernel that does not copy values unchanged (a quantizing fp8 cache) is refused."""
    from vllm import _custom_ops as ops
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

    isa = _get_attn_isa(dtype, block_size, head_size)
    shape = (2, block_size, kv_heads, head_size)
    index = torch.arange(2 * block_size * kv_heads * head_size).view(shape)
    found = torch.zeros(index.numel(), dtype=torch.int64)
    weight = 1
    while weight < index.numel():
        digit = (index // weight % _DIGIT).to(dtype)
        block = torch.full((1, kv_heads, block_size, 2 * head_size), -1, dtype=dtype)
        keys, values = block.view(1, kv_heads, 2 * block_size, head_size).chunk(2, dim=2)
        ops.cpu_attn_reshape_and_cache(digit[0], digit[1], keys, values,
                                       torch.arange(block_size), isa)
        written = block.flatten().to(torch.int64)
        if int(written.min()) < 0 or int(written.max()) >= _DIGIT:
            raise NotImplementedError(f"vLLM's {isa} KV kernel does not copy {dtype} unchanged")
        found += written * weight
        weight *= _DIGIT
    if not torch.equal(found.sort().values, index.flatten()):
        raise NotImplementedError(f"vLLM's {isa} KV kernel does not place each {dtype} once")
    offsets = torch.empty_like(found)
    offsets[found] = torch.arange(found.numel())
    return offsets.view(shape)


# sizes, strides, offset (Tensor.as_strided's, in lanes) and lanes (elements per lane: 1, or
# the elements a wider integer moves as one)
Strided = Tuple[List[int], List[int], int, int]
_LANE_TYPES = {2: torch.int16, 4: torch.int32, 8: torch.int64}  # bytes -> an integer that wide


def _strides(layout: torch.Tensor, element_size: int) -> Optional[Strided]:
    """A layout of offsets (the keys or the values of _block_layout()) as a strided view of a
    block, if it is one: block.as_strided(sizes, strides, offset) is then the block's elements
    in the layout's order, its dimensions split into factors (outermost first), so that
    viewing the target with `sizes` makes the copy one strided copy. Each of vLLM's CPU kernels
    places a block's keys, and its values, this way: "vec" transposes the keys, "amx" packs
    pairs of head elements of the keys, pairs of tokens of the values, and tiles of 16 tokens.
    Where the innermost factor is a run of head elements that is contiguous in the block too
    (the pairs of "amx" keys), the copy moves each run as one integer of its bytes (lanes > 1:
    sizes, strides and offset count lanes then), a several times faster copy than one of 2-byte
    elements. None for a layout that is not one strided view."""
    sizes: List[int] = []
    strides: List[int] = []
    for dim in range(layout.dim()):
        along = layout.movedim(dim, 0).reshape(layout.shape[dim], -1)
        factors: List[Tuple[int, int]] = []  # (size, stride), innermost first
        while along.shape[0] > 1:
            steps = along[1:] - along[:-1]
            step = steps[0]
            if int(step[0]) <= 0 or not bool((step == step[0]).all()):
                return None
            run = 1
            while run < steps.shape[0] and torch.equal(steps[run], step):
                run += 1
            if along.shape[0] % (run + 1):
                return None
            factors.append((run + 1, int(step[0])))
            along = along[::run + 1]
        sizes += [size for size, _ in reversed(factors)]
        strides += [stride for _, stride in reversed(factors)]
    offset = int(layout.min())
    view = torch.arange(int(layout.max()) + 1).as_strided(sizes, strides, offset)
    if not torch.equal(view.reshape(layout.shape), layout):
        return None
    # factors: the last dimension's (head elements); a lane is its innermost factor if contiguous
    lanes = sizes[-1] if factors and strides[-1] == 1 else 1
    if lanes * element_size not in _LANE_TYPES or any(
            stride % lanes for stride in strides[:-1]) or offset % lanes:
        lanes = 1
    if lanes > 1:
        return sizes[:-1], [stride // lanes for stride in strides[:-1]], offset // lanes, lanes
    return sizes, strides, offset, 1


class VLLMCPUPagedCopy(GPUConnectorInterface):
    """Copies chunks of tokens between vLLM's CPU KV cache and LMCache memory objects."""

    def __init__(self, num_layers: int, kv_heads: int, head_size: int, dtype: torch.dtype):
        self.num_layers = num_layers
        self.kv_heads = kv_heads
        self.head_size = head_size
        self.dtype = dtype
        self.layouts: Dict[int, torch.Tensor] = {}  # block size -> _block_layout()
        # block size -> _strides() of the keys and of the values, None where either is not
        self.strided: Dict[int, Optional[Tuple[Strided, Strided]]] = {}

    @classmethod
    def from_metadata(cls, metadata: Any) -> "VLLMCPUPagedCopy":
        # kv_shape: (num_layers, 2, chunk_size, kv_heads, head_size)
        num_layers, _, _, kv_heads, head_size = metadata.kv_shape
        if metadata.use_mla:
            raise NotImplementedError("kvport's CPU KV copy has no MLA layout")
        return cls(num_layers, kv_heads, head_size, metadata.kv_dtype)

    def get_shape(self, num_tokens: int) -> torch.Size:
        return torch.Size([2, self.num_layers, num_tokens, self.kv_heads * self.head_size])

    def _layers(self, kwargs: dict) -> List[torch.Tensor]:
        """vLLM's layers, each flat (a view: writing into it writes vLLM's cache), checked."""
        kvcaches = kwargs.get("kvcaches")
        if kvcaches is None:
            raise ValueError("'kvcaches' should be provided in kwargs")
        layers = list(kvcaches.values()) if isinstance(kvcaches, dict) else list(kvcaches)
        if len(layers) != self.num_layers:
            raise ValueError(f"{len(layers)} KV cache layers, expected {self.num_layers}")
        first = layers[0]
        for layer in layers:
            if (layer.dim() != 4 or layer.shape != first.shape
                    or (layer.shape[1], layer.shape[3]) != (self.kv_heads, 2 * self.head_size)
                    or layer.dtype != self.dtype or not layer.is_contiguous()):
                raise ValueError(
                    f"not vLLM's CPU KV layout: contiguous {self.dtype} tensors [blocks, "
                    f"{self.kv_heads}, block_size, {2 * self.head_size}] expected, got "
                    f"{layer.dtype} {list(layer.shape)} with strides {layer.stride()}")
        return layers

    def _slots(self, layers: List[torch.Tensor], kwargs: dict, start: int,
               end: int) -> torch.Tensor:
        """The slots of tokens [start, end). A slot outside the cache (vLLM marks the tokens it
        did not schedule with -1) is refused, never wrapped around."""
        if "slot_mapping" not in kwargs:
            raise ValueError("'slot_mapping' should be provided in kwargs")
        slots = kwargs["slot_mapping"][start:end].to(device="cpu", dtype=torch.int64)
        if slots.numel() != end - start:
            raise ValueError(f"slot_mapping has no slot for tokens [{start}, {end})")
        blocks, _, block_size, _ = layers[0].shape
        if slots.numel() and (int(slots.min()) < 0 or int(slots.max()) >= blocks * block_size):
            raise ValueError(f"slot_mapping[{start}:{end}] leaves the cache's "
                             f"{blocks * block_size} slots")
        return slots

    def _layout(self, block_size: int) -> Tuple[torch.Tensor, Optional[Tuple[Strided,
                                                                              Strided]]]:
        """_block_layout() of a block of `block_size` tokens and the strided views of its keys
        and values (_strides(); None if either is none), learnt once."""
        if block_size not in self.layouts:
            layout = _block_layout(self.dtype, self.kv_heads, self.head_size, block_size)
            size = torch.empty((), dtype=self.dtype).element_size()
            keys, values = _strides(layout[0], size), _strides(layout[1], size)
            self.layouts[block_size] = layout
            self.strided[block_size] = (keys, values) if keys and values else None
        return self.layouts[block_size], self.strided[block_size]

    def _offsets(self, layers: List[torch.Tensor], slots: torch.Tensor) -> torch.Tensor:
        """[2, tokens, kv_heads, head_size]: where each key and value element of the tokens at
        `slots` is in a flat layer."""
        block_size = layers[0].shape[2]
        block_elements = layers[0][0].numel()
        base = (slots // block_size * block_elements).view(1, -1, 1, 1)
        return base + self._layout(block_size)[0][:, slots % block_size]

    @staticmethod
    def _whole_blocks(slots: torch.Tensor, block_size: int) -> Tuple[List[Tuple[int, int, int]],
                                                                     torch.Tensor]:
        """Splits tokens at `slots` into runs of whole blocks, each (first token, first block,
        blocks): tokens [first token, + blocks * block_size) fill blocks [first block, +
        blocks) in order; and the indices of the tokens in no whole block (a chunk's end that
        is part of a block, or slots vLLM did not give in block order)."""
        count = slots.numel()
        whole = torch.zeros(count, dtype=torch.bool)
        runs: List[Tuple[int, int, int]] = []
        if count >= block_size:
            windows = slots.unfold(0, block_size, 1)
            starts = ((windows - windows[:, :1] == torch.arange(block_size)).all(dim=1)
                      & (windows[:, 0] % block_size == 0)).nonzero().flatten().tolist()
            for token in starts:
                whole[token:token + block_size] = True
                block = int(slots[token]) // block_size
                if runs and runs[-1][0] + runs[-1][2] * block_size == token \
                        and runs[-1][1] + runs[-1][2] == block:
                    runs[-1] = (runs[-1][0], runs[-1][1], runs[-1][2] + 1)
                else:
                    runs.append((token, block, 1))
        return runs, (~whole).nonzero().flatten()

    def _checked(self, memory_obj: MemoryObj, start: int, end: int) -> torch.Tensor:
        """The memory object's tensor as [2, layers, tokens, kv_heads, head_size]."""
        tensor = memory_obj.tensor
        if tensor is None or memory_obj.metadata.fmt != MemoryFormat.KV_2LTD:
            raise ValueError("a KV_2LTD memory object with a tensor is expected")
        if tensor.shape != self.get_shape(end - start) or tensor.dtype != self.dtype:
            raise ValueError(f"memory object {tensor.dtype} {list(tensor.shape)}, expected "
                             f"{self.dtype} {list(self.get_shape(end - start))}")
        return tensor.view(2, self.num_layers, end - start, self.kv_heads, self.head_size)

    def _split(self, layers: List[torch.Tensor], slots: torch.Tensor) -> Tuple[
            Optional[Tuple[Strided, Strided]], List[Tuple[int, int, int]], torch.Tensor]:
        """The strided views of the layers' blocks (_layout()), the runs of whole blocks of
        the tokens at `slots` and the indices of the other tokens (_whole_blocks()): every
        token when the layout is no strided view."""
        block_size = layers[0].shape[2]
        strided = self._layout(block_size)[1]
        if strided is None:
            return None, [], torch.arange(slots.numel())
        return (strided,) + self._whole_blocks(slots, block_size)

    @staticmethod
    def _block_views(layer: torch.Tensor, tokens: torch.Tensor,
                     strided: Tuple[Strided, Strided], runs: List[Tuple[int, int, int]]):
        """(cache view, tokens view) pairs, one per run and keys/values: the run's blocks of a
        layer of vLLM's cache as a strided view, and the same elements of `tokens` ([2, tokens,
        kv_heads, head_size] of this layer) viewed in the same order and shape, so that a
        copy_ between them is a copy of the run either way."""
        block_size = layer.shape[2]
        block_elements = layer[0].numel()
        for token, block, blocks in runs:
            for half, (sizes, strides, offset, lanes) in enumerate(strided):
                lane = _LANE_TYPES[lanes * layer.element_size()] if lanes > 1 else layer.dtype
                cache = layer.view(lane)
                cache = cache.as_strided(
                    [blocks] + sizes, [block_elements // lanes] + strides,
                    cache.storage_offset() + (block * block_elements) // lanes + offset)
                run = tokens[half, token:token + blocks * block_size].view(lane)
                yield cache, run.view([blocks] + sizes)

    def from_gpu(self, memory_obj: MemoryObj, start: int, end: int, **kwargs: Any) -> None:
        """vLLM's cache -> the memory object, tokens [start, end) of the request. A run of
        whole blocks in block order is one strided copy per layer for its keys and one for its
        values (the layout as _strides() finds it); other tokens, and every token of a layout
        that is no strided view, are gathered element by element through the layout."""
        out = self._checked(memory_obj, start, end)
        layers = self._layers(kwargs)
        slots = self._slots(layers, kwargs, start, end)
        strided, runs, rest = self._split(layers, slots)
        offsets = self._offsets(layers, slots[rest])
        for number, layer in enumerate(layers):
            for cache, run in self._block_views(layer, out[:, number], strided, runs):
                run.copy_(cache)
            if rest.numel():
                out[:, number, rest] = layer.view(-1)[offsets]

    def to_gpu(self, memory_obj: MemoryObj, start: int, end: int, **kwargs: Any) -> None:
        """The memory object -> vLLM's cache. A run of whole blocks in block order is one
        strided copy per layer for its keys and one for its values, through the layout learnt
        from vLLM's kernel (as from_gpu reads); other tokens, and every token of a layout that
        is no strided view, are written by that kernel itself (the one vLLM's attention backend
        writes new tokens with). The first tokens vLLM already holds in its own prefix cache
        (vllm_cached_tokens) are left alone: their blocks may be shared with requests that are
        running."""
        from vllm import _custom_ops as ops
        from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

        data = self._checked(memory_obj, start, end)
        layers = self._layers(kwargs)
        skip = min(end - start, max(0, kwargs.get("vllm_cached_tokens", 0) - start))
        if skip == end - start:
            return
        slots = self._slots(layers, kwargs, start + skip, end)
        strided, runs, rest = self._split(layers, slots)
        blocks, _, block_size, _ = layers[0].shape
        isa = _get_attn_isa(self.dtype, block_size, self.head_size)
        for number, layer in enumerate(layers):
            tokens = data[:, number, skip:]
            for cache, run in self._block_views(layer, tokens, strided, runs):
                cache.copy_(run)
            if rest.numel():
                keys, values = layer.view(blocks, self.kv_heads, 2 * block_size,
                                          self.head_size).chunk(2, dim=2)
                ops.cpu_attn_reshape_and_cache(tokens[0, rest], tokens[1, rest], keys, values,
                                               slots[rest], isa)

    def batched_from_gpu(self, memory_objs, starts, ends, **kwargs: Any) -> None:
        for memory_obj, start, end in zip(memory_objs, starts, ends, strict=True):
            self.from_gpu(memory_obj, start, end, **kwargs)

    def batched_to_gpu(self, memory_objs=None, starts=None, ends=None, **kwargs: Any) -> None:
        for memory_obj, start, end in zip(memory_objs, starts, ends, strict=True):
            self.to_gpu(memory_obj, start, end, **kwargs)


def _create(config: Any, metadata: Any, engine: Any, layout_hints: Any = None,
            _lmcache_create: Any = _lmcache_connectors.CreateGPUConnector) -> Any:
    if engine == EngineType.VLLM and torch_device_type == "cpu":
        if config.use_layerwise or config.enable_blending:
            raise ValueError("kvport's CPU KV copy moves whole chunks: set use_layerwise and "
                             "enable_blending to false")
        return VLLMCPUPagedCopy.from_metadata(metadata)
    return _lmcache_create(config, metadata, engine, layout_hints=layout_hints)


def install() -> bool:
    """Makes LMCache's CreateGPUConnector return a VLLMCPUPagedCopy for vLLM on a CPU platform
    (every other engine and device is LMCache's own). True the first time, False after."""
    if _lmcache_connectors.CreateGPUConnector is _create:
        return False
    _lmcache_connectors.CreateGPUConnector = _create
    return True
