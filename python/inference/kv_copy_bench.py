# SPDX-License-Identifier: Apache-2.0
"""What kvport's CPU KV copy (kvport.lmcache_cpu) costs: a store, vLLM's CPU cache -> LMCache
chunks (from_gpu), and a load, chunks -> vLLM's cache (to_gpu), each with the strided copies of
whole blocks against the path a layout that is no strided view takes (a store: an element
gather through the learnt layout; a load: vLLM's own kernel, cpu_attn_reshape_and_cache), and
memcpy of the same bytes as the limit, in one run (docs/performance.md, "vLLM on a CPU: the KV
copy"). Run from the repository root, after `make inference`:

    build/inference/venv/bin/python python/inference/kv_copy_bench.py

The cache is the shape of ttft_bench.py's model (8 layers, 8 KV heads of 64, bfloat16) in
blocks of 128 tokens (vLLM's CPU default), written by vLLM's own kernel; --tokens tokens are
copied in chunks of 256 (LMCache's chunk_size in the inference lane) from and to whole blocks
in a shuffled order. Prints seconds and GiB/s, the median of --repeats, each path in turn."""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from kvport import lmcache_cpu
from lmcache.v1.memory_allocators.ad_hoc_memory_allocator import AdHocMemoryAllocator
from lmcache.v1.memory_management import MemoryFormat

CHUNK = 256


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--head-size", type=int, default=64)
    parser.add_argument("--block-size", type=int, default=128)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    heads, size, block = args.kv_heads, args.head_size, args.block_size
    blocks = args.tokens // block
    layers = [torch.randn(blocks, heads, block, 2 * size).to(dtype) for _ in range(args.layers)]
    order = torch.randperm(blocks, generator=torch.Generator().manual_seed(0))
    slots = (order[:, None] * block + torch.arange(block)).flatten()
    copy = lmcache_cpu.VLLMCPUPagedCopy(args.layers, heads, size, dtype)
    chunk = AdHocMemoryAllocator("cpu").allocate(
        torch.Size([2, args.layers, CHUNK, heads * size]), dtype, MemoryFormat.KV_2LTD)
    copy.from_gpu(chunk, 0, CHUNK, kvcaches=layers, slot_mapping=slots)  # learns the layout
    strided = copy.strided[block]
    nbytes = args.tokens * args.layers * 2 * heads * size * chunk.tensor.element_size()
    flat = [layer.view(-1) for layer in layers]
    target = torch.empty(nbytes // chunk.tensor.element_size(), dtype=dtype)

    def path(layout, direction):
        def run() -> None:
            copy.strided[block] = layout
            for start in range(0, args.tokens, CHUNK):
                direction(chunk, start, start + CHUNK, kvcaches=layers, slot_mapping=slots)
        return run

    def memcpy() -> None:
        torch.cat(flat, out=target)

    paths = {"store: strided copies": path(strided, copy.from_gpu),
             "store: element gather": path(None, copy.from_gpu),
             "load: strided copies": path(strided, copy.to_gpu),
             "load: vLLM's kernel": path(None, copy.to_gpu),
             "memcpy (limit)": memcpy}
    times = {name: [] for name in paths}
    for _ in range(args.repeats):
        for name, path in paths.items():
            start = time.perf_counter()
            path()
            times[name].append(time.perf_counter() - start)
    print(f"{args.tokens} tokens, {args.layers} layers, {heads} KV heads of {size}, "
          f"{args.dtype}, blocks of {block}: {nbytes / 2**20:.0f} MiB; layout strided: "
          f"{strided is not None}; median of {args.repeats}")
    limit = statistics.median(times["memcpy (limit)"])
    for name, seconds in times.items():
        median = statistics.median(seconds)
        print(f"  {name:22} {median * 1e3:8.1f} ms  {nbytes / median / 2**30:6.2f} GiB/s  "
              f"{limit / median:5.2f} of memcpy")
    chunk.ref_count_down()  # back to LMCache's allocator, as LMCache frees a chunk it is done with


if __name__ == "__main__":
    main()
