# SPDX-License-Identifier: Apache-2.0
"""What the peer drivers of `kvport bench` share (mooncake_bench.py, lmcache_server_bench.py):
loopback ports, and timing a phase of calls on several threads the way kvport bench does."""

import socket
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.05)
    return False


def run_phase(op, workers, args, calls_per_worker, call):
    """Runs `op` on every worker's thread at once, up to calls_per_worker calls each and at most
    args.seconds: call(worker, op, index) makes one call and returns its failed keys. Returns the
    phase as the drivers print it (keys: args.exists_batch per exists call, else args.batch)."""
    latencies = [[] for _ in workers]
    failed = [0] * len(workers)
    done = [0] * len(workers)
    barrier = threading.Barrier(len(workers) + 1)
    stop_at = [0.0]

    def body(index, worker):
        barrier.wait()
        for n in range(calls_per_worker):
            if time.monotonic() > stop_at[0]:
                break
            start = time.perf_counter_ns()
            bad = call(worker, op, n)
            latencies[index].append(time.perf_counter_ns() - start)
            failed[index] += bad
            done[index] += 1

    threads = [threading.Thread(target=body, args=(i, w)) for i, w in enumerate(workers)]
    for t in threads:
        t.start()
    stop_at[0] = time.monotonic() + args.seconds
    start = time.perf_counter()
    barrier.wait()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    calls = sum(done)
    keys = calls * (args.exists_batch if op == "exists" else args.batch)
    return {"op": op, "calls": calls, "keys": keys,
            "bytes": keys * args.value_bytes if op != "exists" else 0,
            "failed_keys": sum(failed), "seconds": seconds,
            "latency_ns": sorted(x for per in latencies for x in per)}
