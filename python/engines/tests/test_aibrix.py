# SPDX-License-Identifier: Apache-2.0
"""Released AIBrix (aibrix-kvcache, python/engines/requirements.txt) against `kvport serve`
through `import eic`.

The connector is AIBrix's own `aibrix_kvcache.l2.connectors.eic.EICConnector`, built the way
AIBrix's L2Cache builds it: `Connector.create(ConnectorConfig(backend_name="EIC", ...))`, which
calls `EICConnector.from_envs` and so reads the YAML file named by
AIBRIX_KV_CACHE_OL_EIC_CONFIG_FILE (the namespace test takes the other door,
`EICConnector(EicConfig(config_file=...), ...)`). Then, as AIBrix's cache manager does, `open()`
(eic init and 2048 single-key warm-up probes) and `register_slabs(allocator.slabs)`. The async
calls (`put`, `get`, `mput`, `mget`, `exists`) run AIBrix's sync forms (`_put`, ...) on a
ThreadPoolExecutor, as in AIBrix; a few tests also call the sync forms directly.

The KV blocks are AIBrix's ManagedMemoryRegions from its own `TensorPoolAllocator.create`, on
CPU slabs, 256 KiB each (K/V x 4 layers x 16 tokens x 8 KV heads x 128, bf16), with
`block_nbytes` set and sealed as AIBrix's cache manager and L2Cache do before an mput.

Monkeypatching: none. The one CUDA-only operation on AIBrix's path is pinning: its cache
manager allocates its slabs with pin_memory=True on device "cpu", which needs a CUDA driver
(cudaHostAlloc); this host has none. The allocator is therefore built with pin_memory=False,
AIBrix's own TESTING_DISABLE_PIN_MEMORY path: a constructor argument, not a patch. Nothing else
changes, because kvport's register_memory is bookkeeping and reads every buffer as host memory.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import List, Tuple

import pytest
import torch
import yaml

import eic
from aibrix_kvcache.l2.connectors import Connector, ConnectorConfig
from aibrix_kvcache.l2.connectors.eic import EICConnector
from aibrix_kvcache.l2.connectors.eic.eic import EicConfig
from aibrix_kvcache.memory import ManagedMemoryRegion, TensorPoolAllocator
from aibrix_kvcache.status import Status

from conftest import SECRET

ENGINE = "aibrix-kvcache"
BLOCK_SHAPE = (2, 4, 16, 8, 128)  # K/V, layers, tokens per block, KV heads, head size
BLOCK_DTYPE = torch.bfloat16
BLOCK_NBYTES = math.prod(BLOCK_SHAPE) * 2
# Connector.create names the connector "<namespace>_<partition>", which EICConnector appends to
# every key (md5(key) + suffix).
KEY_SUFFIX = "aibrix_0"
# Far above a healthy call (milliseconds) and below kvport's own 10 s per-call deadline, so a
# hung call fails the test instead of the session.
CALL_TIMEOUT = 30


# --- Building AIBrix's pieces ---------------------------------------------------------------

def eic_yaml(path: Path, url: str, **overrides) -> Path:
    """AIBrix's EIC config file. Every key its open() reads is written: open() passes
    eic_log_level and eic_trans_type straight to eic.LogLevel / eic.TransportType and
    eic_log_dir to os.path.exists, so a missing one fails there before kvport is reached."""
    config = {
        "remote_url": url,
        "eic_log_dir": str(path.parent / "eic-logs"),
        "eic_log_level": 1,
        # AIBrix's default is 3 (GPUDirect), which needs CUDA; 2 is what its RDMA
        # deployments write and what kvport takes as shared memory or TCP here.
        "eic_trans_type": 2,
        "eic_kv_ttl": -1,
        "eic_kv_ns": "",
    }
    config.update(overrides)
    path.write_text(yaml.safe_dump(config))
    return path


def connector_from_envs(config_file: Path, executor) -> EICConnector:
    """The connector as AIBrix's L2Cache gets it: the backend factory, then from_envs."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("AIBRIX_KV_CACHE_OL_EIC_CONFIG_FILE", str(config_file))
        conn = Connector.create(ConnectorConfig(backend_name="EIC", namespace="aibrix",
                                                partition_id="0", executor=executor))
    assert isinstance(conn, EICConnector)
    return conn


def timed_open(conn: EICConnector) -> Tuple[Status, float]:
    start = time.perf_counter()
    status = conn.open()
    seconds = time.perf_counter() - start
    print(f"\naibrix EICConnector.open() (init + 2048 warm-up probes): {seconds:.3f} s")
    return status, seconds


