# SPDX-License-Identifier: Apache-2.0
"""LMCache chunks of two KV layer groups (test_lmcache.py runs this in a process of its own:
LMCache's remote metadata format is process-wide, set by the last connector built).

argv: the LMCache YAML. Builds LMCache's remote tier twice on one node: first for a one-group
model, which stores chunk 1; then for a two-group model (layers 0-1 with 8 KV heads of 128,
layers 2-3 with 4 of 64: the kv_layer_groups_manager LMCache builds from vLLM's per-layer
caches), which tries to store chunk 2 with put and chunks 3-4 with the connector's batched put
(this release's connector cannot: it reads `memory_obj.tensor`, which a multi-group object does
not have), then reads chunk 1, a one-group chunk: its 28-byte meta does not fill the two-group
48-byte buffer, so it must be a miss, not a hit with garbage shapes. Prints one JSON object of
what it saw."""

import asyncio
import json
import os
import sys
import threading

import torch

from lmcache.utils import EngineType
from lmcache.v1.config import LMCacheEngineConfig
from lmcache.v1.gpu_connector.utils import normalize_and_discover_per_layer_formats
from lmcache.v1.kv_layer_groups import KVLayerGroupsManager
from lmcache.v1.memory_management import MemoryFormat
from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend
from lmcache.v1.storage_backend.remote_backend import RemoteBackend

from test_lmcache import key, metadata, stop_loop


def two_group_metadata():
    """vLLM's per-layer paged caches ([K/V, blocks, block size, heads, head size]) of a model
    whose layers come in two shapes, grouped by LMCache's own KVLayerGroupsManager."""
    caches = ([torch.zeros(2, 64, 16, 8, 128, dtype=torch.bfloat16) for _ in range(2)]
              + [torch.zeros(2, 64, 16, 4, 64, dtype=torch.bfloat16) for _ in range(2)])
    normalized, formats = normalize_and_discover_per_layer_formats(caches, [], EngineType.VLLM)
    md = metadata()
    md.kv_layer_groups_manager = KVLayerGroupsManager(list(normalized), engine_kv_formats=formats,
                                                      lmcache_tokens_per_chunk=256)
    return md


def tier(config, md):
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    local = LocalCPUBackend(config, md)
    return loop, thread, local, RemoteBackend(config, md, loop, local)


def chunk(local, md, seed):
    """Random bytes in a memory object of the model's groups. A multi-group object has no single
    `.tensor` (its groups differ in shape): its bytes are written through raw_data."""
    obj = local.allocate(md.get_shapes(), md.get_dtypes(), MemoryFormat.KV_2LTD)
    generator = torch.Generator().manual_seed(seed)
    size = obj.get_size()
    obj.raw_data[:size].copy_(torch.randint(0, 256, (size,), dtype=torch.uint8,
                                            generator=generator))
    return obj



def main() -> int:
    os.environ["LMCACHE_CONFIG_FILE"] = sys.argv[1]
    config = LMCacheEngineConfig.from_file(sys.argv[1])
    seen = {}

    one = metadata()
    loop1, thread1, local1, remote1 = tier(config, one)
    obj = chunk(local1, one, seed=1)
    remote1.submit_put_task(key(1), obj).result(30)
    obj.ref_count_down()
    stop_loop(loop1, thread1)

    two = two_group_metadata()
    seen["groups"] = two.get_num_groups()
    loop, thread, local, remote = tier(config, two)
    seen["meta_bytes"] = remote.connection.getWrappedConnector().remote_metadata_bytes
    # This release's EICConnector reads memory_obj.tensor to put a chunk, which a multi-group
    # object does not have: LMCache raises before any eic call.
    obj = chunk(local, two, seed=2)
    try:
        remote.submit_put_task(key(2), obj).result(30)
        seen["put"] = "stored"
    except RuntimeError as e:
        seen["put"] = f"RuntimeError: {e}"
    objs = [chunk(local, two, seed=s) for s in (3, 4)]
    try:
        asyncio.run_coroutine_threadsafe(
            remote.connection.getWrappedConnector()._batched_put([key(3), key(4)], objs),
            loop).result(30)
        seen["batched_put"] = "stored"
    except RuntimeError as e:
        seen["batched_put"] = f"RuntimeError: {e}"
    seen["contains"] = [remote.contains(key(h)) for h in (2, 3, 4)]
    seen["one_group_chunk"] = remote.get_blocking(key(1)) is None
    stop_loop(loop, thread)
    print(json.dumps(seen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
