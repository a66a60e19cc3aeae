# SPDX-License-Identifier: Apache-2.0
"""`eic` and `kvport.Client` from Python against the C++ client, same node, same workload, one run.

    make python && PYTHONPATH=build/python python3 python/bench/eic_bench.py

Starts `kvport serve` (build/bin/kvport, or $KVPORT_BIN), then alternates rounds of
  - Python: eic.Client mset / mget of --batch values of --value-size each, per call, and the
            same through kvport.Client (its own connections, the same count);
  - C++:    `kvport bench --url ... --ops put,get` with the same batch, value size, calls,
            connections (2, eic's default) and one calling thread;
and prints GB/s of each and the ratio Python / C++ per op (the target is >= 0.95x: Python must
add nothing but the call). Values are preallocated buffers, written zero-copy both ways.
Then times LMCache's construction-time warm-up through eic: 2048 single-key mexists of
30 + 29 x len(ns) character keys with the ExistOption's ns never assigned."""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

import eic
import kvport


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--value-size", default="8MiB")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--count", type=int, default=16, help="batched calls per op per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", action="store_true")
    return p.parse_args()


def kvport_bin() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    return os.environ.get("KVPORT_BIN") or os.path.join(here, "..", "..", "build", "bin", "kvport")


def python_round(client, size: int, batch: int, count: int, values, outs):
    keys = eic.StringVector()
    for i in range(batch):
        keys.append(f"py-{i}")
    put = eic.IOBuffers()
    get = eic.IOBuffers()
    for v, o in zip(values, outs):
        put.append(ctypes.addressof(v), size, False)
        get.append(ctypes.addressof(o), size, False)
    set_option, get_option = eic.SetOption(), eic.GetOption()
    set_option.ns = get_option.ns = "pybench"
    start = time.perf_counter()
    for _ in range(count):
        status, _ = client.mset(keys, put, set_option)
        assert status == eic.StatusCode.SUCCESS, status
    put_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(count):
        status, _, _ = client.mget(keys, get_option, get)
        assert status == eic.StatusCode.SUCCESS, status
    get_s = time.perf_counter() - start
    total = size * batch * count
    return total / put_s / 1e9, total / get_s / 1e9


def kvport_round(client, size: int, batch: int, count: int, values, outs):
    keys = [f"kv-{i}" for i in range(batch)]
    put = [(ctypes.addressof(v), size) for v in values]
    get = [(ctypes.addressof(o), size) for o in outs]
    start = time.perf_counter()
    for _ in range(count):
        assert client.mset(keys, put, ns="pybench").status == kvport.BatchCode.SUCCESS
    put_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(count):
        assert client.mget(keys, get, ns="pybench").status == kvport.BatchCode.SUCCESS
    get_s = time.perf_counter() - start
    total = size * batch * count
    return total / put_s / 1e9, total / get_s / 1e9


def lmcache_warmup(client, ns: str) -> float:
    import random
    keys = [ns.join(random.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", k=30))
            for _ in range(2048)]
    start = time.perf_counter()
    for key in keys:
        one = eic.StringVector()
        one.append(key)
        client.mexist(one, eic.ExistOption())
    return time.perf_counter() - start


def cpp_round(binary: str, url: str, value_size: str, batch: int, count: int, warmup: int):
    # --warmup: untimed puts first, as the Python side's warm-up round (the node's arena pages
    # and the bench's buffers are then committed, as the Python side's are).
    out = subprocess.run(
        [binary, "bench", "--url", url, "--value-size", value_size, "--batch", str(batch),
         "--count", str(count), "--connections", "2", "--threads", "1", "--ops", "put,get",
         "--warmup", str(warmup), "--no-socket", "--no-redis", "--json", "--seconds", "600"],
        capture_output=True, text=True, check=True, timeout=900)
    report = json.loads(out.stdout)
    rates = {p["op"]: p["gb_per_s"] for p in report["phases"] if p["system"] == "kvport"}
    return rates["put"], rates["get"]


def main():
    args = parse_args()
    size = kvport.parse_size(args.value_size)
    binary = kvport_bin()
    capacity = size * args.batch * 4 + (64 << 20)
    serve = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--capacity",
                              str(capacity)], stderr=subprocess.PIPE, text=True)
    try:
        address = None
        for line in serve.stderr:
            found = re.search(r"listening on (\S+)", line)
            if found:
                address = found.group(1)
                break
        assert address, "kvport serve did not start"
        client = eic.Client()
        option = eic.InitOption()
        option.transport_type = eic.TransportType(1)
        assert client.init(None, address, option) == 0
        values = [(ctypes.c_char * size)() for _ in range(args.batch)]
        outs = [(ctypes.c_char * size)() for _ in range(args.batch)]
        for v in values + outs:
            ctypes.memset(v, 0x5A, size)  # commit the pages before timing
        native = kvport.Client(address, transport_type=1)
        python_round(client, size, args.batch, 2, values, outs)  # warm-up, untimed
        kvport_round(native, size, args.batch, 2, values, outs)
        warmup_seconds = lmcache_warmup(client, "kvport_ns")
        results = {"python_put": [], "python_get": [], "kvport_put": [], "kvport_get": [],
                   "cpp_put": [], "cpp_get": []}
        for _ in range(args.rounds):
            put, get = python_round(client, size, args.batch, args.count, values, outs)
            results["python_put"].append(put)
            results["python_get"].append(get)
            put, get = kvport_round(native, size, args.batch, args.count, values, outs)
            results["kvport_put"].append(put)
            results["kvport_get"].append(get)
            put, get = cpp_round(binary, "eic://" + address, args.value_size, args.batch,
                                 args.count, 2 * size * args.batch)
            results["cpp_put"].append(put)
            results["cpp_get"].append(get)
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.communicate(timeout=60)
    median = {k: statistics.median(v) for k, v in results.items()}
    summary = {
        "workload": f"{args.batch} x {args.value_size} per call, {args.count} calls per op, "
                    f"{args.rounds} rounds, 2 connections, 1 calling thread",
        "rounds": results, "median": median,
        "ratio_put": median["python_put"] / median["cpp_put"],
        "ratio_get": median["python_get"] / median["cpp_get"],
        "kvport_ratio_put": median["kvport_put"] / median["cpp_put"],
        "kvport_ratio_get": median["kvport_get"] / median["cpp_get"],
        "lmcache_warmup_seconds": warmup_seconds,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(summary["workload"])
    for op in ("put", "get"):
        py = ", ".join(f"{x:.2f}" for x in results[f"python_{op}"])
        kv = ", ".join(f"{x:.2f}" for x in results[f"kvport_{op}"])
        cpp = ", ".join(f"{x:.2f}" for x in results[f"cpp_{op}"])
        print(f"{op}: python eic {py} GB/s | python kvport.Client {kv} GB/s | C++ client {cpp} "
              f"GB/s | median ratios eic {summary['ratio_' + op]:.2f}x, kvport.Client "
              f"{summary['kvport_ratio_' + op]:.2f}x")
    print(f"LMCache warm-up (2048 single-key mexists, ns unassigned): {warmup_seconds:.3f} s")


if __name__ == "__main__":
    sys.exit(main())