def run(coroutine):
    """Awaits one of the connector's async calls, bounded. AIBrix awaits them on its own loop;
    the work itself runs on the connector's executor either way."""
    return asyncio.run(asyncio.wait_for(coroutine, CALL_TIMEOUT))


def allocate(allocator: TensorPoolAllocator, n: int) -> List[ManagedMemoryRegion]:
    status = allocator.alloc([BLOCK_NBYTES] * n)
    assert status.is_ok(), status
    mrs = list(status.get())
    assert len(mrs) == n  # alloc may hand back fewer than asked
    for mr in mrs:
        mr.block_nbytes = BLOCK_NBYTES  # what the cache manager sets after alloc
    return mrs


def filled(allocator: TensorPoolAllocator, n: int, seed: int) -> List[ManagedMemoryRegion]:
    """Blocks holding random KV tensors, sealed as L2Cache seals them before mput."""
    mrs = allocate(allocator, n)
    generator = torch.Generator().manual_seed(seed)
    for mr in mrs:
        mr.to_tensor(BLOCK_DTYPE, BLOCK_SHAPE).copy_(torch.randn(BLOCK_SHAPE, generator=generator))
        mr.seal()
    return mrs


def zeroed(allocator: TensorPoolAllocator, n: int) -> List[ManagedMemoryRegion]:
    """Destination blocks. Zeroed because the allocator reuses memory: a get that wrote
    nothing must not pass for one that wrote the right bytes."""
    mrs = allocate(allocator, n)
    for mr in mrs:
        raw(mr).zero_()
    return mrs


def raw(mr: ManagedMemoryRegion) -> torch.Tensor:
    return mr.slab[mr.addr:mr.addr + mr.length]


def same_bytes(got: ManagedMemoryRegion, expected: ManagedMemoryRegion) -> bool:
    return torch.equal(raw(got), raw(expected))


def untouched(mr: ManagedMemoryRegion) -> bool:
    return not raw(mr).any()


def counters(node) -> dict:
    return node.stats()["counters"]


def namespace_objects(node, name: str) -> int:
    return sum(n["objects"] for n in node.stats()["namespaces"] if n["name"] == name)


def transport_of(node) -> str:
    return "shm" if node.shared_memory else "tcp"


# --- Fixtures -----------------------------------------------------------------------------

