# SPDX-License-Identifier: Apache-2.0
"""Released SGLang (python/engines/requirements.txt) with kvport's own HiCache backend,
kvport.sglang_hicache.HiCacheKvport, against `kvport serve`.

The storage is built the way `--hicache-storage-backend dynamic` builds it: SGLang's
`StorageBackendFactory.create_backend("dynamic", HiCacheStorageConfig, host_pool)` with the
extra config naming the module and class, then the calls HybridCacheController's
attach_storage_backend makes: `register_mem_pool_host(kv pool)`, `register_mem_host_pool_v2`
for each pool of the host pool group, `on_host_pools_registered()`. The config has the fields
HiCacheController._generate_storage_config fills for one rank (TP 1 or 2, no PP, CP or DCP).

The host pools are SGLang's own, over SGLang's device pools on the CPU: MHATokenToKVPoolHost
(4 layers, 8 KV heads of 64, bf16, pages of 16 tokens: 64 KiB K and 64 KiB V a page) and
MLATokenToKVPoolHost (4 layers, kv_lora_rank 64 + rope 16, bf16: 10 KiB a page), each in the
`page_first` and `page_first_direct` layouts, and a MambaPoolHost (page_first; 2 layers, an
fp32 temporal state of 16x64 and a bf16 conv state of 3x128 per layer: 8 KiB + 1.5 KiB a
slot) as the sidecar pool of a hybrid model; and a DSA model's pools (dsa_pools) for the
indexer. One argument differs from SGLang's builders: `pin_memory=False` (pinning needs a
CUDA driver; the pool is host memory either way); and the pools are built inside SGLang's
host_memory_budget_scope (POOL_BUDGET).

The calls follow HybridCacheController's order: a page's sidecars through batch_set_v2, then
its KV through batch_set_v1; hits through batch_exists_v2 with each pool's PoolHitPolicy;
loads through batch_get_v1, then the sidecars through batch_get_v2. Monkeypatched: nothing."""

from __future__ import annotations

import ctypes
import hashlib
from typing import List

import pytest
import torch

import kvport
from kvport.sglang_hicache import HiCacheKvport
from sglang.srt.mem_cache.device_pool_info import MambaStateBufferInfo
from sglang.srt.mem_cache.hicache_storage import (HiCacheStorage, HiCacheStorageConfig,
                                                  PoolHitPolicy, PoolName, PoolTransfer)
from sglang.srt.mem_cache.memory_pool import (DSATokenToKVPool, MHATokenToKVPool,
                                              MLATokenToKVPool)
from sglang.srt.mem_cache.pool_host.base import host_memory_budget_scope
from sglang.srt.mem_cache.pool_host.dsa import DSAIndexerPoolHost, make_dsa_indexer_pool_decl
from sglang.srt.mem_cache.pool_host.mamba import MambaPoolHost
from sglang.srt.mem_cache.pool_host.mha import MHATokenToKVPoolHost
from sglang.srt.mem_cache.pool_host.mla import MLATokenToKVPoolHost
from sglang.srt.mem_cache.storage.backend_factory import StorageBackendFactory
from sglang.srt.runtime_context import get_parallel

ENGINE = "sglang"
BACKEND = "HiCacheKvport: "  # the engine table's rows of this backend, beside EICStorage's
MODEL = "kvport-test/hybrid-4l"
LAYERS, HEADS, HEAD_DIM, PAGE = 4, 8, 64, 16
DEVICE_TOKENS = 512
MAMBA_SLOTS = 64
LAYOUTS = ["page_first", "page_first_direct"]
MODELS = ["mha", "mla"]


# --- SGLang's objects --------------------------------------------------------------------------

# The host RAM the test's pools are booked against (SGLang's host_memory_budget_scope), so
# their construction does not depend on what the machine has free beyond SGLang's 10 GiB
# reserve at that moment; each pool takes a few MiB.
POOL_BUDGET = 256 << 20


def kv_pool(model: str, layout: str):
    """SGLang's host KV pool over its CPU device pool, as build_kv_host_pool builds it (module
    doc)."""
    with host_memory_budget_scope(POOL_BUDGET):
        return _kv_pool(model, layout)


