# SPDX-License-Identifier: Apache-2.0
"""LMCache's own remote server in `kvport bench`'s shapes: the peer `kvport bench --peers
lmcache-server` runs.

Runs with the engines venv's Python (make engines: the pinned LMCache release). Starts LMCache's
server (`python -m lmcache.v1.server 127.0.0.1 PORT cpu`, what `remote_url: lm://HOST:PORT`
points at) and drives it with LMCache's own client connector, built as LMCache builds it for an
`lm://` remote_url (CreateConnector over a LocalCPUBackend): per thread an event loop and a
connector of its own (one vLLM worker's), chunks of the bench's value size allocated from
LMCache's CPU pool, and each call's batch of keys put, read back or probed the way LMCache's
remote backend does, one `put` / `get` / `exists` per chunk (the connector has no batched call;
its socket is one request at a time). An LMCache put is not acknowledged by the server: the
connector sends the chunk and returns, so a put phase measures how fast chunks are sent; the get
phase then reads every chunk back and checks it (its first and last bytes carry a mark of the
key), so a put the server lost is a failed get.

Value sizes are rounded down to a multiple of 512 bytes (a chunk of bf16 [1, 2, tokens, 1, 128]).
Prints one JSON object, as mooncake_bench.py does: {"system": "lmcache-server", "version",
"phases": [...], "note"}, or {"error": ...} and exit status 1.
"""

import asyncio
import os
import subprocess
import sys
import tempfile
import threading

import peer_phases


class Worker:
    """One LMCache worker's remote tier: its event loop, CPU pool and lm:// connector, and one
    batch of chunks of its own."""

    def __init__(self, index, args, url, config_file):
        import torch
        from lmcache.utils import CacheEngineKey
        from lmcache.v1.config import LMCacheEngineConfig
        from lmcache.v1.memory_management import MemoryFormat
        from lmcache.v1.metadata import LMCacheMetadata
        from lmcache.v1.storage_backend.connector import CreateConnector
        from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend

        self.index = index
        self.args = args
        config = LMCacheEngineConfig.from_file(config_file)
        metadata = LMCacheMetadata(model_name="kvport-bench", world_size=1, local_world_size=1,
                                   worker_id=index, local_worker_id=index,
                                   kv_dtype=torch.bfloat16,
                                   kv_shape=(1, 2, args.value_bytes // 512, 1, 128),
                                   chunk_size=args.value_bytes // 512)
        self.local = LocalCPUBackend(config, metadata)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.connector = CreateConnector(url, self.loop, self.local, config, metadata)
        self.keys = [CacheEngineKey("kvport-bench", 1, index, i, torch.bfloat16)
                     for i in range(args.batch)]
        self.chunks = []
        for i in range(args.batch):
            chunk = self.local.allocate(metadata.get_shapes(), metadata.get_dtypes(),
                                        MemoryFormat.KV_2LTD)
            if chunk is None:
                raise RuntimeError("LMCache's CPU pool is too small for one batch")
            if chunk.get_size() != args.value_bytes:  # what the phases count is what moves
                raise RuntimeError(f"LMCache made a chunk of {chunk.get_size()} bytes, not "
                                   f"{args.value_bytes}")
            data = chunk.raw_data[:chunk.get_size()]
            data.fill_(0)
            data[:8] = self.mark(i)
            data[-8:] = self.mark(i)
            self.chunks.append(chunk)

    def mark(self, i):
        import torch
        return torch.tensor(list((self.index << 32 | i).to_bytes(8, "little")),
                            dtype=torch.uint8)

    def run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(600)

    async def put_batch(self):
        for key, chunk in zip(self.keys, self.chunks):
            # A connector's put lets one reference go once the chunk is sent; LMCache's remote
            # backend takes one for it first. Without it the first put frees the chunk, and the
            # pool hands its memory to the chunks gets receive into.
            chunk.ref_count_up()
            await self.connector.put(key, chunk)

    async def get_batch(self):
        return [await self.connector.get(key) for key in self.keys]

    async def exists_batch(self, keys):
        return [await self.connector.exists(key) for key in keys]

    def check(self, got):
        import torch
        bad = 0
        for i, chunk in enumerate(got):
            if chunk is None:
                bad += 1
                continue
            data = chunk.raw_data[:chunk.get_size()]
            mark = self.mark(i)
            if not (torch.equal(data[:8], mark) and torch.equal(data[-8:], mark)):
                bad += 1
            chunk.ref_count_down()  # back to LMCache's pool, as its retrieve path does
        return bad


def call(w, op, n):
    """One call of `op` (a batch of chunks) by worker w; returns its failed keys."""
    if op == "put":
        w.run(w.put_batch())
        return 0
    if op == "get":
        return w.check(w.run(w.get_batch()))
    first = n * w.args.exists_batch
    keys = [w.keys[(first + i) % len(w.keys)] for i in range(w.args.exists_batch)]
    return sum(1 for found in w.run(w.exists_batch(keys)) if not found)


def bench(args):
    import importlib.metadata
    import yaml
    args.value_bytes -= args.value_bytes % 512
    if args.value_bytes == 0:
        raise RuntimeError("LMCache chunks here are multiples of 512 bytes; the value is smaller")
    port = peer_phases.free_port()
    server = subprocess.Popen([sys.executable, "-m", "lmcache.v1.server", "127.0.0.1", str(port),
                               "cpu"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not peer_phases.wait_for_port(port, 60):
            raise RuntimeError("LMCache's server did not start listening")
        with tempfile.TemporaryDirectory() as tmp:
            config_file = os.path.join(tmp, "lmcache.yaml")
            pool_gib = max(0.25, 3 * args.batch * args.value_bytes / 2**30)
            with open(config_file, "w") as f:
                yaml.safe_dump({"chunk_size": args.value_bytes // 512, "local_cpu": False,
                                "max_local_cpu_size": pool_gib,
                                "remote_url": f"lm://127.0.0.1:{port}",
                                "remote_serde": "naive"}, f)
            workers = [Worker(i, args, f"lm://127.0.0.1:{port}", config_file)
                       for i in range(args.threads)]
        phases = peer_phases.run_phases(workers, args, call)
        return {"system": "lmcache-server", "version": importlib.metadata.version("lmcache"),
                "phases": phases,
                "note": "LMCache's server (lm://) driven by LMCache's own connector, a worker "
                        "per thread, one put/get/exists per chunk; puts are not acknowledged"}
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


def main():
    # --warmup-bytes and --segment-bytes are unused: LMCache's server keeps each chunk in a Python
    # object of its own (no pages to warm) and has no bound on its memory.
    args = peer_phases.shape_parser(__doc__.splitlines()[0]).parse_args()
    code = peer_phases.report(bench, args)
    # LMCache's connectors leave non-daemon threads behind (its own close() does not return,
    # docs/python.md): leave without waiting for them.
    os._exit(code)


if __name__ == "__main__":
    main()
