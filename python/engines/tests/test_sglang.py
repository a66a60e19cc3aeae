# SPDX-License-Identifier: Apache-2.0
"""Released SGLang (python/engines/requirements.txt): its HiCache L3 EIC backend, `EICStorage`,
against `kvport serve` through `import eic`.

The storage is built the way `--hicache-storage-backend eic` builds it: SGLang's
`StorageBackendFactory.create_backend("eic", HiCacheStorageConfig, host_pool)`, which reads
its EIC config from the YAML file named by REMOTE_EIC_YAML (`remote_url: eic://...`,
`eic_namespace`, `eic_trans_type: 2`, ...), then `register_mem_pool_host(host_pool)` and
`on_host_pools_registered()`, as HiCacheController.attach_storage_backend calls them. The
HiCacheStorageConfig has the fields HiCacheController._generate_storage_config fills for a
single rank (TP 1, no PP, CP or DCP) of an MHA model; `--hicache-storage-backend-extra-config`
becomes its `extra_config`, which EICStorage does not read (everything it reads is in the YAML).

The host KV pool is SGLang's own MHATokenToKVPoolHost over SGLang's MHATokenToKVPool on the CPU
(4 layers, 8 KV heads of 64, bf16, pages of 16 tokens: 128 KiB a page), with the arguments
SGLang's build_kv_host_pool passes, in two layouts: `page_first` (the default, where
EICStorage's v1 page API is zero-copy: each page is two objects, its K and its V half, read and
written in place in the pool) and `layer_first` (the generic path: each page is copied out
flat, one object). One argument differs: `pin_memory=False`, because SGLang pins its host pool
with cudaHostRegister, which needs a CUDA driver; pinned or not, the pool is host memory and
EICStorage passes the same pointers.

Monkeypatched: nothing. No CUDA-only op is on these paths except the two kept off them by
configuration: the pool's pinning (the constructor argument above) and, for `layer_first`,
EICStorage's FlexibleKVCacheMemoryPool staging pools (`torch.zeros(..., pin_memory=True)`),
turned off with `enable_kvset_direct: false` and `enable_kvget_direct: false` in the YAML;
`page_first` never builds them.

SGLang 0.5.23's EICStorage has the v1 page API (batch_set_v1 / batch_get_v1 with host
indices, what HiCacheController calls for eic) and the tensor API (batch_set / batch_get /
batch_exists / exists), but not the v2 pool-transfer API (batch_*_v2), which it inherits from
HiCacheStorage as NotImplementedError.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import torch
import yaml

from sglang.srt.managers.cache_controller import storage_model_name
from sglang.srt.mem_cache.hicache_storage import HiCacheStorage, HiCacheStorageConfig
from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool
from sglang.srt.mem_cache.pool_host.base import host_memory_budget_scope
from sglang.srt.mem_cache.pool_host.mha import MHATokenToKVPoolHost
from sglang.srt.mem_cache.storage.backend_factory import StorageBackendFactory
from sglang.srt.mem_cache.storage.eic.eic_storage import EICStorage

from conftest import SECRET, token_secret

ENGINE = "sglang"
MODEL = "kvport-test/llama-4l"
LAYERS, HEADS, HEAD_DIM, PAGE = 4, 8, 64, 16
DEVICE_TOKENS = 512  # the device pool; the host pool is twice that plus a padding page
HICACHE_RATIO = 2.0  # --hicache-ratio's default
NAMESPACE = "sglang_a"
LAYOUTS = ["page_first", "layer_first"]
LABEL = {"page_first": "page_first (zero-copy)", "layer_first": "layer_first (generic)"}
POOL_BUDGET = 256 << 20  # host RAM the pool is booked against: it takes a few MiB


# --- SGLang's objects --------------------------------------------------------------------------

def host_pool(layout: str) -> MHATokenToKVPoolHost:
    """SGLang's host KV pool of a CPU device pool, as build_kv_host_pool builds it (with
    hicache_size 0: sized by the ratio), except pin_memory (module doc)."""
    device = MHATokenToKVPool(size=DEVICE_TOKENS, page_size=PAGE, dtype=torch.bfloat16,
                              head_num=HEADS, head_dim=HEAD_DIM, layer_num=LAYERS, device="cpu",
                              enable_memory_saver=False, start_layer=0, end_layer=LAYERS)
    # Booked against a budget of its own (SGLang's host_memory_budget_scope), so that building
    # it does not depend on what the machine has free beyond SGLang's 10 GiB reserve just then.
    with host_memory_budget_scope(POOL_BUDGET):
        return MHATokenToKVPoolHost(
            device.get_device_pool_infos()[0].buffer_info, HICACHE_RATIO, 0, PAGE, layout,
            pin_memory=False, allocator_type="default",
            device_capacity_tokens=device.size, start_layer=device.start_layer,
            end_layer=device.end_layer, write_back_staging=device.hicache_write_back_staging)


def eic_yaml(path: Path, url: str, namespace: str, layout: str) -> Path:
    """remote-eic.yaml as SGLang's EIC docs write it."""
    config = {
        "remote_url": url,
        "eic_instance_id": "kvport-sglang-test",
        "eic_thread_num": 1,
        "eic_log_dir": str(path.parent / "eic-logs"),
        "eic_log_level": 2,
        "eic_trans_type": 2,  # RDMA: kvport takes shared memory with a local node, else TCP
        "eic_namespace": namespace,
    }
    if layout != "page_first":
        # The generic layout would stage pages in FlexibleKVCacheMemoryPool, whose
        # torch.zeros(pin_memory=True) needs a CUDA driver; with these off it sends the
        # pages' own flat copies, as it does when that pool is exhausted.
        config.update(enable_kvset_direct=False, enable_kvget_direct=False)
    path.write_text(yaml.safe_dump(config))
    return path


