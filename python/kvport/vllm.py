# SPDX-License-Identifier: Apache-2.0
"""A vLLM KV connector that keeps vLLM's KV blocks in a kvport node, with no LMCache in the
path. Name it as vLLM's connector module:

    --kv-transfer-config '{"kv_connector": "KvportConnector", "kv_role": "kv_both",
                           "kv_connector_module_path": "kvport.vllm",
                           "kv_connector_extra_config": {"endpoint": "HOST:PORT"}}'

kv_connector_extra_config: endpoint (a kvport.Client endpoint; required), namespace (none: the
one the token names, else ""), token or token_file (else $KVPORT_TOKEN), ttl (seconds; -1:
none), model (the name keys carry; vLLM's model by default), transport_type (kvport.Client's,
EIC's numbers: 0 auto, shared memory with a node on this host; 1 TCP).

What is stored: one object per full block and attention layer, the block's bytes exactly as
vLLM's cache holds them (keys and values of block_size tokens, this rank's KV heads), under
vllm/<model digest>/tp<rank>of<size>/<layer name>/<vLLM's block hash, hex>. vLLM's block hash
chains the hashes of all blocks before it (and any LoRA, multimodal or cache-salt keys), so a
key names one prefix; it is the same in every process when vLLM hashes with sha256 or
sha256_cbor (the fixed seed, or one PYTHONHASHSEED everywhere), and xxhash without
PYTHONHASHSEED is refused. The model digest covers the model, KV dtype, block size, KV heads
per rank, head size and the in-block layout (on the CPU, the kernel vLLM writes blocks with:
"vec" and "amx" place a token's elements differently), so engines that would read a block
differently never share it. Objects per layer let each layer's load and save overlap the
forward pass: start_load_kv starts one get per layer, the attention of layer i waits for its
own, and save_kv_layer starts layer i's put as soon as layer i has written its blocks.

The scheduler side asks the node (batched mexist over every rank and layer of the candidate
blocks) how many leading full blocks of a prompt it holds, short of the block with the
prompt's last token, which vLLM computes; the worker side
reads those blocks straight into the blocks vLLM allocated and, after each forward pass,
stores each block that became full (from the first the node lacked). A block that
fails to load is reported to vLLM (get_block_ids_with_load_errors): with
kv_load_failure_policy "recompute" vLLM computes it again, with "fail" (vLLM's default) the
request fails. Saves are best effort: a failed put is logged and counted, never retried.

Platforms: vLLM's CPU backend, whose layer tensors are [blocks, kv_heads, block_size,
2 * head_size] (each block contiguous). Other platforms are refused: their cache lives in device
memory, laid out per attention backend, and none of that has been run here."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import torch
from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
)

import kvport

_logger = logging.getLogger("kvport.vllm")

_NON_CRYPTO_HASHES = ("xxhash", "xxhash_cbor")
_MEXIST_KEYS = 4096  # keys per existence check


def key_prefix(descriptor: Dict[str, Any], tp_rank: int, tp_size: int) -> str:
    """The part of a key shared by one engine configuration's rank: descriptor (model, dtype,
    geometry, layout) digested, then the tensor-parallel rank, so ranks never read each
    other's heads."""
    text = json.dumps(descriptor, sort_keys=True)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return f"vllm/{digest}/tp{tp_rank}of{tp_size}"


def block_key(prefix: str, layer: str, block_hash: str) -> str:
    """The key of one layer of one block: key_prefix(), the layer's name, vLLM's block hash."""
    return f"{prefix}/{layer}/{block_hash}"


def leading_present(codes: Sequence[Any], per_block: int) -> int:
    """How many leading blocks have all of their per_block keys present (SUCCESS), given the
    existence codes of consecutive blocks' keys."""
    blocks = 0
    for start in range(0, len(codes) - per_block + 1, per_block):
        if any(c != kvport.KeyCode.SUCCESS for c in codes[start:start + per_block]):
            break
        blocks += 1
    return blocks


