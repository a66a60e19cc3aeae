# SPDX-License-Identifier: Apache-2.0
"""Mooncake Store in `kvport bench`'s shapes: the peer `kvport bench --peer mooncake` runs.

Starts the released `mooncake_master` (with its HTTP metadata server) on loopback, a holder
process that mounts the store's memory (a segment of --segment-bytes, as a node contributes
its DRAM), and then drives Mooncake Store from this process the way it is fastest: every
thread has its own client, registers its buffers once (register_buffer) and moves each batch
with one call, batch_upsert_from / batch_get_into / batch_is_exist, over Mooncake's TCP
transport. Like kvport bench's threads, each writes and reads one batch of keys of its own every
call (a put overwrites them: upsert, since batch_put_from refuses a key that exists).
The segment lives in another process, as a node's memory does for kvport's clients, so the
numbers are a transfer and not a memcpy within one address space.

The exists phase asks --exists-batch keys per call, of those put. --warmup-bytes of untimed
puts (removed again) come first, so that the segment's pages have been written once.

Prints one JSON object on stdout: {"system": "mooncake", "version", "phases": [{"op", "calls",
"keys", "bytes", "failed_keys", "seconds", "latency_ns": [...]}], "note"}; a failure to start
is {"error": "..."} and exit status 1. Every get is checked against what was put (the first
and last 8 bytes of each value hold a mark of its key); a key that differs or fails is counted
in failed_keys.

Run by tools/kvport/bench (bench/peer_driver.cc) with the venv of `make peers`; by hand:
    build/peers/venv/bin/python python/peers/mooncake_bench.py --value-bytes 1048576 --batch 16
"""

import argparse
import ctypes
import os
import struct
import subprocess
import sys

import peer_phases


def setup(store, http_port, rpc_port, segment_bytes, buffer_bytes):
    rc = store.setup("127.0.0.1", f"http://127.0.0.1:{http_port}/metadata", segment_bytes,
                     buffer_bytes, "tcp", "", f"127.0.0.1:{rpc_port}")
    if rc != 0:
        raise RuntimeError(f"MooncakeDistributedStore.setup returned {rc}")


def hold(args):
    """The holder process: mounts the segment and keeps it until stdin closes."""
    from mooncake.store import MooncakeDistributedStore
    store = MooncakeDistributedStore()
    setup(store, args.http_port, args.rpc_port, args.segment_bytes, 16 << 20)
    print("ready", flush=True)
    sys.stdin.read()
    store.close()


class Worker:
    """One thread's client, its registered buffers and its keys: one batch, written and read by
    every call, as kvport bench's threads do."""

    def __init__(self, index, args, http_port, rpc_port):
        from mooncake.store import MooncakeDistributedStore
        self.index = index
        self.args = args
        self.store = MooncakeDistributedStore()
        setup(self.store, http_port, rpc_port, 0, 16 << 20)
        n = args.batch * args.value_bytes
        self.source = (ctypes.c_char * n)()
        self.sink = (ctypes.c_char * n)()
        for buf in (self.source, self.sink):
            if self.store.register_buffer(ctypes.addressof(buf), n) != 0:
                raise RuntimeError("register_buffer failed")
        base, out = ctypes.addressof(self.source), ctypes.addressof(self.sink)
        self.sources = [base + i * args.value_bytes for i in range(args.batch)]
        self.sinks = [out + i * args.value_bytes for i in range(args.batch)]
        self.sizes = [args.value_bytes] * args.batch
        self.keys = [f"mc-{index}-{i}" for i in range(args.batch)]
        self.marks = [struct.pack("<Q", index << 32 | i)[:min(8, args.value_bytes)]
                      for i in range(args.batch)]
        # Each value carries its key's mark in its first and last bytes: what a get checks.
        for address, mark in zip(self.sources, self.marks):
            ctypes.memmove(address, mark, len(mark))
            ctypes.memmove(address + args.value_bytes - len(mark), mark, len(mark))

    def exists_keys(self, call):
        # exists_batch of this thread's keys, going round them.
        first = call * self.args.exists_batch
        return [self.keys[(first + i) % len(self.keys)] for i in range(self.args.exists_batch)]

    def check(self):
        """Keys whose value read back is not the one written (and clears the marks read)."""
        bad = 0
        for address, mark in zip(self.sinks, self.marks):
            last = address + self.args.value_bytes - len(mark)
            if ctypes.string_at(address, len(mark)) != mark or ctypes.string_at(last, len(mark)) != mark:
                bad += 1
            ctypes.memset(address, 0, len(mark))
            ctypes.memset(last, 0, len(mark))
        return bad


