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
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))

from conftest import Node  # noqa: E402
from test_lmcache import LMCache  # noqa: E402

from lmcache.utils import CacheEngineKey  # noqa: E402
from lmcache.v1.memory_management import MemoryFormat  # noqa: E402
from lmcache.v1.metadata import LMCacheMetadata  # noqa: E402

import kvport  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402

MODEL = "bench/llama-3-8b"
KV_SHAPE = (32, 2, 256, 8, 128)
GB = 1e9


def best(rounds: int, step, prepare=lambda: None) -> float:
    """The fastest of `rounds` calls of step(prepare()), prepare() untimed."""
    times = []
    for _ in range(rounds):
        arg = prepare()
        start = time.perf_counter()
        step(arg)
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
    md = LMCacheMetadata(model_name=MODEL, world_size=1, local_world_size=1, worker_id=0,
                         local_worker_id=0, kv_dtype=torch.bfloat16, kv_shape=KV_SHAPE)
    lmcache = LMCache(config_file, pytest.MonkeyPatch(), md)
    print(f"{label}: LMCache RemoteBackend construction (2048 warm-up probes): "
          f"{lmcache.construct_seconds:.3f} s")
    keys = [CacheEngineKey(MODEL, 1, 0, i, torch.bfloat16) for i in range(chunks)]

    # Each put round first deletes the previous round's chunks (untimed), so that every round
    # writes into arena pages an earlier round touched: a put into pages never touched pays
    # their first-touch faults, which a long-running node has long paid.
    eraser = kvport.Client(node.endpoint)

    def chunk_objects():
        """LMCache memory objects of the chunks (filled, untimed); batched_put takes (and
        drops) their references."""
        eraser.mdel([k.to_string() for k in keys], ns="bench")
        objs = [lmcache.local.allocate(md.get_shapes(), md.get_dtypes(), MemoryFormat.KV_2LTD)
                for _ in range(chunks)]
        for i, obj in enumerate(objs):
            obj.raw_data[:obj.get_size()].fill_(i)
        return objs

    def lmcache_put(objs):
        lmcache.run(lmcache.remote.connection.batched_put(keys, objs), 300)

    def lmcache_get(_):
        got = lmcache.remote.batched_get_blocking(keys)
        assert all(g is not None for g in got), "LMCache missed a chunk it wrote"
        for g in got:
            g.ref_count_down()

    put_s = best(rounds, lmcache_put, chunk_objects)
    get_s = best(rounds, lmcache_get)

    client = kvport.Client(node.endpoint, transport_type=kvport.TransportType.RDMA)
    tensors = [torch.full((chunk_bytes // 2,), i, dtype=torch.int16) for i in range(chunks)]
    buffers = [torch.empty_like(t).fill_(0) for t in tensors]  # touched, as LMCache's pool is

    client_keys = [f"c{i}" for i in range(chunks)]

    def client_put(_):
        result = client.mset(client_keys, tensors, ns="bench-client")
        assert all(c == kvport.KeyCode.SUCCESS for c in result.codes)

    def client_get(_):
        result = client.mget(client_keys, buffers, ns="bench-client")
        assert all(c == kvport.KeyCode.SUCCESS for c in result.codes)

    cput_s = best(rounds, client_put, lambda: client.mdel(client_keys, ns="bench-client"))
    cget_s = best(rounds, client_get)
    total = chunks * chunk_bytes
    print(f"{label}: {chunks} chunks x {chunk_bytes >> 20} MiB, transport {client.transport}")
    for name, lm, kv in (("put", put_s, cput_s), ("get", get_s, cget_s)):
        print(f"{label}: {name}: LMCache {total / lm / GB:.2f} GB/s ({lm:.3f} s), "
              f"kvport.Client {total / kv / GB:.2f} GB/s ({kv:.3f} s), "
              f"LMCache/client {kv / lm:.2f}x")
    lmcache.close()


def parse_args(script: str, doc: str, batch: str, batch_default: int,
               rounds_default: int) -> Optional[argparse.Namespace]:
    """The engine benches' flags: --BATCH (how many chunks or pages a batch holds), --rounds
    and --transport. Without --transport, runs `script` once per transport, each in a process
    of its own (so that one's memory is gone before the other's starts), and returns None."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument(f"--{batch}", type=int, default=batch_default)
    parser.add_argument("--rounds", type=int, default=rounds_default)
    parser.add_argument("--transport", choices=("shm", "tcp"),
                        help="one transport (default: each, in a process of its own)")
    args = parser.parse_args()
    if args.transport is not None:
        return args
    for transport in ("shm", "tcp"):
        subprocess.run([sys.executable, script, f"--{batch}", str(getattr(args, batch)),
                        "--rounds", str(args.rounds), "--transport", transport], check=True)
    return None


def on_node(transport: str, capacity: int, run: Callable[[Node, Path], None]) -> None:
    """run(node, workdir) against a `kvport serve` of its own (shm: one offering shared memory;
    tcp: one without a Unix socket) in a temporary folder, then prints how long it took."""
    with tempfile.TemporaryDirectory() as tmp:
        node = Node(Path(tmp), shared_memory=transport == "shm", capacity=str(capacity)).start()
        try:
            start = time.perf_counter()
            run(node, Path(tmp))
            print(f"{transport}: run took {time.perf_counter() - start:.1f} s")
        finally:
            node.stop()


def main() -> int:
    args = parse_args(__file__, __doc__, "chunks", 64, 3)
    if args is None:
        return 0
    chunk_bytes = 2 * KV_SHAPE[0] * KV_SHAPE[2] * KV_SHAPE[3] * KV_SHAPE[4] * 2
    # LMCache's chunks and the client's, with room to spare.
    capacity = 3 * args.chunks * (chunk_bytes + (1 << 20))
    on_node(args.transport, capacity,
            lambda node, workdir: bench(node, workdir, args.chunks, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