def _descriptor(vllm_config: Any, model: str) -> Dict[str, Any]:
    """What decides the bytes of a block: the same in the scheduler and every worker."""
    from vllm.platforms import current_platform
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

    if not current_platform.is_cpu():
        raise NotImplementedError("kvport.vllm knows vLLM's CPU KV layout only")
    model_config, cache = vllm_config.model_config, vllm_config.cache_config
    if cache.cache_dtype != "auto":
        raise NotImplementedError("kvport.vllm stores the model dtype's cache (cache_dtype auto)")
    head_size = model_config.get_head_size()
    return {
        "model": model,
        "dtype": str(model_config.dtype),
        "block_size": cache.block_size,
        "kv_heads": model_config.get_num_kv_heads(vllm_config.parallel_config),
        "head_size": head_size,
        "layout": "cpu-" + _get_attn_isa(model_config.dtype, cache.block_size, head_size),
    }


@dataclass
class KvportConnectorMetadata(KVConnectorMetadata):
    """One step's work for the workers: (block hash hex, block id) pairs to load before the
    forward pass and to save after it."""

    loads: List[Tuple[str, int]] = field(default_factory=list)
    saves: List[Tuple[str, int]] = field(default_factory=list)


@dataclass
class _Tracked:
    request: Any
    stored: int = 0  # leading blocks of the request known to be on the node (or saved)


@dataclass
class _Lookup:
    computed: int  # tokens vLLM had when it asked (block aligned)
    on_node: int  # leading blocks the node holds