def _kv_pool(model: str, layout: str):
    if model == "mha":
        device = MHATokenToKVPool(size=DEVICE_TOKENS, page_size=PAGE, dtype=torch.bfloat16,
                                  head_num=HEADS, head_dim=HEAD_DIM, layer_num=LAYERS,
                                  device="cpu", enable_memory_saver=False, start_layer=0,
                                  end_layer=LAYERS)
        return MHATokenToKVPoolHost(
            device.get_device_pool_infos()[0].buffer_info, 2.0, 0, PAGE, layout,
            pin_memory=False, allocator_type="default", device_capacity_tokens=device.size,
            start_layer=0, end_layer=LAYERS, write_back_staging=device.hicache_write_back_staging)
    device = MLATokenToKVPool(size=DEVICE_TOKENS, page_size=PAGE, dtype=torch.bfloat16,
                              kv_lora_rank=64, qk_rope_head_dim=16, layer_num=LAYERS,
                              device="cpu", enable_memory_saver=False, start_layer=0,
                              end_layer=LAYERS)
    return MLATokenToKVPoolHost(device.get_device_pool_infos()[0].buffer_info, 2.0, 0, PAGE,
                                layout, pin_memory=False, device_capacity_tokens=device.size,
                                start_layer=0, end_layer=LAYERS, target_layer_num=LAYERS)


def mamba_pool() -> MambaPoolHost:
    """SGLang's host Mamba state pool over device state tensors ([layer, slot, ...])."""
    info = MambaStateBufferInfo(
        temporal=torch.zeros(2, MAMBA_SLOTS, 16, 64, dtype=torch.float32),
        conv=(torch.zeros(2, MAMBA_SLOTS, 3, 128, dtype=torch.bfloat16),))
    with host_memory_budget_scope(POOL_BUDGET):
        return MambaPoolHost(info, 2.0, 0, device_capacity=MAMBA_SLOTS, pin_memory=False,
                             layout="page_first")


def storage_config(endpoint: str, kv, namespace: str, model: str = MODEL, tp_rank: int = 0,
                   tp_size: int = 1, **extra) -> HiCacheStorageConfig:
    """HiCacheController._generate_storage_config's config of one rank, with the extra config
    `--hicache-storage-backend-extra-config` gives (docs/python.md, "SGLang HiCache")."""
    return HiCacheStorageConfig(
        tp_rank=tp_rank, tp_size=tp_size, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
        is_mla_model=isinstance(kv, MLATokenToKVPoolHost), enable_storage_metrics=False,
        is_page_first_layout=kv.layout.startswith("page_first"), model_name=model,
        extra_config={"backend_name": "kvport", "module_path": "kvport.sglang_hicache",
                      "class_name": "HiCacheKvport", "interface_v1": 1,
                      "endpoint": endpoint, "namespace": namespace, **extra})


def dsa_pools():
    """A DSA model's host pools (a DeepSeek V3.2-shaped MLA KV of 576 dims and its indexer
    keys, 2 layers, pages of 64 tokens): the MLA host pool and the DSA indexer host pool that
    rides on its pages, as make_dsa_indexer_pool_decl declares it (indices and layout from the
    KV pool). The device pool reads its decode-context-parallel width from SGLang's parallel
    config, which a single CPU rank states (1); the indexer pool is built as its builder builds
    it, but unpinned."""
    with get_parallel().override(attn_dcp_size=1):
        device = DSATokenToKVPool(size=DEVICE_TOKENS, page_size=64, kv_lora_rank=512,
                                  dtype=torch.bfloat16, qk_rope_head_dim=64, layer_num=2,
                                  device="cpu", index_head_dim=128, enable_memory_saver=False,
                                  kv_cache_dim=576, start_layer=0, end_layer=2)
    with host_memory_budget_scope(POOL_BUDGET):
        kv = MLATokenToKVPoolHost(device.get_device_pool_infos()[0].buffer_info, 2.0, 0, 64,
                                  "page_first", pin_memory=False,
                                  device_capacity_tokens=device.size, start_layer=0,
                                  end_layer=2, target_layer_num=2)
        indexer = DSAIndexerPoolHost(make_dsa_indexer_pool_decl(device), kv, pin_memory=False)
    return kv, indexer


