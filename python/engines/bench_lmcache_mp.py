# SPDX-License-Identifier: Apache-2.0
"""LMCache's multiprocess-mode L2 path through kvport against its `eic://` path, one run.

    build/engines/venv/bin/python python/engines/bench_lmcache_mp.py [--chunks 16] [--rounds 3]

For each transport (a node offering shared memory, and one without a Unix socket, so TCP), one
`kvport serve` and, on it, first bench_lmcache.py's run (LMCache 0.5.6's EICConnector through
`import eic`: `batched_put` of N chunks and `RemoteBackend.batched_get_blocking` of them; and
kvport.Client's mset/mget of the same bytes), then LMCache's MP L2 path: the
NativeConnectorL2Adapter that LMCache's own factory builds from the `native_plugin` JSON
(kvport.lmcache_mp.L2Connector), storing the same N chunks from LMCache memory objects
(`submit_store_task`) and loading them into N others (`submit_load_task`), each timed from the
submit to its eventfd. Chunks are Llama-3-8B's for 256 tokens (32 MiB, bf16). Each side's best of
--rounds; prints one line per number (docs/performance.md, "Engines: LMCache's MP L2 path").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))

import bench_lmcache  # noqa: E402
from bench_lmcache import GB, KV_SHAPE, best  # noqa: E402
from conftest import Node  # noqa: E402
from lmcache_mp_objects import memory_obj, wait_fd  # noqa: E402

from lmcache.v1.distributed.api import ObjectKey  # noqa: E402
from lmcache.v1.distributed.internal_api import L1MemoryDesc  # noqa: E402
from lmcache.v1.distributed.l2_adapters import create_l2_adapter  # noqa: E402
from lmcache.v1.distributed.l2_adapters.config import (  # noqa: E402
    parse_args_to_l2_adapters_config)



def bench_mp(node: Node, chunks: int, rounds: int) -> None:
    label = "shm" if node.shared_memory else "tcp"
    chunk_bytes = 2 * KV_SHAPE[0] * KV_SHAPE[2] * KV_SHAPE[3] * KV_SHAPE[4] * 2
    spec = json.dumps({"type": "native_plugin", "module_path": "kvport.lmcache_mp",
                       "class_name": "L2Connector",
                       "adapter_params": {"endpoint": node.endpoint, "namespace": "bench-mp",
                                          "timeout": 120}})
    config = parse_args_to_l2_adapters_config(argparse.Namespace(l2_adapter=[spec]))
    # LMCache's L1: the chunks stored and the ones loaded into, touched (a pool in use is).
    l1 = torch.zeros(2 * chunks * chunk_bytes // 2, dtype=torch.bfloat16)
    l1_desc = L1MemoryDesc(ptr=l1.data_ptr(), size=l1.numel() * 2, align_bytes=2)
    adapter = create_l2_adapter(config.adapters[0], l1_memory_desc=l1_desc)
    elements = chunk_bytes // 2
    sources = [memory_obj(l1[i * elements:(i + 1) * elements]) for i in range(chunks)]
    targets = [memory_obj(l1[(chunks + i) * elements:(chunks + i + 1) * elements])
               for i in range(chunks)]
    for i, obj in enumerate(sources):
        obj.tensor.fill_(i + 1)
    keys = [ObjectKey(chunk_hash=ObjectKey.IntHash2Bytes(i), model_name=bench_lmcache.MODEL,
                      kv_rank=0) for i in range(chunks)]

    def erase():
        # As bench_lmcache.py: each put round writes into arena pages an earlier one touched
        # (deleted through LMCache's eviction delete, submit_batch_delete).
        adapter.delete(keys)

    def store(_):
        task = adapter.submit_store_task(keys, sources)
        wait_fd(adapter.get_store_event_fd(), 300)
        result = adapter.pop_completed_store_tasks()[task]
        assert result.is_successful(), "the MP L2 store failed"

    def load(_):
        task = adapter.submit_load_task(keys, targets)
        wait_fd(adapter.get_load_event_fd(), 300)
        bitmap = adapter.query_load_result(task)
        assert all(bitmap.test(i) for i in range(chunks)), "the MP L2 load missed a chunk"

    put_s = best(rounds, store, erase)
    get_s = best(rounds, load)
    for src, dst in zip(sources, targets):
        assert torch.equal(src.tensor, dst.tensor), "a loaded chunk differs from the stored one"
    total = chunks * chunk_bytes
    for name, seconds in (("put", put_s), ("get", get_s)):
        print(f"{label}: {name}: LMCache MP L2 (kvport.lmcache_mp) "
              f"{total / seconds / GB:.2f} GB/s ({seconds:.3f} s)")
    adapter.close()


def main() -> int:
    args = bench_lmcache.parse_args(__file__, __doc__, "chunks", 16, 3)
    if args is None:
        return 0
    chunk_bytes = 2 * KV_SHAPE[0] * KV_SHAPE[2] * KV_SHAPE[3] * KV_SHAPE[4] * 2
    capacity = 4 * args.chunks * (chunk_bytes + (1 << 20))  # eic's, the client's and MP's chunks

    def run(node: Node, workdir: Path) -> None:
        bench_lmcache.bench(node, workdir, args.chunks, args.rounds)
        bench_mp(node, args.chunks, args.rounds)

    bench_lmcache.on_node(args.transport, capacity, run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