@pytest.fixture(scope="module", autouse=True)
def client_environment():
    """The shell's KVPORT_TOKEN or KVPORT_EIC_NS (the namespace an unassigned `ns` means)
    would change what these tests check; test_tokens sets its token itself."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.delenv("KVPORT_TOKEN", raising=False)
        monkeypatch.delenv("KVPORT_EIC_NS", raising=False)
        yield


@pytest.fixture(scope="module")
def executor():
    # AIBrix's L2Cache runs its connector on a pool like this (l2_cache_*, 8 by default).
    pool = ThreadPoolExecutor(4, thread_name_prefix="l2_cache_")
    yield pool
    pool.shutdown(wait=False, cancel_futures=True)


@pytest.fixture(scope="module")
def allocator():
    # One 1 GiB slab (AIBrix's slab size), allocated lazily: only the blocks used are touched.
    return TensorPoolAllocator.create(capacity_nbytes=64 << 20, device="cpu", pin_memory=False)


@pytest.fixture(scope="module", params=["tcp", "shm"])
def node(request, node_factory):
    """tcp: a node without a Unix socket (remote, as far as the client can tell); shm: a node
    on this host offering shared memory, which eic_trans_type 2 then takes."""
    return node_factory(shared_memory=request.param == "shm")


class Opened:
    """One connector of a node, opened and with the allocator's slabs registered, as AIBrix's
    cache manager leaves it; what those two calls returned and logged is kept for the tests."""

    def __init__(self, node, tmp_path_factory, executor, allocator, engine_log):
        config = eic_yaml(tmp_path_factory.mktemp("aibrix") / "eic.yaml", node.url)
        self.conn = connector_from_envs(config, executor)
        mark = engine_log.mark()
        self.probes_before = counters(node)["op_mexist"]
        # The facade logs the transport init chose at INFO, below the root logger's level.
        eic_logger = logging.getLogger("eic")
        level = eic_logger.level
        eic_logger.setLevel(logging.INFO)
        try:
            self.open_status, self.open_seconds = timed_open(self.conn)
        finally:
            eic_logger.setLevel(level)
        self.connected = engine_log.messages(mark, logger="eic", level=logging.INFO)
        self.probes_after = counters(node)["op_mexist"]
        self.register_status = self.conn.register_slabs(allocator.slabs)
        self.errors = engine_log.errors(mark)


@pytest.fixture(scope="module")
def aibrix(node, tmp_path_factory, executor, allocator, engine_log):
    opened = Opened(node, tmp_path_factory, executor, allocator, engine_log)
    yield opened
    opened.conn.close()


# --- Tests --------------------------------------------------------------------------------

def test_open_runs_the_warmup_against_the_node(node, aibrix, record):
    assert aibrix.open_status.is_ok(), aibrix.open_status
    # prebuilt_connection: 2048 single-key mexists, each a round trip to this node.
    assert aibrix.probes_after - aibrix.probes_before >= 2048
    # Not the node's shm_attaches: `kvport stat` (node.stats()) attaches to the arena itself.
    path = "shared memory" if node.shared_memory else "TCP"
    assert any(f" over {path}" in m for m in aibrix.connected), aibrix.connected
    assert aibrix.errors == []
    record(ENGINE, f"open(): init + 2048 warm-up probes, {transport_of(node)}", "ok")


def test_register_slabs(node, aibrix, allocator, record):
    assert aibrix.register_status.is_ok(), aibrix.register_status
    # The facade's record of the call: AIBrix declared the CPU slab as default memory.
    slab = allocator.slabs[0]
    assert (slab.data_ptr(), slab.numel(), int(eic.MemoryType.MEMORY_DEFAULT), 0) in \
        aibrix.conn.conn.registered_regions()
    assert aibrix.errors == []
    record(ENGINE, f"register_slabs (TensorPoolAllocator's 1 GiB CPU slab), {transport_of(node)}",
           "ok (recorded; never pinned or copied)")


def test_put_exists_get(node, aibrix, allocator, engine_log, record):
    conn = aibrix.conn
    (block,) = filled(allocator, 1, seed=1)
    got, got_sync = zeroed(allocator, 2)
    before = counters(node)
    mark = engine_log.mark()
    assert run(conn.put(b"put-1", block)).is_ok()
    assert run(conn.exists(b"put-1")).is_ok()
    assert run(conn.get(b"put-1", got)).is_ok()
    assert same_bytes(got, block)
    # The sync forms the async ones wrap, as AIBrix's sync paths call them.
    assert conn._exists(b"put-1").is_ok()
    assert conn._get(b"put-1", got_sync).is_ok()
    assert same_bytes(got_sync, block)
    assert engine_log.errors(mark) == []
    after = counters(node)
    # The bytes went to the node (not a client-side cache), by the transport the node offers.
    assert after["objects"] - before["objects"] == 1
    node.assert_values_took_its_transport(before, after)
    record(ENGINE, f"put / exists / get and _exists / _get, {transport_of(node)}", "bytes equal")


def test_keys_never_put_are_not_found(node, aibrix, allocator, engine_log, record):
    conn = aibrix.conn
    got = zeroed(allocator, 3)
    mark = engine_log.mark()
    assert run(conn.exists(b"never-put-1")).is_not_found()
    assert run(conn.get(b"never-put-1", got[0])).is_not_found()
    statuses = run(conn.mget([b"never-put-2", b"never-put-3"], got[1:]))
    assert len(statuses) == 2 and all(s.is_not_found() for s in statuses), statuses
    assert all(untouched(mr) for mr in got)
    # A miss is an answer, not a failure: nothing at ERROR.
    assert engine_log.errors(mark) == []
    record(ENGINE, f"exists / get / mget of keys never put, {transport_of(node)}",
           "NOT_FOUND; buffers untouched")


def test_mput_mget(node, aibrix, allocator, engine_log, record):
    conn = aibrix.conn
    keys = [f"mput-{i}".encode() for i in range(8)]
    blocks = filled(allocator, 8, seed=2)
    got = zeroed(allocator, 8)
    before = counters(node)
    mark = engine_log.mark()
    # L2Cache splits a request into the connector's batches (op_batch) and mputs each one.
    batches = conn.get_batches(keys, blocks, 4)
    assert [len(b) for b in batches] == [4, 4]
    for batch in batches:
        batch_keys, batch_mrs = zip(*batch)
        statuses = run(conn.mput(batch_keys, batch_mrs))
        assert len(statuses) == 4 and all(s.is_ok() for s in statuses), statuses
    assert counters(node)["objects"] - before["objects"] == 8
    for batch in conn.get_batches(keys, got, 4):
        batch_keys, batch_mrs = zip(*batch)
        statuses = run(conn.mget(batch_keys, batch_mrs))
        assert len(statuses) == 4 and all(s.is_ok() for s in statuses), statuses
    assert all(same_bytes(g, b) for g, b in zip(got, blocks))
    # _mput / _mget, the sync forms, in one call each.
    blocks = filled(allocator, 3, seed=3)
    got = zeroed(allocator, 3)
    sync_keys = [f"mput-sync-{i}".encode() for i in range(3)]
    assert all(s.is_ok() for s in conn._mput(sync_keys, blocks))
    assert all(s.is_ok() for s in conn._mget(sync_keys, got))
    assert all(same_bytes(g, b) for g, b in zip(got, blocks))
    assert engine_log.errors(mark) == []
    record(ENGINE, f"mput + mget (get_batches of 4) and _mput / _mget, {transport_of(node)}",
           "bytes equal")


def test_concurrent_calls_on_the_executor(node, aibrix, allocator, engine_log, record):
    """L2Cache keeps many calls in flight on its pool; one eic.Client serves them all."""
    conn = aibrix.conn
    keys = [f"concurrent-{i}".encode() for i in range(16)]
    blocks = filled(allocator, 16, seed=4)
    got = zeroed(allocator, 16)
    mark = engine_log.mark()

    async def put_all():
        return await asyncio.gather(*(conn.put(k, b) for k, b in zip(keys, blocks)))

    async def get_all():
        return await asyncio.gather(*(conn.get(k, g) for k, g in zip(keys, got)))

    assert all(s.is_ok() for s in run(put_all()))
    assert all(s.is_ok() for s in run(get_all()))
    assert all(same_bytes(g, b) for g, b in zip(got, blocks))
    assert engine_log.errors(mark) == []
    record(ENGINE, f"16 concurrent put, then get, on the executor, {transport_of(node)}",
           "bytes equal")


def opened_connector(config: Path, executor, allocator) -> EICConnector:
    """A connector built the other way in, EicConfig with the file's path and the suffix
    Connector.create would give, then opened with the slabs registered."""
    conn = EICConnector(EicConfig(config_file=str(config)), KEY_SUFFIX, executor)
    status, _ = timed_open(conn)
    assert status.is_ok(), status
    assert conn.register_slabs(allocator.slabs).is_ok()
    return conn


def test_namespace(node, tmp_path, executor, allocator, engine_log, record):
    """Two connectors of one node with eic_kv_ns "aibrix_ns" and "aibrix_b", no token and no
    KVPORT_EIC_NS. AIBrix sets the namespace on its SetOption and GetOption but never on its
    ExistOption: kvport reads an unassigned ns as the namespace the client named on its other
    calls (docs/python.md, "Namespaces"), so once B has put or got anything, its exists stays
    in "aibrix_b"; before that, having named none, it matches any namespace."""
    # Its warm-up keys are 30 + 29 x len(eic_kv_ns) characters (the namespace joins them).
    mark = engine_log.mark()
    conn = opened_connector(eic_yaml(tmp_path / "a.yaml", node.url, eic_kv_ns="aibrix_ns"),
                            executor, allocator)
    (block,) = filled(allocator, 1, seed=5)
    got, got_elsewhere = zeroed(allocator, 2)
    objects = namespace_objects(node, "aibrix_ns")
    assert run(conn.put(b"ns-1", block)).is_ok()
    assert namespace_objects(node, "aibrix_ns") == objects + 1
    assert run(conn.exists(b"ns-1")).is_ok()
    assert run(conn.get(b"ns-1", got)).is_ok()
    assert same_bytes(got, block)
    assert engine_log.errors(mark) == []
    record(ENGINE, f"eic_kv_ns \"aibrix_ns\" (EicConfig), {transport_of(node)}",
           "open ok, put / exists / get bytes equal")

    other = opened_connector(eic_yaml(tmp_path / "b.yaml", node.url, eic_kv_ns="aibrix_b"),
                             executor, allocator)
    # B has named no namespace yet (only its warm-up ran): exists matches any namespace.
    assert run(other.exists(b"ns-1")).is_ok()
    (mine,) = filled(allocator, 1, seed=6)
    objects = namespace_objects(node, "aibrix_b")
    assert run(other.put(b"ns-2", mine)).is_ok()
    assert namespace_objects(node, "aibrix_b") == objects + 1
    # Its put named "aibrix_b": A's key is no longer seen, by exists or get.
    assert run(other.exists(b"ns-1")).is_not_found()
    assert other._exists(b"ns-1").is_not_found()
    assert run(other.get(b"ns-1", got_elsewhere)).is_not_found()
    assert untouched(got_elsewhere)
    assert run(other.exists(b"ns-2")).is_ok()
    assert run(conn.exists(b"ns-2")).is_not_found()
    assert run(conn.exists(b"ns-1")).is_ok()
    assert engine_log.errors(mark) == []
    conn.close()
    other.close()
    record(ENGINE, f"another eic_kv_ns, no token or KVPORT_EIC_NS, {transport_of(node)}",
           "get NOT_FOUND; exists NOT_FOUND once the connector's put named its namespace "
           "(found before: a client that named none matches any namespace)")


def test_gpudirect_is_refused_with_the_reason(node, tmp_path, executor, engine_log, record):
    """eic_trans_type 3, AIBrix's default. kvport has no GPUDirect transport, and on a host
    without usable CUDA it says that first; AIBrix turns init's nonzero return into an error
    Status (ret 9 is kvport's NotSupported) and runs no warm-up."""
    config = eic_yaml(tmp_path / "eic.yaml", node.url, eic_trans_type=3)
    conn = connector_from_envs(config, executor)
    probes = counters(node)["op_mexist"]
    mark = engine_log.mark()
    status, _ = timed_open(conn)
    assert status.is_error(), status
    assert "ret: 9" in str(status.value), status
    reasons = engine_log.messages(mark, logger="eic", level=40)
    assert any("GPUDirect" in m and "NotSupported" in m for m in reasons), reasons
    if not torch.cuda.is_available():
        assert any("CUDA" in m for m in reasons), reasons
    assert counters(node)["op_mexist"] == probes
    record(ENGINE, "eic_trans_type 3 (AIBrix's default) on a host without usable CUDA",
           "open() error Status (ret: 9); kvport's reason logged, no warm-up")


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_restarted_node_is_a_miss(transport, node_factory, tmp_path, executor, allocator,
                                    engine_log, record):
    node = node_factory(shared_memory=transport == "shm")
    conn = connector_from_envs(eic_yaml(tmp_path / "eic.yaml", node.url), executor)
    assert timed_open(conn)[0].is_ok()
    assert conn.register_slabs(allocator.slabs).is_ok()
    blocks = filled(allocator, 2, seed=6)
    got = zeroed(allocator, 2)
    assert run(conn.put(b"restart-1", blocks[0])).is_ok()
    node.restart()  # empty, same port and socket; over shm a new arena to map
    status = run(conn.get(b"restart-1", got[0]))
    # NOT_FOUND, not ERROR: an exception inside the connector would be an ERROR Status.
    assert status.is_not_found(), status
    assert untouched(got[0])
    assert run(conn.exists(b"restart-1")).is_not_found()
    # And the same connector works again, without a new open().
    mark = engine_log.mark()
    assert run(conn.put(b"restart-2", blocks[1])).is_ok()
    assert run(conn.get(b"restart-2", got[1])).is_ok()
    assert same_bytes(got[1], blocks[1])
    assert counters(node)["objects"] == 1
    assert engine_log.errors(mark) == []
    conn.close()
    record(ENGINE, f"node restarted between put and get, {transport}",
           "NOT_FOUND, no exception; then put / get work")


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_tokens(transport, node_factory, tmp_path, monkeypatch, executor, allocator, engine_log,
                record):
    node = node_factory(shared_memory=transport == "shm", tokens=True)
    config = eic_yaml(tmp_path / "eic.yaml", node.url, eic_kv_ns="aibrix_ns")
    monkeypatch.setenv("KVPORT_TOKEN", SECRET)
    conn = connector_from_envs(config, executor)
    mark = engine_log.mark()
    assert timed_open(conn)[0].is_ok()
    assert conn.register_slabs(allocator.slabs).is_ok()
    (block,) = filled(allocator, 1, seed=7)
    (got,) = zeroed(allocator, 1)
    assert run(conn.put(b"token-1", block)).is_ok()
    assert run(conn.exists(b"token-1")).is_ok()
    assert run(conn.get(b"token-1", got)).is_ok()
    assert same_bytes(got, block)
    assert engine_log.errors(mark) == []
    conn.close()

    monkeypatch.delenv("KVPORT_TOKEN")
    refused = connector_from_envs(config, executor)
    mark = engine_log.mark()
    status, _ = timed_open(refused)
    assert status.is_error(), status
    reasons = engine_log.messages(mark, logger="eic", level=40)
    assert any("PermissionDenied" in m and "token" in m for m in reasons), reasons
    record(ENGINE, f"node with tokens: KVPORT_TOKEN set / unset, {transport}",
           "works / open() error Status, PermissionDenied logged")
