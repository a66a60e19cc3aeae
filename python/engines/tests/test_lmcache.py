# SPDX-License-Identifier: Apache-2.0
"""Released LMCache (python/engines/requirements.txt) against `kvport serve` through `import eic`.

LMCache is built the way it builds its remote tier: `LMCacheEngineConfig.from_file` on a YAML
with `remote_url: eic://...`, the `eic_*` keys and `max_local_cpu_size` in GiB (the file is also
LMCACHE_CONFIG_FILE, which LMCache's EICConnector reads itself), LMCache's own LocalCPUBackend
(its CPU memory objects) and RemoteBackend, whose connector factory picks the EIC adapter from
the URL. The chunks are LMCache's KV_2LTD memory objects of a small model (4 layers, 8 KV heads
of 128, bf16, 256 tokens: 4 MiB a chunk). Nothing is monkeypatched on the success paths: this
LMCache runs on the CPU with its own CPU platform, and it loads libcudart.so at construction,
which this host has (without a driver); on a host without it the module applies
kvport.lmcache.patch() first, as a user there must. test_patch_on_a_host_without_libcudart
stands in for such a host where libcudart is present.

Each LMCache instance here is its own event loop and RemoteBackend; LMCache keeps process-wide
state (its remote metadata format, stats monitors), which every instance here sets alike.
"""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import json
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import List, Optional

import pytest
import torch
import yaml

from lmcache.utils import CacheEngineKey
from lmcache.v1.cache_engine import LMCacheEngineBuilder
from lmcache.v1.gpu_connector.mock_gpu_connector import MockGPUConnector
from lmcache.v1.config import LMCacheEngineConfig
from lmcache.v1.memory_management import MemoryFormat
from lmcache.v1.metadata import LMCacheMetadata
from lmcache.v1.storage_backend.connector import CreateConnector
from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend
from lmcache.v1.storage_backend.remote_backend import RemoteBackend

from conftest import SECRET, token_secret

try:
    ctypes.CDLL("libcudart.so")
except OSError:
    # A host without the CUDA runtime (no toolkit): this LMCache's EICConnector loads it
    # unconditionally, so such a host needs kvport.lmcache.patch(), as docs/python.md says.
    import kvport.lmcache

    kvport.lmcache.patch()

ENGINE = "lmcache"
MODEL = "kvport-test/llama-4l"
KV_SHAPE = (4, 2, 256, 8, 128)  # layers, K/V, tokens per chunk, KV heads, head size
HERE = Path(__file__).resolve().parent


def lmcache_yaml(path: Path, url: str, **overrides) -> Path:
    config = {
        "chunk_size": KV_SHAPE[2],
        "local_cpu": False,
        "max_local_cpu_size": 0.25,  # GiB: LMCache's pinned pool, where its chunks live
        "remote_url": url,
        "remote_serde": "naive",
        "blocking_timeout_secs": 10,
        "eic_trans_type": 2,
        "eic_kv_ns": "kvport_ns",
        "eic_kv_ttl": -1,
        "eic_log_dir": str(path.parent / "eic-logs"),
        "eic_log_level": 1,
    }
    config.update(overrides)
    path.write_text(yaml.safe_dump(config))
    return path


def metadata() -> LMCacheMetadata:
    return LMCacheMetadata(model_name=MODEL, world_size=1, local_world_size=1, worker_id=0,
                           local_worker_id=0, kv_dtype=torch.bfloat16, kv_shape=KV_SHAPE)


def key(chunk_hash: int) -> CacheEngineKey:
    return CacheEngineKey(MODEL, 1, 0, chunk_hash, torch.bfloat16)