def create_storage(endpoint: str, kv, mamba=None, namespace: str = "hicache",
                   model: str = MODEL, tp_rank: int = 0, tp_size: int = 1,
                   indexer=None) -> HiCacheStorage:
    """What HybridCacheController.attach_storage_backend does for `dynamic`."""
    config = storage_config(endpoint, kv, namespace, model, tp_rank, tp_size)
    storage = StorageBackendFactory.create_backend("dynamic", config, kv)
    storage.register_mem_pool_host(kv)
    storage.register_mem_host_pool_v2(kv, PoolName.KV)
    if mamba is not None:
        storage.register_mem_host_pool_v2(mamba, PoolName.MAMBA)
    if indexer is not None:
        storage.register_mem_host_pool_v2(indexer, PoolName.INDEXER)
    storage.on_host_pools_registered()
    return storage


class Slots:
    """Fresh pages (or Mamba slots) of one host pool, each handed out once."""

    def __init__(self, pool):
        self.pool = pool
        self.next = 0

    def take(self, n: int) -> torch.Tensor:
        size = self.pool.page_size
        assert self.next + n <= self.pool.page_num - 1, "the test host pool is too small"
        first = self.next * size
        self.next += n
        return torch.arange(first, first + n * size, dtype=torch.int64)

    def regions(self, indices: torch.Tensor) -> List[torch.Tensor]:
        """Byte views of the regions the pool's get_page_buffer_meta names for these pages."""
        ptrs, sizes = self.pool.get_page_buffer_meta(indices)
        return [_view(p, n) for p, n in zip(ptrs, sizes)]

    def fill(self, indices: torch.Tensor, seed: int) -> List[torch.Tensor]:
        generator = torch.Generator().manual_seed(seed)
        regions = self.regions(indices)
        for r in regions:
            r.copy_(torch.randint(0, 256, r.shape, generator=generator, dtype=torch.uint8))
        return [r.clone() for r in regions]

    def zero(self, indices: torch.Tensor) -> None:
        for r in self.regions(indices):
            r.zero_()


def _view(ptr: int, n: int) -> torch.Tensor:
    """A uint8 tensor over n bytes at ptr (host memory of a pool this test holds)."""
    return torch.frombuffer((ctypes.c_uint8 * n).from_address(ptr), dtype=torch.uint8)


def page_keys(tag: str, n: int) -> List[str]:
    """A chain of page hashes, as SGLang's get_hash_str makes them (hex sha256)."""
    return [hashlib.sha256(f"{tag}/{i}".encode()).hexdigest() for i in range(n)]


