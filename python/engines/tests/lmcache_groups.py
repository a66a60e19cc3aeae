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

import json
import sys
from pathlib import Path

import pytest
import torch

from lmcache.utils import EngineType
from lmcache.v1.gpu_connector.utils import normalize_and_discover_per_layer_formats
from lmcache.v1.kv_layer_groups import KVLayerGroupsManager

from test_lmcache import LMCache, key, metadata


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


def main() -> int:
    config_file = Path(sys.argv[1])
    env = pytest.MonkeyPatch()
    seen = {}

    one = LMCache(config_file, env)
    one.put(1, seed=1)
    one.close()

    lmcache = LMCache(config_file, env, two_group_metadata())
    seen["groups"] = lmcache.metadata.get_num_groups()
    seen["meta_bytes"] = lmcache.eic.remote_metadata_bytes
    remote = lmcache.remote
    # This release's EICConnector reads memory_obj.tensor to put a chunk, which a multi-group
    # object does not have: LMCache raises before any eic call.
    obj = lmcache.chunk(seed=2)
    try:
        remote.submit_put_task(key(2), obj).result(30)
        seen["put"] = "stored"
    except RuntimeError as e:
        seen["put"] = f"RuntimeError: {e}"
    objs = [lmcache.chunk(seed=s) for s in (3, 4)]
    try:
        lmcache.run(lmcache.eic._batched_put([key(3), key(4)], objs))
        seen["batched_put"] = "stored"
    except RuntimeError as e:
        seen["batched_put"] = f"RuntimeError: {e}"
    seen["contains"] = [remote.contains(key(h)) for h in (2, 3, 4)]
    seen["one_group_chunk"] = remote.get_blocking(key(1)) is None
    lmcache.close()
    print(json.dumps(seen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