class EventLoop:
    """The event loop thread LMCache's connectors run their jobs on (vLLM's worker has one)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine, timeout: float = 30):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        stop_loop(self.loop, self.thread)


def stop_loop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    """Cancels what LMCache left running on an event loop (its priority executor's workers:
    LMCache's own close() of this connector never returns, see docs/python.md), then stops the
    loop and joins its thread, so nothing is destroyed pending and no thread outlives the test
    (a StorageManager's loop thread is not a daemon: the process would not exit)."""

    async def cancel_all():
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run_coroutine_threadsafe(cancel_all(), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)
    assert not thread.is_alive(), "LMCache's event loop thread did not stop"
    loop.close()


class LMCache(EventLoop):
    """One LMCache worker's remote tier: its config, LocalCPUBackend and RemoteBackend, for the
    model `md` describes (default: metadata())."""

    def __init__(self, config_file: Path, monkeypatch, md: Optional[LMCacheMetadata] = None):
        super().__init__()
        monkeypatch.setenv("LMCACHE_CONFIG_FILE", str(config_file))
        self.config = LMCacheEngineConfig.from_file(str(config_file))
        self.metadata = md or metadata()
        self.local = LocalCPUBackend(self.config, self.metadata)
        start = time.perf_counter()
        self.remote = RemoteBackend(self.config, self.metadata, self.loop, self.local)
        self.construct_seconds = time.perf_counter() - start

    @property
    def eic(self):
        """LMCache's EICConnector inside the InstrumentedRemoteConnector wrapper."""
        return self.remote.connection.getWrappedConnector()

    def chunk(self, seed: int):
        """A memory object of the model's chunk, random bytes written through raw_data (a
        multi-group object has no single `.tensor`: its groups differ in shape)."""
        obj = self.local.allocate(self.metadata.get_shapes(), self.metadata.get_dtypes(),
                                  MemoryFormat.KV_2LTD)
        assert obj is not None, "LMCache's CPU pool is full"
        generator = torch.Generator().manual_seed(seed)
        size = obj.get_size()
        obj.raw_data[:size].copy_(torch.randint(0, 256, (size,), dtype=torch.uint8,
                                                generator=generator))
        return obj

    def put(self, chunk_hash: int, seed: int) -> torch.Tensor:
        """Stores a chunk as LMCache's storage manager does (a put task, then the caller's
        reference dropped) and returns a copy of its bytes."""
        obj = self.chunk(seed)
        expected = obj.tensor.clone()
        self.remote.submit_put_task(key(chunk_hash), obj).result(30)
        obj.ref_count_down()
        return expected


def same(got, expected: torch.Tensor) -> bool:
    """Whether LMCache's memory object holds exactly `expected`; gives the object back to
    LMCache's allocator, as LMCache's retrieve path does once it has copied it out."""
    if got is None:
        return False
    # As bytes: the chunks hold random bytes, some of which read as bf16 NaNs.
    equal = torch.equal(got.tensor.view(torch.uint8), expected.view(torch.uint8))
    got.ref_count_down()
    return equal


@pytest.fixture(scope="module", params=["tcp", "shm"])
def node(request, node_factory):
    """tcp: a node without a Unix socket (a remote node, as far as the client can tell); shm:
    a node on this host offering shared memory, which eic_trans_type 2 then takes."""
    return node_factory(shared_memory=request.param == "shm")


@pytest.fixture(scope="module")
def lmcache(node, tmp_path_factory, engine_log):
    monkeypatch = pytest.MonkeyPatch()
    mark = engine_log.mark()
    instance = LMCache(lmcache_yaml(tmp_path_factory.mktemp("lmc") / "lmcache.yaml", node.url),
                       monkeypatch)
    instance.construction_errors = engine_log.errors(mark)
    instance.connected = engine_log.messages(mark, logger="eic", level=logging.INFO)
    yield instance
    instance.close()
    monkeypatch.undo()


def transport_of(node) -> str:
    return "shm" if node.shared_memory else "tcp"


def test_construction_runs_the_warmup_against_the_node(node, lmcache, engine_log, record):
    assert lmcache.remote.connection is not None
    counters = node.stats()["counters"]
    # LMCache's prebuilt_connection: 2048 single-key probes before the constructor returns.
    assert counters["op_mexist"] >= 2048
    # The transport init chose, as the eic drop-in logs it (not the node's shm_attaches:
    # `kvport stat` attaches to the arena itself).
    path = "shared memory" if node.shared_memory else "TCP"
    assert any(f" over {path}" in m for m in lmcache.connected), lmcache.connected
    assert lmcache.construction_errors == []
    record(ENGINE, f"RemoteBackend construction with 2048 warm-up probes, {transport_of(node)}",
           "ok")
    print(f"LMCache RemoteBackend construction: {lmcache.construct_seconds:.2f} s")


def test_put_contains_get(node, lmcache, engine_log, record):
    mark = engine_log.mark()
    expected = lmcache.put(101, seed=1)
    assert lmcache.remote.contains(key(101))
    assert lmcache.remote.connection.exists_sync(key(101))
    assert lmcache.run(lmcache.remote.connection.exists(key(101)))
    assert same(lmcache.remote.get_blocking(key(101)), expected)
    assert not lmcache.remote.contains(key(109))
    assert lmcache.remote.get_blocking(key(109)) is None
    assert engine_log.errors(mark) == []
    record(ENGINE, f"submit_put_task, contains / exists / exists_sync, get_blocking, "
                   f"{transport_of(node)}", "bytes equal; a miss is False / None")


def test_batched_calls(node, lmcache, engine_log, record):
    mark = engine_log.mark()
    keys = [key(h) for h in (201, 202, 203)]
    objs = [lmcache.chunk(seed) for seed in (21, 22, 23)]
    expected = [o.tensor.clone() for o in objs]
    # The connector's own batched put (one mset of meta + chunk pairs); it takes the objects'
    # references, as RemoteBackend hands them over.
    lmcache.run(lmcache.remote.connection.batched_put(keys, objs))
    missing = key(299)
    probe = [keys[0], keys[1], missing, keys[2]]
    # LMCache counts hits by prefix: two, then the hole.
    assert lmcache.run(lmcache.remote.batched_async_contains("lookup-1", probe)) == 2
    got = lmcache.remote.batched_get_blocking([keys[0], missing, keys[2]])
    assert len(got) == 3 and got[1] is None
    assert same(got[0], expected[0]) and same(got[2], expected[2])
    got = lmcache.run(lmcache.remote.batched_get_non_blocking("lookup-1", [keys[1], missing]))
    assert len(got) == 1 and same(got[0], expected[1])
    assert engine_log.errors(mark) == []
    record(ENGINE, f"batched_put, batched_async_contains, batched_get_blocking, "
                   f"batched_get_non_blocking, {transport_of(node)}",
           "bytes equal; hits counted to the first miss; misses None / left out")


def test_remote_backend_batched_submit(node, lmcache, engine_log, record):
    """RemoteBackend.batched_submit_put_task: this connector says support_batched_put() False,
    so LMCache submits one put task per chunk and returns no future; the tasks are done when
    they leave RemoteBackend.put_tasks."""
    mark = engine_log.mark()
    keys = [key(h) for h in (301, 302)]
    objs = [lmcache.chunk(seed) for seed in (31, 32)]
    expected = [o.tensor.clone() for o in objs]
    lmcache.remote.batched_submit_put_task(keys, objs)
    deadline = time.monotonic() + 30
    while any(lmcache.remote.exists_in_put_tasks(k) for k in keys):
        assert time.monotonic() < deadline, "LMCache's put tasks did not finish"
        time.sleep(0.01)
    for o in objs:
        o.ref_count_down()
    assert lmcache.remote.batched_contains(keys) == 2
    assert all(same(lmcache.remote.get_blocking(k), e) for k, e in zip(keys, expected))
    assert engine_log.errors(mark) == []
    record(ENGINE, f"batched_submit_put_task, batched_contains, {transport_of(node)}",
           "bytes equal")


def test_delete(node, lmcache, engine_log, record):
    lmcache.put(401, seed=4)
    mark = engine_log.mark()
    # The connector's own delete: mdel of the chunk key with no option (any namespace).
    assert lmcache.eic.delete_sync(key(401).to_string())
    assert not lmcache.remote.contains(key(401))
    assert lmcache.remote.get_blocking(key(401)) is None
    assert engine_log.errors(mark) == []
    # RemoteBackend.remove calls remove_sync, which this release's EICConnector does not
    # define: LMCache logs the NotImplementedError and answers False (LMCache's gap, not
    # kvport's; nothing reaches the node).
    lmcache.put(402, seed=5)
    assert lmcache.remote.remove(key(402)) is False
    assert lmcache.remote.contains(key(402))
    record(ENGINE, f"delete_sync, {transport_of(node)}", "deleted; then a miss")
    record(ENGINE, "RemoteBackend.remove", "False: the release's EICConnector has no remove_sync")


def test_a_second_process_reads_what_the_first_wrote(node, lmcache, tmp_path, engine_log, record):
    """LMCache's cross-instance reuse: another worker process, its own LMCache, the same node."""
    expected = lmcache.put(501, seed=50)
    digest = hashlib.sha256(expected.view(torch.uint8).numpy().tobytes()).hexdigest()
    config = lmcache_yaml(tmp_path / "lmcache.yaml", node.url)
    out = subprocess.run([sys.executable, str(HERE / "lmcache_reader.py"), str(config), "501"],
                         capture_output=True, text=True, timeout=120, cwd=HERE)
    assert out.returncode == 0, out.stderr[-4000:]
    assert out.stdout.split()[-1] == digest
    assert "Traceback" not in out.stderr and " ERROR" not in out.stderr, out.stderr[-4000:]
    record(ENGINE, f"a second LMCache process reads the first one's chunk, {transport_of(node)}",
           "bytes equal")


def test_namespaces(node, lmcache, tmp_path, engine_log, record):
    """eic_kv_ns "" and eic_kv_ns set: each instance finds what it wrote."""
    mark = engine_log.mark()
    with pytest.MonkeyPatch.context() as monkeypatch:
        other = LMCache(lmcache_yaml(tmp_path / "lmcache.yaml", node.url, eic_kv_ns=""),
                        monkeypatch)
        try:
            expected = other.put(601, seed=60)
            assert other.remote.contains(key(601))
            assert same(other.remote.get_blocking(key(601)), expected)
            assert other.eic.delete_sync(key(601).to_string())
            assert not other.remote.contains(key(601))
        finally:
            other.close()
    assert engine_log.errors(mark) == []
    record(ENGINE, f"eic_kv_ns \"\" and \"kvport_ns\", {transport_of(node)}",
           "put, contains, get, delete_sync")


def test_gpudirect_is_refused_with_the_reason(node, tmp_path, monkeypatch, engine_log, record):
    """eic_trans_type 3 (LMCache's default) on a host without usable CUDA: LMCache's connector
    raises from its constructor; the reason is kvport's, logged at ERROR on the eic logger."""
    config = lmcache_yaml(tmp_path / "lmcache.yaml", node.url, eic_trans_type=3)
    monkeypatch.setenv("LMCACHE_CONFIG_FILE", str(config))
    mark = engine_log.mark()
    loop = EventLoop()
    try:
        lmc_config = LMCacheEngineConfig.from_file(str(config))
        local = LocalCPUBackend(lmc_config, metadata())
        with pytest.raises(RuntimeError,
                           match="Failed to initialize eic client with error code: 9"):
            CreateConnector(node.url, loop.loop, local, lmc_config, metadata())
        reasons = engine_log.messages(mark, logger="eic", level=logging.ERROR)
        assert any("GPUDirect" in m and "CUDA" in m for m in reasons), reasons
        # Through RemoteBackend LMCache keeps running without its remote tier.
        remote = RemoteBackend(lmc_config, metadata(), loop.loop, local)
        assert remote.connection is None
    finally:
        loop.close()
    record(ENGINE, "eic_trans_type 3 on a host without usable CUDA",
           "RuntimeError at construction (error code 9); kvport's reason logged")


def test_a_restarted_node_is_a_miss(node_factory, tmp_path, monkeypatch, engine_log, record):
    node = node_factory(shared_memory=True)
    instance = LMCache(lmcache_yaml(tmp_path / "lmcache.yaml", node.url), monkeypatch)
    try:
        instance.put(701, seed=70)
        assert instance.remote.contains(key(701))
        node.restart()  # empty, same port and socket
        assert not instance.remote.contains(key(701))
        assert instance.remote.get_blocking(key(701)) is None
        expected = instance.put(702, seed=71)  # and the client works again
        assert same(instance.remote.get_blocking(key(702)), expected)
    finally:
        instance.close()
    record(ENGINE, "node restarted between put and get", "a miss (None), no exception")


def test_tokens(node_factory, tmp_path, monkeypatch, engine_log, record):
    node = node_factory(shared_memory=True, tokens=True)
    config = lmcache_yaml(tmp_path / "lmcache.yaml", node.url)
    monkeypatch.setenv("KVPORT_TOKEN", SECRET)
    mark = engine_log.mark()
    instance = LMCache(config, monkeypatch)
    try:
        expected = instance.put(801, seed=80)
        assert same(instance.remote.get_blocking(key(801)), expected)
    finally:
        instance.close()
    assert engine_log.errors(mark) == []
    monkeypatch.delenv("KVPORT_TOKEN")
    mark = engine_log.mark()
    refused = LMCache(config, monkeypatch)
    refused.close()
    assert refused.remote.connection is None
    reasons = engine_log.messages(mark, logger="eic", level=logging.ERROR)
    assert any("PermissionDenied" in m for m in reasons), reasons
    record(ENGINE, "node with tokens: KVPORT_TOKEN set / unset",
           "works / construction fails, PermissionDenied logged")


def test_token_namespaces(node_factory, tmp_path, monkeypatch, engine_log, record):
    """Two LMCache instances on one node, each with a token whose default namespace is its
    eic_kv_ns (both tokens granted every namespace, so shared memory stays on): LMCache's
    connector names no namespace in its probes and deletes, and those stay inside the token's.
    Without the token's namespace they would search every namespace: B would see A's chunk as
    present (then miss it on get) and its delete_sync would delete it."""
    node = node_factory(shared_memory=True, token_namespaces=("kvport_ns", "other"))
    mark = engine_log.mark()
    monkeypatch.setenv("KVPORT_TOKEN", token_secret("kvport_ns"))
    a = LMCache(lmcache_yaml(tmp_path / "a.yaml", node.url), monkeypatch)
    monkeypatch.setenv("KVPORT_TOKEN", token_secret("other"))
    b = LMCache(lmcache_yaml(tmp_path / "b.yaml", node.url, eic_kv_ns="other"), monkeypatch)
    try:
        expected = a.put(901, seed=90)
        assert a.remote.contains(key(901))
        assert not b.remote.contains(key(901))
        assert b.remote.get_blocking(key(901)) is None
        b.eic.delete_sync(key(901).to_string())  # its answer does not say what was deleted
        assert a.remote.contains(key(901))
        assert same(a.remote.get_blocking(key(901)), expected)
        mine = b.put(902, seed=91)
        assert same(b.remote.get_blocking(key(902)), mine)
        assert not a.remote.contains(key(902))
        # Each instance's data path: the arena (shared memory), as without tokens.
        assert any("shared memory" in m for m in engine_log.messages(mark, logger="eic",
                                                                      level=logging.INFO))
    finally:
        a.close()
        b.close()
    assert engine_log.errors(mark) == []
    record(ENGINE, "two tokens with default namespaces kvport_ns / other, shm",
           "each sees only its namespace: contains, get, delete_sync")


def test_namespaces_without_tokens(node, tmp_path, monkeypatch, engine_log, record):
    """Two LMCache instances on one node with eic_kv_ns "lmc_a" and "lmc_b", no token and no
    KVPORT_EIC_NS. LMCache's connector sets eic_kv_ns on its SetOption and GetOption only; its
    probes (contains, exists_sync, batched_async_contains) and delete_sync name no namespace,
    and kvport reads those as the namespace the client names on its other calls: the eic_kv_ns
    of its LMCACHE_CONFIG_FILE, known at init, so even before B's first put or get its probes
    never find A's chunks (which it could not read: an engine that believed them would answer
    with nothing)."""
    monkeypatch.delenv("KVPORT_EIC_NS", raising=False)
    monkeypatch.delenv("KVPORT_TOKEN", raising=False)
    mark = engine_log.mark()
    a = LMCache(lmcache_yaml(tmp_path / "a.yaml", node.url, eic_kv_ns="lmc_a"), monkeypatch)
    b = LMCache(lmcache_yaml(tmp_path / "b.yaml", node.url, eic_kv_ns="lmc_b"), monkeypatch)
    try:
        expected = a.put(1001, seed=100)
        assert not b.remote.contains(key(1001))  # its config's eic_kv_ns from the start
        assert b.remote.get_blocking(key(1001)) is None  # its get names "lmc_b"
        assert not b.remote.contains(key(1001))
        assert not b.remote.connection.exists_sync(key(1001))
        assert b.run(b.remote.batched_async_contains("lookup-b", [key(1001)])) == 0
        b.eic.delete_sync(key(1001).to_string())  # its answer does not say what was deleted
        assert a.remote.contains(key(1001))
        assert same(a.remote.get_blocking(key(1001)), expected)
        mine = b.put(1002, seed=101)
        assert b.remote.contains(key(1002))
        assert not a.remote.contains(key(1002))
        a.eic.delete_sync(key(1002).to_string())
        assert same(b.remote.get_blocking(key(1002)), mine)
        assert b.eic.delete_sync(key(1002).to_string())
        assert not b.remote.contains(key(1002))
        names = {n["name"]: n["objects"] for n in node.stats()["namespaces"]}
        assert names.get("lmc_a") == 1 and names.get("lmc_b", 0) == 0
    finally:
        a.close()
        b.close()
    assert engine_log.errors(mark) == []
    record(ENGINE, f"eic_kv_ns lmc_a / lmc_b, no token or KVPORT_EIC_NS, {transport_of(node)}",
           "each sees and deletes only its namespace (contains, exists_sync, "
           "batched_async_contains, delete_sync) from its first call: eic_kv_ns read from "
           "LMCACHE_CONFIG_FILE at init")


PATCH_CHECK = """
import ctypes
import lmcache.v1.storage_backend.connector.eic_connector as connector
before = dict(vars(connector))
import kvport.lmcache
assert dict(vars(connector)) == before, "importing kvport.lmcache changed the connector module"
assert not hasattr(connector, "_LMCACHE_EIC_CUDART_OPTIONAL")
print(kvport.lmcache.patch())
changed = {k for k in vars(connector) if vars(connector)[k] is not before.get(k)}
assert changed == {"ctypes", "_kvport_lmcache_patched"}, changed
assert connector.ctypes is not ctypes and kvport.lmcache.is_patched()
"""


def test_patch_on_the_released_lmcache(record):
    """This release still loads libcudart.so unconditionally in EICConnector.__init__, so
    kvport.lmcache.patch() applies to it; importing kvport.lmcache alone changes nothing, and
    patch() changes only the connector module's own `ctypes` name (a process of its own: the
    patch lasts for the process)."""
    out = subprocess.run([sys.executable, "-c", PATCH_CHECK], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-4000:]
    assert out.stdout.split()[-1] == "patched"
    record(ENGINE, "kvport.lmcache.patch()", "patched (this core loads libcudart unconditionally)")


def test_patch_on_a_host_without_libcudart(node, tmp_path, monkeypatch, engine_log, record):
    """A host without libcudart (Ascend, CPU-only): the real CDLL raising OSError for it stands
    in for the missing file. The patched connector constructs and works with eic_trans_type 2."""
    import kvport.lmcache
    kvport.lmcache.patch()
    real_cdll = ctypes.CDLL

    def cdll_without_cudart(name, *args, **kwargs):
        if str(name).startswith("libcudart"):
            raise OSError(f"{name}: cannot open shared object file: No such file or directory")
        return real_cdll(name, *args, **kwargs)

    monkeypatch.setattr(ctypes, "CDLL", cdll_without_cudart)
    instance = LMCache(lmcache_yaml(tmp_path / "lmcache.yaml", node.url), monkeypatch)
    try:
        assert instance.remote.connection is not None
        expected = instance.put(901, seed=90)
        assert same(instance.remote.get_blocking(key(901)), expected)
    finally:
        instance.close()
    record(ENGINE, f"kvport.lmcache.patch() without libcudart, {transport_of(node)}",
           "constructs; put and get work")


class CPUKVConnector(MockGPUConnector):
    """The one stand-in for what needs a GPU: vLLM's paged GPU connector copies chunks between
    the GPU's KV cache and LMCache's memory objects; this one copies them between a CPU tensor
    [layers, K/V, tokens, heads x head size] and the objects ([K/V, layers, tokens, hidden],
    LMCache's KV_2LTD), so that LMCacheEngine's own store and retrieve run unchanged around it.
    LMCache's MockGPUConnector (its standalone mode) supplies the rest of the interface."""

    def __init__(self, kv: torch.Tensor):
        super().__init__(KV_SHAPE)
        self.kv = kv

    def batched_from_gpu(self, memory_objs, starts, ends, **kwargs):
        for obj, start, end in zip(memory_objs, starts, ends):
            obj.tensor[:, :, :end - start].copy_(self.kv[:, :, start:end].transpose(0, 1))

    def batched_to_gpu(self, memory_objs, starts, ends, **kwargs):
        for obj, start, end in zip(memory_objs, starts, ends):
            self.kv[:, :, start:end].copy_(obj.tensor[:, :, :end - start].transpose(0, 1))


def test_lmcache_engine_store_and_retrieve(node_factory, tmp_path, monkeypatch, engine_log,
                                           record):
    """The path vLLM takes: LMCacheEngine (LMCacheEngineBuilder, post_init's StorageManager
    with its own RemoteBackend) stores 1024 tokens' KV cache as 4 chunks on the node; a second
    engine, with nothing local, retrieves all 1024 tokens from the node, bytes equal."""
    node = node_factory(shared_memory=True)
    config_file = lmcache_yaml(tmp_path / "lmcache.yaml", node.url)
    monkeypatch.setenv("LMCACHE_CONFIG_FILE", str(config_file))
    config = LMCacheEngineConfig.from_file(str(config_file))
    layers, _, _, heads, head_size = KV_SHAPE
    kv = torch.randn(layers, 2, 1024, heads * head_size).to(torch.bfloat16)
    tokens = torch.arange(1024)
    mark = engine_log.mark()
    engines = []
    try:
        for name, kv_cache in (("kvport-writer", kv), ("kvport-reader", torch.zeros_like(kv))):
            engines.append(LMCacheEngineBuilder.get_or_create(
                name, config, metadata(), CPUKVConnector(kv_cache), lambda t, r: None,
                lambda o, r: o))
            engines[-1].post_init()
        writer, reader = engines
        writer.store(tokens)
        # LMCache hands its remote puts to its event loop: store() returns before the last
        # chunk reaches the node (seen once in 70 runs), so wait for them, bounded.
        deadline = time.monotonic() + 30
        while (node.stats()["counters"]["objects"] < 1024 // KV_SHAPE[2]
               and time.monotonic() < deadline):
            time.sleep(0.01)
        assert node.stats()["counters"]["objects"] == 1024 // KV_SHAPE[2]
        mask = reader.retrieve(tokens)
        assert int(mask.sum()) == 1024
        assert torch.equal(reader.gpu_connector.kv, kv)
        assert engine_log.errors(mark) == []
    finally:
        # LMCacheEngineBuilder.destroy would close the EIC connector, which never returns.
        for engine in engines:
            stop_loop(engine.storage_manager.loop, engine.storage_manager.thread)
    record(ENGINE, "LMCacheEngine store / retrieve of 1024 tokens (a CPU KV connector for "
                   "vLLM's GPU one), shm", "4 chunks on the node; all 1024 tokens retrieved by "
                                           "another engine, bytes equal")


def test_two_kv_groups(node_factory, tmp_path, record):
    """Chunks of a model with two KV layer groups, in a process of its own (lmcache_groups.py:
    LMCache's remote metadata format is process-wide)."""
    node = node_factory(shared_memory=True)
    config = lmcache_yaml(tmp_path / "lmcache.yaml", node.url)
    out = subprocess.run([sys.executable, str(HERE / "lmcache_groups.py"), str(config)],
                         capture_output=True, text=True, timeout=180, cwd=HERE)
    assert out.returncode == 0, out.stderr[-4000:]
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["groups"] == 2 and seen["meta_bytes"] == 48
    # LMCache's own limit: this release's connector cannot write a multi-group chunk.
    assert seen["put"].startswith("RuntimeError: shape")
    assert seen["batched_put"].startswith("RuntimeError: shape")
    assert seen["contains"] == [False, False, False]
    assert node.stats()["counters"]["objects"] == 1  # the one-group chunk only
    record(ENGINE, "two KV layer groups: put / batched_put",
           "RuntimeError inside LMCache (its connector reads memory_obj.tensor); nothing stored")
    # kvport's exact-size reads: a one-group chunk (28-byte meta) read by the two-group
    # instance (48-byte meta buffer) is a miss (SIZE_MISMATCH), never a hit with bad shapes.
    assert seen["one_group_chunk"] is True
    assert "err_code 18" in out.stderr and "Traceback" not in out.stderr
    record(ENGINE, "two KV layer groups: get of a one-group chunk",
           "a miss (SIZE_MISMATCH, logged by LMCache), no exception")