def same(a: List[torch.Tensor], b: List[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


# --- Fixtures ----------------------------------------------------------------------------------

@pytest.fixture(scope="module", params=["tcp", "shm"])
def node(request, node_factory):
    return node_factory(shared_memory=request.param == "shm")


def transport_of(node) -> str:
    return "shm" if node.shared_memory else "tcp"


@pytest.fixture(scope="module")
def pools():
    """One pool of each kind and layout, its fresh pages shared by the module's tests."""
    out = {(m, layout): Slots(kv_pool(m, layout)) for m in MODELS for layout in LAYOUTS}
    out["mamba"] = Slots(mamba_pool())
    return out


def raw_client(node) -> kvport.Client:
    return kvport.Client(node.endpoint)


# --- Tests -------------------------------------------------------------------------------------

def test_loaded_as_dynamic(node, pools, record):
    storage = create_storage(node.endpoint, pools[("mha", "page_first")].pool)
    assert type(storage) is HiCacheKvport
    assert storage.batch_exists(page_keys("nothing", 3)) == 0
    record(ENGINE, BACKEND + f"StorageBackendFactory.create_backend(\"dynamic\") with "
           f"kvport.sglang_hicache.HiCacheKvport, {transport_of(node)}",
           "ok (HiCacheKvport, pools registered)")


def test_needs_interface_v1(node, pools, record):
    """Without interface_v1 SGLang's controller would call the tensor API with flat copies."""
    kv = pools[("mha", "page_first")].pool
    with pytest.raises(ValueError, match="interface_v1"):
        StorageBackendFactory.create_backend(
            "dynamic", storage_config(node.endpoint, kv, "hicache", interface_v1=0), kv)
    record(ENGINE, BACKEND + f"StorageBackendFactory.create_backend(\"dynamic\") without "
           f"interface_v1, {transport_of(node)}", "ValueError naming interface_v1")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("model", MODELS)
def test_v1_pages_round_trip_in_place(node, pools, model, layout, record):
    slots = pools[(model, layout)]
    storage = create_storage(node.endpoint, slots.pool, namespace=f"v1-{model}-{layout}")
    keys = page_keys(f"v1/{model}/{layout}", 4)
    indices = slots.take(4)
    written = slots.fill(indices, seed=1)
    assert storage.batch_set_v1(keys, indices) == [True] * 4
    assert storage.batch_exists(keys) == 4

    # Each region of the pool's page is one object holding exactly its bytes: the values were
    # sent from the pool's own memory, region by region (MHA: K half, V half; MLA: one).
    regions = 2 if model == "mha" else 1
    client = raw_client(node)
    stored = storage._keys("kv", keys)
    assert len(stored) == 4 * regions
    got = [bytearray(r.numel()) for r in written]
    result = client.mget(stored, got, ns=f"v1-{model}-{layout}")
    assert result.ok
    assert all(bytes(g) == bytes(w.numpy()) for g, w in zip(got, written))

    slots.zero(indices)
    assert storage.batch_get_v1(keys, indices) == [True] * 4
    assert same(slots.regions(indices), written)

    # A missing region makes its page a miss, and the prefix stops before it.
    assert client.mdel([stored[2 * regions - 1]], ns=f"v1-{model}-{layout}").ok
    assert storage.batch_exists(keys) == 1
    other = slots.take(4)
    slots.zero(other)
    assert storage.batch_get_v1(keys, other) == [True, False, True, True]
    client.close()
    record(ENGINE, BACKEND + f"batch_set_v1 + batch_exists + batch_get_v1, {model.upper()} "
           f"{layout}, {transport_of(node)}",
           f"bytes equal; {regions} object{'s' if regions > 1 else ''} a page, from and into "
           f"the pool in place; "
           f"a page missing a region is a miss")


def write_group(storage, kv: Slots, mamba: Slots, keys, trailing: int, seed: int):
    """One sequence's write as HybridCacheController does it: the Mamba states of its last
    `trailing` pages through batch_set_v2, then its KV through batch_set_v1."""
    kv_indices = kv.take(len(keys))
    state_indices = mamba.take(trailing)
    kv_bytes = kv.fill(kv_indices, seed)
    state_bytes = mamba.fill(state_indices, seed + 1)
    transfer = PoolTransfer(name=PoolName.MAMBA, host_indices=state_indices,
                            keys=keys[-trailing:], hit_policy=PoolHitPolicy.TRAILING_PAGES)
    assert storage.batch_set_v2([transfer]) == {PoolName.MAMBA: [True] * trailing}
    assert storage.batch_set_v1(keys, kv_indices) == [True] * len(keys)
    return kv_bytes, state_bytes


def test_v2_sidecar_round_trip_and_hit_policies(node, pools, record):
    kv, mamba = pools[("mha", "page_first")], pools["mamba"]
    ns = "v2"
    storage = create_storage(node.endpoint, kv.pool, mamba.pool, namespace=ns)
    keys = page_keys("v2", 4)
    kv_bytes, state_bytes = write_group(storage, kv, mamba, keys, trailing=1, seed=3)

    trailing = PoolTransfer(name=PoolName.MAMBA, keys=keys[-1:],
                            hit_policy=PoolHitPolicy.TRAILING_PAGES)
    hit = storage.batch_exists_v2(keys, [trailing])
    # Only page 4 has a state: 4 is the one restorable prefix, the KV hit is all 4 pages.
    assert (hit.kv_hit_pages, hit.restorable_prefix_pages) == (4, [4])
    assert hit.extra_pool_hit_pages == {PoolName.KV: 4, PoolName.MAMBA: 4}

    # ALL_PAGES over the same pool: page 1 has no state, so nothing is restorable.
    every = PoolTransfer(name=PoolName.MAMBA, keys=keys, hit_policy=PoolHitPolicy.ALL_PAGES)
    hit = storage.batch_exists_v2(keys, [every])
    assert (hit.kv_hit_pages, hit.restorable_prefix_pages) == (0, [])

    with pytest.raises(ValueError, match="block_groups"):
        storage.batch_exists_v2(keys, [PoolTransfer(name=PoolName.MAMBA, keys=keys,
                                                    hit_policy=PoolHitPolicy.BLOCK_GROUPS)])

    # The load, in the controller's order: KV, then the sidecar.
    kv_into, state_into = kv.take(4), mamba.take(1)
    kv.zero(kv_into)
    mamba.zero(state_into)
    assert storage.batch_get_v1(keys, kv_into) == [True] * 4
    got = storage.batch_get_v2([PoolTransfer(name=PoolName.MAMBA, host_indices=state_into,
                                             keys=keys[-1:],
                                             hit_policy=PoolHitPolicy.TRAILING_PAGES)])
    assert got == {PoolName.MAMBA: [True]}
    assert same(kv.regions(kv_into), kv_bytes)
    assert same(mamba.regions(state_into), state_bytes)
    record(ENGINE, BACKEND + f"batch_set_v2 (Mamba) + batch_set_v1 + batch_exists_v2 + "
           f"batch_get_v1 + batch_get_v2, {transport_of(node)}",
           "bytes equal; TRAILING_PAGES and ALL_PAGES prefixes as HiCacheFile's; "
           "BLOCK_GROUPS: ValueError")


def test_a_sidecar_is_never_served_without_its_kv(node, pools, record):
    kv, mamba = pools[("mha", "page_first")], pools["mamba"]
    ns = "orphan"
    storage = create_storage(node.endpoint, kv.pool, mamba.pool, namespace=ns)
    keys = page_keys("orphan", 2)
    write_group(storage, kv, mamba, keys, trailing=2, seed=5)
    client = raw_client(node)
    # The node loses one region of page 2's KV (its V half), as eviction would.
    assert client.mdel([storage._keys("kv", keys[1:])[-1]], ns=ns).ok

    states = PoolTransfer(name=PoolName.MAMBA, keys=keys, hit_policy=PoolHitPolicy.ALL_PAGES)
    hit = storage.batch_exists_v2(keys, [states])
    assert (hit.kv_hit_pages, hit.restorable_prefix_pages) == (1, [1])
    assert hit.extra_pool_hit_pages[PoolName.MAMBA] == 1

    into = mamba.take(2)
    mamba.zero(into)
    got = storage.batch_get_v2([PoolTransfer(name=PoolName.MAMBA, host_indices=into, keys=keys,
                                             hit_policy=PoolHitPolicy.ALL_PAGES)])
    assert got == {PoolName.MAMBA: [True, False]}
    # The broken group's state is gone from the node; page 1's group is whole.
    state_keys = storage._keys("mamba", keys)
    half = len(state_keys) // 2
    assert [c == kvport.KeyCode.SUCCESS for c in client.mexist(state_keys, ns=ns).codes] == \
        [True] * half + [False] * half
    client.close()
    record(ENGINE, BACKEND + f"batch_get_v2 of a Mamba state whose page lost a KV region, "
           f"{transport_of(node)}", "not served (False), its objects deleted; the whole "
           "group next to it served")


def test_groups_under_eviction_pressure(node_factory, record):
    """A 4 MiB node and 12 sequences of 4 MHA pages (128 KiB each) with a state on every page:
    the node must evict. Between writes the states of the earlier sequences are read back, so
    the node keeps states whose KV it evicts (the test fails if it finds none). Afterwards the
    restorable prefix of each sequence is exactly its run of whole groups, no state is served
    without its whole KV, whole groups are, and every broken group's state is deleted."""
    small = node_factory(shared_memory=False, capacity="4MiB")
    kv = Slots(kv_pool("mha", "page_first"))
    mamba = Slots(mamba_pool())
    ns = "pressure"
    storage = create_storage(small.endpoint, kv.pool, mamba.pool, namespace=ns)
    sequences = [page_keys(f"pressure/{s}", 4) for s in range(12)]
    state_sizes = mamba.pool.get_page_buffer_meta(torch.arange(1))[1]
    for s, keys in enumerate(sequences):
        kv_indices, state_indices = kv.take(4), mamba.take(4)
        kv.fill(kv_indices, seed=s)
        mamba.fill(state_indices, seed=100 + s)
        transfer = PoolTransfer(name=PoolName.MAMBA, host_indices=state_indices, keys=keys,
                                hit_policy=PoolHitPolicy.ALL_PAGES)
        storage.batch_set_v2([transfer])
        storage.batch_set_v1(keys, kv_indices)
        for earlier in sequences[:s]:
            # Touch the earlier states (a raw read: the backend would cut broken groups now).
            state_keys = storage._keys("mamba", earlier)
            buffers = [bytearray(state_sizes[i % len(state_sizes)])
                       for i in range(len(state_keys))]
            storage.client.mget(state_keys, buffers, ns=ns)

    client = raw_client(small)
    all_keys = [k for keys in sequences for k in keys]

    def present(pool: str) -> List[bool]:
        flags = [c == kvport.KeyCode.SUCCESS
                 for c in client.mexist(storage._keys(pool, all_keys), ns=ns).codes]
        n = len(flags) // len(all_keys)
        return [all(flags[i:i + n]) for i in range(0, len(flags), n)]

    kv_there, state_there = present("kv"), present("mamba")
    orphans = [k for k, has_kv, has_state in zip(all_keys, kv_there, state_there)
               if has_state and not has_kv]
    assert orphans, "the node evicted no group apart: the test did not test anything"
    assert any(kv_there), "the node kept no KV at all"

    served = 0
    for keys in sequences:
        states = PoolTransfer(name=PoolName.MAMBA, keys=keys, hit_policy=PoolHitPolicy.ALL_PAGES)
        hit = storage.batch_exists_v2(keys, [states])
        whole = [kv_there[all_keys.index(k)] and state_there[all_keys.index(k)] for k in keys]
        # The restorable prefix is the run of whole groups: a KV without its state (all_pages)
        # ends it as a state without its KV does.
        assert hit.kv_hit_pages == (whole.index(False) if False in whole else 4)
        into = mamba.take(4)
        got = storage.batch_get_v2([PoolTransfer(name=PoolName.MAMBA, host_indices=into,
                                                 keys=keys,
                                                 hit_policy=PoolHitPolicy.ALL_PAGES)])
        for k, ok in zip(keys, got[PoolName.MAMBA]):
            i = all_keys.index(k)
            assert not ok or kv_there[i], f"page {i}: a state served without its KV"
            served += ok
    assert served, "no whole group was served"
    assert present("mamba") == [s and k for s, k in zip(state_there, kv_there)], \
        "a broken group's state stayed in the node"
    client.close()
    record(ENGINE, BACKEND + "Mamba states and MHA KV of 12 sequences into a 4 MiB node "
           "(groups evicted apart), tcp", "states without their KV: none reported nor served, "
           "all deleted; whole groups served")


def test_clear_deletes_this_ranks_pages_only(node, pools, record):
    slots = pools[("mla", "page_first")]
    mine = create_storage(node.endpoint, slots.pool, namespace="shared")
    # Another model whose name ends in this one's: its keys end in this one's suffix too.
    other = create_storage(node.endpoint, slots.pool, namespace="shared", model="x_" + MODEL)
    keys = page_keys("clear", 2)
    indices = slots.take(2)
    slots.fill(indices, seed=7)
    assert mine.batch_set_v1(keys, indices) == [True, True]
    assert other.batch_set_v1(keys, indices) == [True, True]
    mine.clear()
    assert (mine.batch_exists(keys), other.batch_exists(keys)) == (0, 2)
    record(ENGINE, BACKEND + f"clear(), {transport_of(node)}",
           "deletes this model's and rank's pages; another model's in the namespace stay")


def test_a_page_stored_in_part_is_not_left_in_the_node(pools, record):
    """A node whose values may not exceed 4 KiB takes a Mamba state's 1.5 KiB conv part and
    refuses its 8 KiB temporal part: the page's write fails and the part stored is deleted."""
    kv, mamba = pools[("mha", "page_first")], pools["mamba"]
    with kvport.Server("64MiB", max_value_bytes=4096) as server:
        storage = create_storage(server.address, kv.pool, mamba.pool, namespace="part")
        keys = page_keys("part", 1)
        indices = mamba.take(1)
        mamba.fill(indices, seed=9)
        transfer = PoolTransfer(name=PoolName.MAMBA, host_indices=indices, keys=keys)
        assert storage.batch_set_v2([transfer]) == {PoolName.MAMBA: [False]}
        with kvport.Client(server.address) as client:
            codes = client.mexist(storage._keys("mamba", keys), ns="part").codes
        assert codes == [kvport.KeyCode.KEY_NOT_EXIST] * 2
        storage.close()
    record(ENGINE, BACKEND + "batch_set_v2 of a Mamba state the node takes only in part",
           "False; the part stored is deleted")


def test_a_node_gone_is_a_miss(node_factory, pools, record):
    """SGLang's storage threads must not die with the node: every call answers, with misses."""
    kv = pools[("mla", "page_first")]
    gone = node_factory(shared_memory=False)
    storage = create_storage(gone.endpoint, kv.pool, namespace="gone")
    keys = page_keys("gone", 2)
    indices = kv.take(2)
    assert storage.batch_set_v1(keys, indices) == [True, True]
    gone.stop()
    assert storage.batch_exists(keys) == 0
    assert storage.batch_get_v1(keys, indices) == [False, False]
    assert storage.batch_set_v1(keys, indices) == [False, False]
    storage.close()
    assert storage.batch_exists(keys) == 0
    record(ENGINE, BACKEND + "every call after the node stopped, and after close(), tcp",
           "misses and failed writes (False), no exception")


def test_two_tp_ranks_of_an_mla_hybrid_model(node, pools, record):
    """TP 2 of an MLA model with Mamba layers, as HybridCacheController drives it: both ranks
    write their own (TP-sharded) states, only the writer rank (0) writes the KV, which is the
    same on every rank; each rank restores its own state with the one KV."""
    kv, mamba = pools[("mla", "page_first")], pools["mamba"]
    ranks = [create_storage(node.endpoint, kv.pool, mamba.pool, namespace="tp2", tp_rank=r,
                            tp_size=2) for r in (0, 1)]
    keys = page_keys("tp2", 2)
    kv_indices = kv.take(2)
    kv_bytes = kv.fill(kv_indices, seed=11)
    state_bytes = []
    for rank, storage in enumerate(ranks):
        indices = mamba.take(1)
        state_bytes.append(mamba.fill(indices, seed=20 + rank))
        transfer = PoolTransfer(name=PoolName.MAMBA, host_indices=indices, keys=keys[-1:],
                                hit_policy=PoolHitPolicy.TRAILING_PAGES)
        assert storage.batch_set_v2([transfer]) == {PoolName.MAMBA: [True]}
    assert ranks[0].batch_set_v1(keys, kv_indices) == [True, True]

    for rank, storage in enumerate(ranks):
        trailing = PoolTransfer(name=PoolName.MAMBA, keys=keys[-1:],
                                hit_policy=PoolHitPolicy.TRAILING_PAGES)
        assert storage.batch_exists_v2(keys, [trailing]).restorable_prefix_pages == [2]
        kv_into, state_into = kv.take(2), mamba.take(1)
        kv.zero(kv_into)
        mamba.zero(state_into)
        assert storage.batch_get_v1(keys, kv_into) == [True, True]
        got = storage.batch_get_v2([PoolTransfer(name=PoolName.MAMBA, host_indices=state_into,
                                                 keys=keys[-1:])])
        assert got == {PoolName.MAMBA: [True]}
        assert same(kv.regions(kv_into), kv_bytes)
        assert same(mamba.regions(state_into), state_bytes[rank])
    record(ENGINE, BACKEND + f"TP 2 of an MLA model with Mamba states (KV from rank 0, a state "
           f"from each rank), {transport_of(node)}",
           "each rank restores the one KV and its own state, bytes equal")


def test_a_dsa_indexer_rides_on_its_kv(node, record):
    """sgl-project/sglang#30321's case: a DSA model's indexer keys (a KV-derived sidecar,
    all_pages) with their KV. Written as HybridCacheController writes them (the indexer through
    batch_set_v2 with the KV's host indices, then the KV), read as _page_transfer_kv_batch
    reads them (the KV, then the indexer with the same indices). Then the node loses page 3's
    indexer: the hit stops at page 2; and page 1's KV: the hit is 0 and page 1's indexer is
    not served."""
    kv_pool, indexer_pool = dsa_pools()
    kv, indexer = Slots(kv_pool), Slots(indexer_pool)
    ns = "dsa"
    storage = create_storage(node.endpoint, kv_pool, namespace=ns, indexer=indexer_pool)
    keys = page_keys("dsa", 3)
    indices = kv.take(3)
    kv_bytes = kv.fill(indices, seed=30)
    indexer_bytes = indexer.fill(indices, seed=31)
    assert [len(r) for r in kv_bytes[:1] + indexer_bytes[:1]] == [147456, 16896]
    transfer = PoolTransfer(name=PoolName.INDEXER, host_indices=indices, keys=keys,
                            indices_from_pool=PoolName.KV)
    assert storage.batch_set_v2([transfer]) == {PoolName.INDEXER: [True] * 3}
    assert storage.batch_set_v1(keys, indices) == [True] * 3

    probe = PoolTransfer(name=PoolName.INDEXER, keys=keys, indices_from_pool=PoolName.KV)
    assert storage.batch_exists_v2(keys, [probe]).kv_hit_pages == 3
    into = kv.take(3)
    kv.zero(into)
    indexer.zero(into)
    assert storage.batch_get_v1(keys, into) == [True] * 3
    assert storage.batch_get_v2([PoolTransfer(name=PoolName.INDEXER, host_indices=into,
                                              keys=keys)]) == {PoolName.INDEXER: [True] * 3}
    assert same(kv.regions(into), kv_bytes) and same(indexer.regions(into), indexer_bytes)

    client = raw_client(node)
    assert client.mdel(storage._keys("indexer", keys[2:]), ns=ns).ok
    hit = storage.batch_exists_v2(keys, [probe])
    assert (hit.kv_hit_pages, hit.extra_pool_hit_pages) == \
        (2, {PoolName.KV: 3, PoolName.INDEXER: 2})
    assert client.mdel(storage._keys("kv", keys[:1]), ns=ns).ok
    assert storage.batch_exists_v2(keys, [probe]).kv_hit_pages == 0
    assert storage.batch_get_v2([PoolTransfer(name=PoolName.INDEXER, host_indices=into,
                                              keys=keys)]) == \
        {PoolName.INDEXER: [False, True, False]}
    client.close()
    record(ENGINE, BACKEND + f"DSA indexer (all_pages, KV-derived) with its MLA KV, "
           f"{transport_of(node)}", "bytes equal; a lost indexer page ends the hit there; an "
           "indexer page whose KV is gone is not served")


def test_a_pool_that_cannot_move_in_place_fails_the_attach(node, pools, record):
    """A Mamba pool whose states carry registered side states (extra checkpoint buffers) has
    no page regions to move in place (SGLang's MambaPoolHost says so): registering it fails
    the attach, naming the pool, instead of failing every later write."""
    info = MambaStateBufferInfo(
        temporal=torch.zeros(2, MAMBA_SLOTS, 16, 64, dtype=torch.float32),
        conv=(torch.zeros(2, MAMBA_SLOTS, 3, 128, dtype=torch.bfloat16),),
        extra_checkpoint_buffers=(torch.zeros(MAMBA_SLOTS, 8),))
    with host_memory_budget_scope(POOL_BUDGET):
        side = MambaPoolHost(info, 2.0, 0, device_capacity=MAMBA_SLOTS, pin_memory=False,
                             layout="page_first")
    with pytest.raises(ValueError, match="'mamba' host pool cannot move its pages in place"):
        create_storage(node.endpoint, pools[("mha", "page_first")].pool, side)
    record(ENGINE, BACKEND + f"register_mem_host_pool_v2 of a Mamba pool with side states, "
           f"{transport_of(node)}", "ValueError naming the pool (no in-place page regions)")