def create_storage(config_file: Path, pool: MHATokenToKVPoolHost) -> EICStorage:
    """What HiCacheController.attach_storage_backend does for `--hicache-storage-backend eic`."""
    config = HiCacheStorageConfig(
        tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
        is_mla_model=False, enable_storage_metrics=False,
        is_page_first_layout=pool.layout == "page_first",
        model_name=storage_model_name(MODEL, pool), extra_config={})
    with pytest.MonkeyPatch.context() as env:
        env.setenv("REMOTE_EIC_YAML", str(config_file))
        storage = StorageBackendFactory.create_backend("eic", config, pool)
    # Without SGLang's failure-injection env vars the factory returns the backend itself.
    assert type(storage) is EICStorage
    storage.register_mem_pool_host(pool)
    storage.on_host_pools_registered()
    return storage


class Pages:
    """Pages of one host pool, handed out once each, so no two tests share one."""

    def __init__(self, pool: MHATokenToKVPoolHost):
        self.pool = pool
        self.next = 0

    def take(self, n: int) -> torch.Tensor:
        """The host (token) indices of n fresh pages, as HiCacheController passes them."""
        assert self.next + n <= self.pool.page_num, "the test host pool is too small"
        first = self.next * PAGE
        self.next += n
        return torch.arange(first, first + n * PAGE, dtype=torch.int64)

    def page(self, indices: torch.Tensor, i: int) -> torch.Tensor:
        return self.pool.get_data_page(int(indices[i * PAGE]), flat=False)

    def fill(self, indices: torch.Tensor, seed: int) -> List[torch.Tensor]:
        """Random bytes into each page (a view into the pool); returns copies of them."""
        generator = torch.Generator().manual_seed(seed)
        out = []
        for i in range(len(indices) // PAGE):
            view = self.page(indices, i)
            view.copy_(torch.randn(view.shape, generator=generator).to(view.dtype))
            out.append(view.clone())
        return out

    def read(self, indices: torch.Tensor) -> List[torch.Tensor]:
        return [self.page(indices, i).clone() for i in range(len(indices) // PAGE)]


def page_keys(tag: str, n: int) -> List[str]:
    """Page hashes as SGLang's get_hash_str makes them (sha256 hex)."""
    return [hashlib.sha256(f"{tag}/{i}".encode()).hexdigest() for i in range(n)]


def all_equal(got: List[torch.Tensor], expected: List[torch.Tensor]) -> bool:
    return len(got) == len(expected) and all(torch.equal(g, e) for g, e in zip(got, expected))


def set_results(layout: str, pages: int) -> List[bool]:
    """batch_set_v1's all-stored answer: page_first stores (and answers for) each page's K and
    V halves as two keys; the generic layout one key a page."""
    return [True] * (2 * pages if layout == "page_first" else pages)


def within(seconds: float, call, *args):
    """call(*args), failing the test if it has not returned after `seconds` (a hang)."""
    outcome: Dict[str, object] = {}

    def run():
        try:
            outcome["value"] = call(*args)
        except BaseException as e:  # handed to the test thread
            outcome["error"] = e

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"{call.__name__} did not return within {seconds} s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


# --- Fixtures ----------------------------------------------------------------------------------

@pytest.fixture(scope="module", params=["tcp", "shm"])
def node(request, node_factory):
    """tcp: a node without a Unix socket (a remote node, as far as the client can tell); shm:
    a node on this host offering shared memory, which eic_trans_type 2 then takes."""
    return node_factory(shared_memory=request.param == "shm")


def transport_of(node) -> str:
    return "shm" if node.shared_memory else "tcp"


class SGLang:
    """One SGLang rank's host pools (one per layout) and the EICStorages built over them, once
    per node, plus the extra nodes a test needs of the same transport."""

    def __init__(self, node, node_factory, workdir: Path):
        self.node = node
        self.node_factory = node_factory
        self.workdir = workdir
        self.pages = {layout: Pages(host_pool(layout)) for layout in LAYOUTS}
        self.storages: Dict[Tuple[str, str, str], EICStorage] = {}
        self.nodes: Dict[str, object] = {}

    def extra_node(self, name: str, **kwargs):
        if name not in self.nodes:
            self.nodes[name] = self.node_factory(shared_memory=self.node.shared_memory,
                                                 **kwargs)
        return self.nodes[name]

    def new_storage(self, layout: str, namespace: str = NAMESPACE, node=None) -> EICStorage:
        node = node or self.node
        n = len(list(self.workdir.glob("*.yaml")))
        config = eic_yaml(self.workdir / f"remote-eic-{n}.yaml", node.url, namespace, layout)
        return create_storage(config, self.pages[layout].pool)

    def storage(self, layout: str, namespace: str = NAMESPACE, node=None) -> EICStorage:
        node = node or self.node
        key = (layout, namespace, node.url)
        if key not in self.storages:
            self.storages[key] = self.new_storage(layout, namespace, node)
        return self.storages[key]


@pytest.fixture(scope="module")
def sglang(node, node_factory, tmp_path_factory, engine_log):
    instance = SGLang(node, node_factory, tmp_path_factory.mktemp("sglang"))
    mark = engine_log.mark()
    for layout in LAYOUTS:
        instance.storage(layout)
    instance.construction_errors = engine_log.errors(mark)
    return instance


# --- Tests -------------------------------------------------------------------------------------

def test_construction_through_the_factory(node, sglang, record):
    counters = node.stats()["counters"]
    # EICStorage.warmup, before the constructor returns: 1024 probes in 32 mexist calls, for
    # each of the two storages (one per layout).
    assert counters["op_mexist"] >= len(LAYOUTS) * 32
    assert (counters["shm_attaches"] > 0) == node.shared_memory
    assert sglang.construction_errors == []
    for layout in LAYOUTS:
        storage = sglang.storage(layout)
        assert storage.use_zero_copy == (layout == "page_first")
        assert storage.eic_namespace == NAMESPACE
        # register_mem_pool_host registered the whole host pool (declared MEMORY_CUDA).
        buffer = sglang.pages[layout].pool.kv_buffer
        assert (buffer.data_ptr(), buffer.numel() * buffer.element_size()) in [
            r[:2] for r in storage.connection.registered_regions()]
    record(ENGINE, f"StorageBackendFactory.create_backend(\"eic\") + register_mem_pool_host, "
                   f"REMOTE_EIC_YAML, {transport_of(node)}", "ok (warm-up probes, pool registered)")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_page_api_set_exists_get(node, sglang, layout, engine_log, record):
    """batch_set_v1 / batch_exists / batch_get_v1 with host indices, as HiCacheController's
    backup and prefetch threads call them, reading into other (fresh) pages of the pool."""
    storage, pages = sglang.storage(layout), sglang.pages[layout]
    keys = page_keys(f"v1-{layout}", 3)
    src = pages.take(3)
    expected = pages.fill(src, seed=1)
    dst = pages.take(3)
    pages.fill(dst, seed=2)  # not zeros, so an untouched page cannot pass for a read one
    mark = engine_log.mark()
    before_objects = node.stats()["counters"]["objects"]
    before = node.stats()["counters"]

    assert storage.batch_exists(keys) == 0
    assert storage.batch_set_v1(keys, src) == set_results(layout, 3)
    assert storage.batch_exists(keys) == 3
    assert storage.exists(keys[1])
    assert storage.batch_get_v1(keys, dst) == [True] * 3
    assert all_equal(pages.read(dst), expected)
    assert all_equal(pages.read(src), expected)

    after = node.stats()["counters"]
    assert node.stats()["counters"]["objects"] - before_objects == len(set_results(layout, 3))
    # The bytes went the way the node's transport says: through the mapping or the socket.
    node.assert_values_took_its_transport(before, after)
    assert engine_log.errors(mark) == []
    record(ENGINE, f"batch_set_v1 + batch_exists + batch_get_v1 into fresh pages, "
                   f"{LABEL[layout]}, {transport_of(node)}", "bytes equal")


def test_tensor_api_set_get(node, sglang, engine_log, record):
    """batch_set / batch_get with page tensors (HiCacheController's _generic_page_set /
    _generic_page_get), reading into SGLang's fresh dummy flat pages. Generic layout only: on
    page_first these calls skip the K/V split that batch_exists and batch_get_v1 expect, and
    HiCacheController never makes them for eic."""
    layout = "layer_first"
    storage, pages = sglang.storage(layout), sglang.pages[layout]
    keys = page_keys("tensor-api", 3)
    src = pages.take(3)
    expected = [page.flatten() for page in pages.fill(src, seed=3)]
    mark = engine_log.mark()

    values = [pages.pool.get_data_page(int(src[i * PAGE]), flat=True) for i in range(3)]
    assert storage.batch_set(keys, values) == [True] * 3
    assert storage.batch_exists(keys) == 3
    fresh = [pages.pool.get_dummy_flat_data_page() for _ in keys]
    assert storage.batch_get(keys, fresh) == [True] * 3
    assert all_equal(fresh, expected)
    assert engine_log.errors(mark) == []
    record(ENGINE, f"batch_set + batch_exists + batch_get (tensors) into fresh pages, "
                   f"{LABEL[layout]}, {transport_of(node)}", "bytes equal")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_exists_on_a_miss(node, sglang, layout, engine_log, record):
    storage, pages = sglang.storage(layout), sglang.pages[layout]
    keys = page_keys(f"miss-{layout}", 3)
    missing = page_keys(f"never-written-{layout}", 1)[0]
    mark = engine_log.mark()
    assert storage.exists(missing) is False
    assert storage.batch_exists([missing]) == 0
    assert storage.batch_set_v1(keys, pages.take(3)) == set_results(layout, 3)
    # batch_exists answers the length of the stored prefix: the per-key answers in key order.
    assert storage.batch_exists(keys[:2] + [missing] + keys[2:]) == 2
    assert storage.batch_exists([missing] + keys) == 0
    assert engine_log.errors(mark) == []
    record(ENGINE, f"exists / batch_exists on a miss, {LABEL[layout]}, {transport_of(node)}",
           "False / 0, nothing logged")
    record(ENGINE, f"batch_exists with a missing page inside, {LABEL[layout]}, "
                   f"{transport_of(node)}", "the prefix before it")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_namespaces_are_isolated(node, sglang, layout, engine_log, record):
    """Storages with different eic_namespace (and "", the default) share a node and key names
    (same model, layout and rank) but not pages."""
    a = sglang.storage(layout)
    b = sglang.storage(layout, namespace="sglang_b")
    default = sglang.storage(layout, namespace="")
    pages = sglang.pages[layout]
    keys = page_keys(f"ns-{layout}", 2)
    src_a, src_b, dst = pages.take(2), pages.take(2), pages.take(2)
    expected_a, expected_b = pages.fill(src_a, seed=4), pages.fill(src_b, seed=5)
    untouched = pages.fill(dst, seed=6)

    assert a.batch_set_v1(keys, src_a) == set_results(layout, 2)
    assert a.batch_exists(keys) == 2
    assert b.batch_exists(keys) == 0
    assert default.batch_exists(keys) == 0
    assert not b.exists(keys[0])
    # A read in another namespace misses (SGLang logs the failed mget) and leaves the pages.
    assert b.batch_get_v1(keys, dst) == [False, False]
    assert all_equal(pages.read(dst), untouched)
    record(ENGINE, f"eic_namespace: batch_exists / batch_get_v1 of another namespace's pages, "
                   f"{LABEL[layout]}, {transport_of(node)}", "0 / False, pages untouched")

    mark = engine_log.mark()
    assert b.batch_set_v1(keys, src_b) == set_results(layout, 2)
    assert a.batch_get_v1(keys, dst) == [True, True]
    assert all_equal(pages.read(dst), expected_a)
    assert b.batch_get_v1(keys, dst) == [True, True]
    assert all_equal(pages.read(dst), expected_b)
    assert default.batch_exists(keys) == 0
    names = {ns["name"]: ns["objects"] for ns in node.stats()["namespaces"]}
    assert names.get(NAMESPACE, 0) > 0 and names.get("sglang_b", 0) > 0
    assert engine_log.errors(mark) == []
    record(ENGINE, f"eic_namespace: the same keys written in two namespaces, {LABEL[layout]}, "
                   f"{transport_of(node)}", "each reads its own bytes")


def test_delete_stays_in_its_namespace_with_kvport_eic_ns(node, sglang, monkeypatch, engine_log,
                                                          record):
    """EICStorage.delete() passes a DelOption() whose ns is never assigned; with KVPORT_EIC_NS
    set for the process (read at eic init), a storage that has named no namespace on its own
    calls yet deletes only in that one. layer_first: page_first's delete() names the bare key
    while its pages are stored as KEY_k / KEY_v, so it deletes nothing there."""
    layout = "layer_first"
    pages = sglang.pages[layout]
    keys = page_keys("delete", 1)
    src = pages.take(1)
    pages.fill(src, seed=7)
    mine, theirs = sglang.storage(layout), sglang.storage(layout, namespace="sglang_b")
    monkeypatch.setenv("KVPORT_EIC_NS", NAMESPACE)
    bounded = sglang.new_storage(layout)
    monkeypatch.delenv("KVPORT_EIC_NS")
    mark = engine_log.mark()
    for storage in (mine, theirs):
        assert storage.batch_set_v1(keys, src) == [True]
    bounded.delete(keys[0])
    assert mine.batch_exists(keys) == 0 and theirs.batch_exists(keys) == 1
    assert engine_log.errors(mark) == []
    record(ENGINE, f"delete() with KVPORT_EIC_NS, {transport_of(node)}",
           "deletes its own namespace's page only")


def test_delete_stays_in_the_namespace_its_calls_named(node, sglang, monkeypatch, engine_log,
                                                       record):
    """No token and no KVPORT_EIC_NS: EICStorage assigns eic_namespace on its SetOption,
    GetOption and ExistOption, so once it has made one of those calls its delete() (DelOption
    never assigned) means that namespace and leaves another storage's page of the same key. A
    storage whose calls have named none yet (only its warm-up, whose ExistOption is unassigned
    too) falls back to any namespace: its delete() deletes the page in every namespace."""
    layout = "layer_first"
    pages = sglang.pages[layout]
    keys = page_keys("delete-named", 1)
    src = pages.take(1)
    pages.fill(src, seed=12)
    monkeypatch.delenv("KVPORT_EIC_NS", raising=False)
    monkeypatch.delenv("KVPORT_TOKEN", raising=False)
    mine, theirs = sglang.storage(layout), sglang.storage(layout, namespace="sglang_b")
    fresh = sglang.new_storage(layout, namespace="sglang_c")
    mark = engine_log.mark()
    for storage in (mine, theirs):
        assert storage.batch_set_v1(keys, src) == [True]
    mine.delete(keys[0])
    assert mine.batch_exists(keys) == 0 and theirs.batch_exists(keys) == 1
    theirs.delete(keys[0])
    assert theirs.batch_exists(keys) == 0
    assert engine_log.errors(mark) == []
    record(ENGINE, f"delete() without a token or KVPORT_EIC_NS, {transport_of(node)}",
           "deletes its own namespace's page only (the namespace its other calls named)")
    for storage in (mine, theirs):
        assert storage.batch_set_v1(keys, src) == [True]
    fresh.delete(keys[0])
    assert mine.batch_exists(keys) == 0 and theirs.batch_exists(keys) == 0
    record(ENGINE, f"delete() of a storage whose calls named no namespace yet, "
                   f"{transport_of(node)}",
           "deletes the page in every namespace (the fallback: any namespace)")


def test_delete_stays_in_the_tokens_namespace(node, sglang, monkeypatch, engine_log, record):
    """The same delete() on a node with tokens, each storage's token naming its namespace as
    the token's default (the token file's `namespace`): the unassigned DelOption ns means the
    token's namespace, with no KVPORT_EIC_NS."""
    layout = "layer_first"
    secured = sglang.extra_node("token-namespaces", token_namespaces=(NAMESPACE, "sglang_b"))
    pages = sglang.pages[layout]
    keys = page_keys("delete-token-ns", 1)
    src = pages.take(1)
    pages.fill(src, seed=11)
    monkeypatch.delenv("KVPORT_EIC_NS", raising=False)
    monkeypatch.setenv("KVPORT_TOKEN", token_secret(NAMESPACE))
    mine = sglang.new_storage(layout, node=secured)
    monkeypatch.setenv("KVPORT_TOKEN", token_secret("sglang_b"))
    theirs = sglang.new_storage(layout, namespace="sglang_b", node=secured)
    mark = engine_log.mark()
    for storage in (mine, theirs):
        assert storage.batch_set_v1(keys, src) == [True]
    mine.delete(keys[0])
    assert mine.batch_exists(keys) == 0 and theirs.batch_exists(keys) == 1
    assert engine_log.errors(mark) == []
    record(ENGINE, f"delete() with the token's default namespace, {transport_of(node)}",
           "deletes its own namespace's page only")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_restarted_node_is_a_miss(node, sglang, layout, engine_log, record):
    restarted = sglang.extra_node("restart")
    storage, pages = sglang.storage(layout, node=restarted), sglang.pages[layout]
    keys = page_keys(f"restart-{layout}", 2)
    src, dst = pages.take(2), pages.take(2)
    expected = pages.fill(src, seed=7)
    untouched = pages.fill(dst, seed=8)
    assert storage.batch_set_v1(keys, src) == set_results(layout, 2)
    assert storage.batch_exists(keys) == 2

    restarted.restart()  # empty, same port and socket
    assert within(30, storage.batch_exists, keys) == 0
    assert within(30, storage.batch_get_v1, keys, dst) == [False, False]
    assert all_equal(pages.read(dst), untouched)
    record(ENGINE, f"node restarted between batch_set_v1 and batch_get_v1, {LABEL[layout]}, "
                   f"{transport_of(node)}", "a miss (0 / False), no exception, no hang")

    # The same storage goes on against the new node process.
    mark = engine_log.mark()
    assert within(30, storage.batch_set_v1, keys, src) == set_results(layout, 2)
    assert within(30, storage.batch_get_v1, keys, dst) == [True, True]
    assert all_equal(pages.read(dst), expected)
    assert engine_log.errors(mark) == []
    record(ENGINE, f"batch_set_v1 + batch_get_v1 after the restart, same storage, "
                   f"{LABEL[layout]}, {transport_of(node)}", "bytes equal")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_tokens(node, sglang, layout, monkeypatch, engine_log, record):
    secured = sglang.extra_node("tokens", tokens=True)
    pages = sglang.pages[layout]

    monkeypatch.delenv("KVPORT_TOKEN", raising=False)
    mark = engine_log.mark()
    with pytest.raises(RuntimeError, match=r"EIC Client Init Failed\."):
        sglang.new_storage(layout, node=secured)
    assert any("token" in m for m in engine_log.messages(mark, logger="eic"))

    monkeypatch.setenv("KVPORT_TOKEN", SECRET)
    mark = engine_log.mark()
    storage = sglang.new_storage(layout, node=secured)
    keys = page_keys(f"tokens-{layout}", 2)
    src, dst = pages.take(2), pages.take(2)
    expected = pages.fill(src, seed=9)
    pages.fill(dst, seed=10)
    assert storage.batch_set_v1(keys, src) == set_results(layout, 2)
    assert storage.batch_exists(keys) == 2
    assert storage.batch_get_v1(keys, dst) == [True, True]
    assert all_equal(pages.read(dst), expected)
    assert engine_log.errors(mark) == []
    record(ENGINE, f"node with tokens, KVPORT_TOKEN unset / set, {LABEL[layout]}, "
                   f"{transport_of(node)}",
           "RuntimeError \"EIC Client Init Failed.\" / bytes equal")


def test_no_v2_page_api_in_this_release(record):
    """SGLang's v2 pool-transfer API (batch_exists_v2 / batch_get_v2 / batch_set_v2) is not
    EICStorage's in this release: it inherits HiCacheStorage's NotImplementedError stubs. When
    a release adds it, this fails, and the v2 calls need tests here."""
    for name in ("batch_exists_v2", "batch_get_v2", "batch_set_v2"):
        assert getattr(EICStorage, name) is getattr(HiCacheStorage, name), name
    record(ENGINE, "batch_exists_v2 / batch_get_v2 / batch_set_v2",
           "not in this release's EICStorage (HiCacheStorage's NotImplementedError); "
           "HiCacheController calls batch_get_v1 / batch_set_v1 for eic")