class KvportConnector(KVConnectorBase_V1):
    """vLLM's KV connector over a kvport node (this module's docstring says what it stores)."""

    def __init__(self, vllm_config: Any, role: KVConnectorRole, kv_cache_config: Any = None):
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        extra = self._kv_transfer_config.kv_connector_extra_config or {}
        if not extra.get("endpoint"):
            raise ValueError("kvport.vllm needs kv_connector_extra_config.endpoint")
        cache = vllm_config.cache_config
        if cache.prefix_caching_hash_algo in _NON_CRYPTO_HASHES and \
                os.environ.get("PYTHONHASHSEED") is None:
            raise ValueError(f"vLLM's {cache.prefix_caching_hash_algo} block hashes differ in "
                             "every process without PYTHONHASHSEED: set it, or hash with sha256")
        self._block_size = cache.block_size
        self._ttl = int(extra.get("ttl", -1))
        self._descriptor = _descriptor(vllm_config, str(extra.get("model")
                                                        or vllm_config.model_config.model))
        self._tp_size = vllm_config.parallel_config.tensor_parallel_size
        options: Dict[str, Any] = {k: str(extra[k]) for k in ("token", "token_file")
                                   if extra.get(k)}
        if "transport_type" in extra:
            options["transport_type"] = int(extra["transport_type"])
        self._client = kvport.Client(str(extra["endpoint"]), **options)
        self._namespace = str(extra.get("namespace") or self._client.default_namespace or "")
        # Scheduler side
        self._lookups: Dict[str, _Lookup] = {}
        self._tracked: Dict[str, _Tracked] = {}
        self._loads: Dict[str, List[Tuple[str, int]]] = {}
        # Worker side
        self._caches: Dict[str, torch.Tensor] = {}
        self._pool: Optional[ThreadPoolExecutor] = None
        self._loading: Dict[str, Future] = {}
        self._saving: List[Future] = []
        self._failed_blocks: Set[int] = set()
        self._lock = threading.Lock()
        # Blocks x layers, this worker's; and the data path its client took.
        self.stats: Dict[str, Any] = {"loaded_blocks": 0, "saved_blocks": 0, "failed_loads": 0,
                                      "failed_saves": 0, "transport": self._client.transport}
        if role == KVConnectorRole.SCHEDULER:
            groups = kv_cache_config.kv_cache_groups
            if len(groups) != 1:
                raise NotImplementedError("kvport.vllm keeps models of one KV cache group")
            self._layers = list(groups[0].layer_names)
        else:
            from vllm.distributed.parallel_state import get_tensor_model_parallel_rank

            self._prefix = key_prefix(self._descriptor, get_tensor_model_parallel_rank(),
                                      self._tp_size)
            self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kvport-vllm")

    # ---------------------------------------------------------------- scheduler side

    def _on_node(self, hashes: Sequence[bytes]) -> int:
        """Leading blocks of `hashes` whose every layer of every rank the node holds."""
        prefixes = [key_prefix(self._descriptor, rank, self._tp_size)
                    for rank in range(self._tp_size)]
        per_block = len(prefixes) * len(self._layers)
        step = max(1, _MEXIST_KEYS // per_block)
        found = 0
        for start in range(0, len(hashes), step):
            keys = [block_key(p, layer, h.hex()) for h in hashes[start:start + step]
                    for p in prefixes for layer in self._layers]
            try:
                codes = self._client.mexist(keys, ns=self._namespace).codes
            except kvport.Error as error:
                _logger.warning("kvport.vllm: existence check failed: %s", error)
                return found
            present = leading_present(codes, per_block)
            found += present
            if present < len(keys) // per_block:
                break
        return found

    def get_num_new_matched_tokens(self, request: Any,
                                   num_computed_tokens: int) -> Tuple[int, bool]:
        """Tokens past num_computed_tokens in the leading full blocks the node holds, leaving
        vLLM the block that holds the request's last token (it computes at least that token).
        Loading that block whole and reporting all but its last token crashed vLLM's bfloat16
        "amx" attention with the inference lane's model (SIGILL in cpu_attention_with_kv_cache,
        a query of one token; docs/python.md), so a prompt of whole blocks recomputes its last
        block. Loaded before the forward pass."""
        usable = min(len(request.block_hashes), (request.num_tokens - 1) // self._block_size)
        if usable * self._block_size <= num_computed_tokens:
            self._lookups.pop(request.request_id, None)
            return 0, False
        on_node = self._on_node(request.block_hashes[:usable])
        self._lookups[request.request_id] = _Lookup(num_computed_tokens, on_node)
        return max(0, on_node * self._block_size - num_computed_tokens), False

    def update_state_after_alloc(self, request: Any, blocks: Any,
                                 num_external_tokens: int) -> None:
        tracked = self._tracked.setdefault(request.request_id, _Tracked(request))
        lookup = self._lookups.pop(request.request_id, None)
        if lookup is None:
            return
        tracked.stored = max(tracked.stored, lookup.on_node)
        if num_external_tokens > 0:
            first = lookup.computed // self._block_size
            last = -(-(lookup.computed + num_external_tokens) // self._block_size)
            block_ids = blocks.get_block_ids()[0]
            self._loads[request.request_id] = [
                (request.block_hashes[i].hex(), block_ids[i]) for i in range(first, last)]

    def build_connector_meta(self, scheduler_output: Any) -> KvportConnectorMetadata:
        """This step's loads (allocated since the last step) and saves: every block that is
        full once the step's tokens are computed and that the node lacks."""
        meta = KvportConnectorMetadata()
        for pairs in self._loads.values():
            meta.loads.extend(pairs)
        self._loads.clear()
        cached = scheduler_output.scheduled_cached_reqs
        progress = [(r.req_id, r.num_computed_tokens) for r in scheduler_output.scheduled_new_reqs]
        progress += list(zip(cached.req_ids, cached.num_computed_tokens))
        for req_id, computed in progress:
            tracked = self._tracked.get(req_id)
            if tracked is None:
                continue
            done = computed + scheduler_output.num_scheduled_tokens.get(req_id, 0)
            full = min(done // self._block_size, len(tracked.request.block_hashes))
            if full <= tracked.stored:
                continue
            block_ids = self._kv_cache_manager.get_block_ids(req_id)[0]
            meta.saves.extend((tracked.request.block_hashes[i].hex(), block_ids[i])
                              for i in range(tracked.stored, full))
            tracked.stored = full
        return meta

    def request_finished(self, request: Any,
                         block_ids: List[int]) -> Tuple[bool, Optional[Dict[str, Any]]]:
        """Saves never outlive their step (wait_for_save), so the blocks are free at once."""
        for table in (self._tracked, self._lookups, self._loads):
            table.pop(request.request_id, None)
        return False, None

    # ---------------------------------------------------------------- worker side

    def register_kv_caches(self, kv_caches: Dict[str, torch.Tensor]) -> None:
        """Checks each layer is vLLM's CPU layout for the descriptor: blocks first, each a
        contiguous run of 2 x kv_heads x block_size x head_size elements."""
        d = self._descriptor
        elements = 2 * d["kv_heads"] * d["block_size"] * d["head_size"]
        for name, layer in kv_caches.items():
            if (layer.dim() < 2 or layer[0].numel() != elements
                    or layer.stride(0) != elements or not layer[0].is_contiguous()
                    or str(layer.dtype) != d["dtype"]):
                raise ValueError(f"kvport.vllm: layer {name} is {layer.dtype} "
                                 f"{list(layer.shape)} with strides {layer.stride()}, not "
                                 f"vLLM's CPU layout of {d}")
        self._caches = dict(kv_caches)

    def _get(self, layer: str, loads: List[Tuple[str, int]]) -> None:
        cache = self._caches[layer]
        buffers = [cache[block] for _, block in loads]
        keys = [block_key(self._prefix, layer, h) for h, _ in loads]
        try:
            result = self._client.mget(keys, buffers, ns=self._namespace)
            failed = [block for (_, block), code, size, buffer in
                      zip(loads, result.codes, result.value_sizes, buffers)
                      if code != kvport.KeyCode.SUCCESS or size != buffer.nbytes]
        except kvport.Error as error:
            _logger.warning("kvport.vllm: loading %s failed: %s", layer, error)
            failed = [block for _, block in loads]
        with self._lock:
            self._failed_blocks.update(failed)
            self.stats["loaded_blocks"] += len(loads) - len(failed)
            self.stats["failed_loads"] += len(failed)

    def _put(self, layer: str, kv_layer: torch.Tensor, saves: List[Tuple[str, int]]) -> None:
        keys = [block_key(self._prefix, layer, h) for h, _ in saves]
        try:
            result = self._client.mset(keys, [kv_layer[block] for _, block in saves],
                                       ns=self._namespace, ttl=self._ttl)
            failed = sum(code != kvport.KeyCode.SUCCESS for code in result.codes)
            if failed:
                _logger.warning("kvport.vllm: %d of %d blocks of %s not stored (%s)", failed,
                               len(keys), layer, result.error or result.status.name)
        except kvport.Error as error:
            _logger.warning("kvport.vllm: saving %s failed: %s", layer, error)
            failed = len(keys)
        with self._lock:
            self.stats["saved_blocks"] += len(keys) - failed
            self.stats["failed_saves"] += failed

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        """Starts one get per layer, straight into the blocks vLLM allocated."""
        meta = self._get_connector_metadata()
        if meta.loads:
            for layer in self._caches:
                self._loading[layer] = self._pool.submit(self._get, layer, meta.loads)

    def wait_for_layer_load(self, layer_name: str) -> None:
        future = self._loading.pop(layer_name, None)
        if future is not None:
            future.result()

    def save_kv_layer(self, layer_name: str, kv_layer: torch.Tensor, attn_metadata: Any,
                      **kwargs: Any) -> None:
        """Starts the put of this layer's new full blocks (its attention has written them)."""
        meta = self._get_connector_metadata()
        if meta.saves:
            self._saving.append(self._pool.submit(self._put, layer_name, kv_layer, meta.saves))

    def wait_for_save(self) -> None:
        """Waits for every get and put of the step: the blocks they read and write may be
        another request's once the step is over."""
        for future in list(self._loading.values()) + self._saving:
            future.result()
        self._loading.clear()
        self._saving.clear()

    def get_block_ids_with_load_errors(self) -> Set[int]:
        with self._lock:
            failed, self._failed_blocks = self._failed_blocks, set()
        return failed

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self._client.close()