def call(w, op, n):
    """One batched call of `op` by worker w; returns its failed keys."""
    if op == "put":
        # The same keys every call: an overwrite, which batch_put_from refuses for a key that
        # exists, hence upsert (kvport's MSET overwrites the same way).
        codes = w.store.batch_upsert_from(w.keys, w.sources, w.sizes)
        return sum(1 for c in codes if c != 0)
    if op == "get":
        got = w.store.batch_get_into(w.keys, w.sinks, w.sizes)
        return sum(1 for g in got if g != w.args.value_bytes) + w.check()
    found = w.store.batch_is_exist(w.exists_keys(n))
    return sum(1 for f in found if f != 1)


def warm(workers, args):
    # Untimed puts of warmup_bytes, then removed: the holder's segment has had its pages written
    # once, as kvport's node arena has before its timed phases.
    w = workers[0]
    calls = args.warmup_bytes // max(1, args.batch * args.value_bytes)
    for call in range(calls):
        w.store.batch_put_from([f"warm-{call}-{i}" for i in range(args.batch)], w.sources, w.sizes)
    if calls:
        w.store.remove_all(True)


def bench(args):
    import importlib.metadata
    bin_dir = os.path.dirname(sys.executable)
    master = os.path.join(bin_dir, "mooncake_master")
    if not os.access(master, os.X_OK):
        raise RuntimeError(f"{master} is missing: make peers installs Mooncake")
    rpc_port, http_port = peer_phases.free_port(), peer_phases.free_port()
    children = []
    try:
        children.append(subprocess.Popen(
            [master, f"--rpc_port={rpc_port}", "--enable_http_metadata_server=true",
             f"--http_metadata_server_port={http_port}", "--http_metadata_server_host=127.0.0.1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        if not (peer_phases.wait_for_port(rpc_port, 20) and peer_phases.wait_for_port(http_port, 20)):
            raise RuntimeError("mooncake_master did not start listening")
        holder = subprocess.Popen(
            [sys.executable, __file__, "--hold", f"--rpc-port={rpc_port}",
             f"--http-port={http_port}", f"--segment-bytes={args.segment_bytes}"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        children.append(holder)
        if holder.stdout.readline().strip() != "ready":
            raise RuntimeError("the holder process could not mount its segment")
        workers = [Worker(i, args, http_port, rpc_port) for i in range(args.threads)]
        warm(workers, args)
        phases = peer_phases.run_phases(workers, args, call)
        for w in workers:
            w.store.close()
        return {
            "system": "mooncake",
            "version": importlib.metadata.version("mooncake-transfer-engine-non-cuda"),
            "phases": phases,
            "note": "Mooncake Store over its TCP transport: batch_upsert_from / batch_get_into "
                    "/ batch_is_exist from registered buffers, a client per thread, the "
                    "segment in another process",
        }
    finally:
        for child in reversed(children):
            if child.stdin:
                child.stdin.close()
            child.terminate()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()


def main():
    p = peer_phases.shape_parser(__doc__.splitlines()[0])
    p.add_argument("--hold", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--rpc-port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--http-port", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.hold:
        hold(args)
        return 0
    return peer_phases.report(bench, args)


if __name__ == "__main__":
    sys.exit(main())
