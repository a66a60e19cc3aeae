# SPDX-License-Identifier: Apache-2.0
"""SGLang HiCache's L3 page path through kvport: kvport's own backend against SGLang's `eic`
backend, on the same pages, one run.

    build/engines/venv/bin/python python/engines/bench_sglang_hicache.py [--pages 32] [--rounds 3]

For each transport (a node offering shared memory, and one without a Unix socket, so TCP), one
`kvport serve` and, on it, SGLang 0.5.23's two storages built as `--hicache-storage-backend eic`
and `--hicache-storage-backend dynamic` build them (python/engines/tests/test_sglang.py and
test_sglang_hicache.py say how), both over one SGLang MHA host pool in the `page_first` layout,
where both move pages in place (EICStorage: each page as its K and its V half; HiCacheKvport:
docs/python.md, "SGLang HiCache"). Each stores the same N pages with `batch_set_v1` (the call
HiCacheController makes, one batch of them) and loads them into N other pages with
`batch_get_v1`; the loaded bytes are checked against the stored ones. Pages are Llama-3-8B's
(32 layers, 8 KV heads of 128, bf16) for 64 tokens: 8 MiB. Each put round first deletes the
pages the previous one stored (untimed), as bench_lmcache.py does, so that every round writes
into arena pages an earlier one touched. Each side's best of --rounds; prints one line per
number (docs/performance.md, "Engines: SGLang HiCache's kvport backend against its eic
backend")."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))

import kvport  # noqa: E402
import test_sglang  # noqa: E402
import test_sglang_hicache  # noqa: E402
from bench_lmcache import GB, best, on_node, parse_args  # noqa: E402
from conftest import Node  # noqa: E402

from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool  # noqa: E402
from sglang.srt.mem_cache.pool_host.base import host_memory_budget_scope  # noqa: E402
from sglang.srt.mem_cache.pool_host.mha import MHATokenToKVPoolHost  # noqa: E402

LAYERS, HEADS, HEAD_DIM, PAGE = 32, 8, 128, 64  # Llama-3-8B's KV, SGLang pages of 64 tokens
PAGE_BYTES = 2 * LAYERS * HEADS * HEAD_DIM * PAGE * 2


def host_pool(pages: int) -> MHATokenToKVPoolHost:
    """SGLang's page_first host KV pool over a CPU device pool of `pages` pages (the host pool,
    at --hicache-ratio 2, holds twice that: the pages stored and the pages loaded into)."""
    device = MHATokenToKVPool(size=pages * PAGE, page_size=PAGE, dtype=torch.bfloat16,
                              head_num=HEADS, head_dim=HEAD_DIM, layer_num=LAYERS, device="cpu",
                              enable_memory_saver=False, start_layer=0, end_layer=LAYERS)
    with host_memory_budget_scope(4 * pages * PAGE_BYTES):
        return MHATokenToKVPoolHost(
            device.get_device_pool_infos()[0].buffer_info, 2.0, 0, PAGE, "page_first",
            pin_memory=False, allocator_type="default", device_capacity_tokens=device.size,
            start_layer=0, end_layer=LAYERS, write_back_staging=device.hicache_write_back_staging)


def bench_storage(name: str, storage, pool: MHATokenToKVPoolHost, namespace: str,
                  eraser: kvport.Client, pages: int, rounds: int, label: str) -> None:
    sources = torch.arange(0, pages * PAGE, dtype=torch.int64)
    targets = torch.arange(pages * PAGE, 2 * pages * PAGE, dtype=torch.int64)
    keys = test_sglang.page_keys(name, pages)
    generator = torch.Generator().manual_seed(pages)
    for i in range(pages):
        page = pool.get_data_page(int(sources[i * PAGE]), flat=False)
        page.copy_(torch.randn(page.shape, generator=generator).to(page.dtype))

    def erase():
        stored, _ = eraser.list(ns=namespace, max_keys=4096)
        if stored:
            assert eraser.mdel(stored, ns=namespace).ok

    def store(_):
        assert all(storage.batch_set_v1(keys, sources)), f"{name}: a page was not stored"

    def load(_):
        assert all(storage.batch_get_v1(keys, targets)), f"{name}: a page was not loaded"

    put_s = best(rounds, store, erase)
    get_s = best(rounds, load)
    for i in range(pages):
        assert torch.equal(pool.get_data_page(int(sources[i * PAGE]), flat=False),
                           pool.get_data_page(int(targets[i * PAGE]), flat=False)), \
            f"{name}: a loaded page differs from the stored one"
    total = pages * PAGE_BYTES
    for op, seconds in (("put", put_s), ("get", get_s)):
        print(f"{label}: {op}: {name} {total / seconds / GB:.2f} GB/s ({seconds:.3f} s)")


def main() -> int:
    args = parse_args(__file__, __doc__, "pages", 32, 3)
    if args is None:
        return 0
    capacity = 2 * args.pages * (PAGE_BYTES + (1 << 20)) + (64 << 20)  # both backends' pages

    def run(node: Node, workdir: Path) -> None:
        pool = host_pool(args.pages)
        with kvport.Client(node.endpoint) as eraser:
            eic_config = test_sglang.eic_yaml(workdir / "remote-eic.yaml", node.url,
                                              "bench-sglang-eic", "page_first")
            eic = test_sglang.create_storage(eic_config, pool)
            bench_storage("eic (EICStorage)", eic, pool, "bench-sglang-eic", eraser,
                          args.pages, args.rounds, args.transport)
            native = test_sglang_hicache.create_storage(node.endpoint, pool,
                                                        namespace="bench-sglang-kvport")
            bench_storage("kvport (HiCacheKvport)", native, pool, "bench-sglang-kvport", eraser,
                          args.pages, args.rounds, args.transport)
            native.close()

    on_node(args.transport, capacity, run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
