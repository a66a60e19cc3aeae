# SPDX-License-Identifier: Apache-2.0
"""LMCache through kvport against the same bytes through kvport.Client, in one run.

    build/engines/venv/bin/python python/engines/bench_lmcache.py [--chunks 64] [--rounds 3]

For each transport (a node offering shared memory, and one without a Unix socket, so TCP), one
`kvport serve` and, on it:
  - LMCache 0.5.6's own EICConnector (built as test_lmcache.py builds it: LMCacheEngineConfig,
    LocalCPUBackend, RemoteBackend, eic_trans_type 2): `batched_put` of N chunks (one mset of N
    meta + chunk pairs) and `RemoteBackend.batched_get_blocking` of them (LMCache's two-step
    read per chunk: its meta, then the chunk into a memory object it allocates);
  - kvport.Client: one mset of the same N chunks (the same tensors) and one mget into N
    preallocated buffers: the limit LMCache's path can reach through this client.
A chunk is Llama-3-8B's for 256 tokens: 32 layers x K/V x 256 tokens x 8 KV heads x 128, bf16
(32 MiB). Each side's best of --rounds is reported, and LMCache's GB/s as a ratio of the
client's. Also LMCache's construction (its 2048 warm-up probes). Prints one line per number
(docs/performance.md, "Engines").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))

from conftest import Node  # noqa: E402
from test_lmcache import stop_loop  # noqa: E402

from lmcache.utils import CacheEngineKey  # noqa: E402
from lmcache.v1.config import LMCacheEngineConfig  # noqa: E402
from lmcache.v1.memory_management import MemoryFormat  # noqa: E402
from lmcache.v1.metadata import LMCacheMetadata  # noqa: E402
from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend  # noqa: E402
from lmcache.v1.storage_backend.remote_backend import RemoteBackend  # noqa: E402

import kvport  # noqa: E402
import yaml  # noqa: E402

MODEL = "bench/llama-3-8b"
KV_SHAPE = (32, 2, 256, 8, 128)
GB = 1e9


def best(rounds: int, step) -> float:
    times = []
    for r in range(rounds):
        start = time.perf_counter()
        step(r)
        times.append(time.perf_counter() - start)
    return min(times)


def bench(node: Node, workdir: Path, chunks: int, rounds: int) -> None:
    label = "shm" if node.shared_memory else "tcp"
    chunk_bytes = 2 * KV_SHAPE[0] * KV_SHAPE[2] * KV_SHAPE[3] * KV_SHAPE[4] * 2
    pool_gib = (2 * chunks + 2) * chunk_bytes / 2**30  # a batch being put and one being read
    config_file = workdir / f"lmcache-{label}.yaml"
    config_file.write_text(yaml.safe_dump({
        "chunk_size": KV_SHAPE[2], "local_cpu": False, "max_local_cpu_size": pool_gib,
        "remote_url": node.url, "remote_serde": "naive", "blocking_timeout_secs": 120,
        "eic_trans_type": 2, "eic_kv_ns": "bench", "eic_log_level": 2,
        "eic_log_dir": str(workdir / "eic-logs")}))
    os.environ["LMCACHE_CONFIG_FILE"] = str(config_file)
    config = LMCacheEngineConfig.from_file(str(config_file))
    metadata = LMCacheMetadata(model_name=MODEL, world_size=1, local_world_size=1, worker_id=0,
                               local_worker_id=0, kv_dtype=torch.bfloat16, kv_shape=KV_SHAPE)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    local = LocalCPUBackend(config, metadata)
    start = time.perf_counter()
    remote = RemoteBackend(config, metadata, loop, local)
    print(f"{label}: LMCache RemoteBackend construction (2048 warm-up probes): "
          f"{time.perf_counter() - start:.3f} s")

    def chunk_objects():
        objs = [local.allocate(metadata.get_shapes(), metadata.get_dtypes(), MemoryFormat.KV_2LTD)
                for _ in range(chunks)]
        for i, o in enumerate(objs):
            o.tensor.view(torch.int16).fill_(i)
        return objs

    def lmcache_put(r):
        keys = [CacheEngineKey(MODEL, 1, 0, i, torch.bfloat16) for i in range(chunks)]
        objs = chunk_objects()  # batched_put takes (and drops) their references
        asyncio.run_coroutine_threadsafe(remote.connection.batched_put(keys, objs),
                                         loop).result(300)

    def lmcache_get(r):
        keys = [CacheEngineKey(MODEL, 1, 0, i, torch.bfloat16) for i in range(chunks)]
        got = remote.batched_get_blocking(keys)
        assert all(g is not None for g in got), "LMCache missed a chunk it wrote"
        for g in got:
            g.ref_count_down()

    put_s = best(rounds, lmcache_put)
    get_s = best(rounds, lmcache_get)

    client = kvport.Client(node.endpoint, transport_type=kvport.TransportType.RDMA)
    tensors = [torch.full((chunk_bytes // 2,), i, dtype=torch.int16) for i in range(chunks)]
    buffers = [torch.empty_like(t).fill_(0) for t in tensors]  # touched, as LMCache's pool is

    def client_put(r):
        result = client.mset([f"c{i}" for i in range(chunks)], tensors, ns="bench-client")
        assert all(c == kvport.KeyCode.SUCCESS for c in result.codes)

    def client_get(r):
        result = client.mget([f"c{i}" for i in range(chunks)], buffers, ns="bench-client")
        assert all(c == kvport.KeyCode.SUCCESS for c in result.codes)

    cput_s = best(rounds, client_put)
    cget_s = best(rounds, client_get)
    total = chunks * chunk_bytes
    print(f"{label}: {chunks} chunks x {chunk_bytes >> 20} MiB, transport {client.transport}")
    for name, lm, kv in (("put", put_s, cput_s), ("get", get_s, cget_s)):
        print(f"{label}: {name}: LMCache {total / lm / GB:.2f} GB/s ({lm:.3f} s), "
              f"kvport.Client {total / kv / GB:.2f} GB/s ({kv:.3f} s), "
              f"LMCache/client {kv / lm:.2f}x")
    stop_loop(loop, thread)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--transport", choices=("shm", "tcp"),
                        help="one transport (default: each, in a process of its own, so that "
                             "one's memory is gone before the other's starts)")
    args = parser.parse_args()
    if args.transport is None:
        for transport in ("shm", "tcp"):
            subprocess.run([sys.executable, __file__, "--chunks", str(args.chunks), "--rounds",
                            str(args.rounds), "--transport", transport], check=True)
        return 0
    chunk_bytes = 2 * KV_SHAPE[0] * KV_SHAPE[2] * KV_SHAPE[3] * KV_SHAPE[4] * 2
    # LMCache's chunks and the client's, and room for one batch overwriting itself (each round
    # writes the same keys again: a value is replaced once its successor is stored).
    capacity = 3 * args.chunks * (chunk_bytes + (1 << 20))
    with tempfile.TemporaryDirectory() as tmp:
        node = Node(Path(tmp), shared_memory=args.transport == "shm",
                    capacity=str(capacity)).start()
        try:
            bench(node, Path(tmp), args.chunks, args.rounds)
        finally:
            node.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
