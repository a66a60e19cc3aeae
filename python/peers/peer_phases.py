# SPDX-License-Identifier: Apache-2.0
"""What the peer drivers of `kvport bench` share (mooncake_bench.py, lmcache_server_bench.py):
the shape options kvport bench passes, loopback ports, and timing phases of calls on several
threads the way kvport bench does."""

import argparse
import json
import socket
import threading
import time


def shape_parser(description):
    """An argument parser with the shape options bench/peer_driver.cc passes every driver."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--value-bytes", type=int, default=1 << 20)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--count", type=int, default=64, help="batched calls per phase, all threads")
    p.add_argument("--seconds", type=float, default=8, help="at most this long per phase")
    p.add_argument("--ops", default="put,get,exists")
    p.add_argument("--exists-batch", type=int, default=1024)
    p.add_argument("--exists-count", type=int, default=1000)
    p.add_argument("--warmup-bytes", type=int, default=0,
                   help="untimed puts first, where the peer has memory pages to warm")
    p.add_argument("--segment-bytes", type=int, default=1 << 30,
                   help="the store's memory, where the peer's server takes such a bound")
    return p


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


def run_phases(workers, args, call):
    """Every phase of args.ops in order (call as for run_phase). Get and exists read what put
    wrote: without a put phase, each worker puts its batch once first, untimed."""
    ops = args.ops.split(",")
    if "put" not in ops:
        for w in workers:
            call(w, "put", 0)
    return [run_phase(op, workers, args,
                      max(1, (args.exists_count if op == "exists" else args.count) // args.threads),
                      call)
            for op in ops]


def report(bench, args):
    """Prints bench(args)'s result as the one JSON object bench/peer_driver.cc reads, or
    {"error": ...} (every failure is the peer's reason to be skipped); returns the exit status."""
    try:
        print(json.dumps(bench(args)), flush=True)
        return 0
    except Exception as e:
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
        return 1
