# SPDX-License-Identifier: Apache-2.0
"""kvport as an L2 backend of released LMCache's multiprocess (MP) mode: its `native_plugin` L2
adapter loading kvport.lmcache_mp.L2Connector (the C++ connector in the kvport wheel) against
`kvport serve` processes.

  - LMCache's own check, `python -m lmcache.v1.basic_check --mode test_l2_adapter`, run as a
    user runs it (docs/python.md, "LMCache multiprocess mode"), over shared memory and over TCP
    with a token;
  - LMCache's NativeConnectorL2Adapter built by its own factory (create_l2_adapter) from the
    same JSON: per-key lookups, loads into its memory objects, deletes on eviction, usage;
  - the connector itself: per-key codes (a miss, a value of another length, a namespace the
    token does not grant), a wrong token, a node that goes away with calls in flight, close()
    with calls in flight.

Every wait is bounded (poll with a timeout); no test sleeps.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Tuple

import pytest
import torch

import kvport
from kvport.lmcache_mp import L2Connector

from conftest import SECRET, Node
from lmcache_mp_objects import memory_obj, wait_fd

from lmcache.v1.distributed.api import ObjectKey
from lmcache.v1.distributed.internal_api import L1MemoryDesc
from lmcache.v1.distributed.l2_adapters import create_l2_adapter
from lmcache.v1.distributed.l2_adapters.config import parse_args_to_l2_adapters_config

ENGINE = "lmcache"
WAIT_S = 30  # the most any completion here may take
NS = "lmcache_mp"


def adapter_json(node: Node, **params) -> str:
    adapter_params = {"endpoint": node.endpoint, "namespace": NS}
    adapter_params.update(params)
    return json.dumps({"type": "native_plugin", "module_path": "kvport.lmcache_mp",
                       "class_name": "L2Connector", "adapter_params": adapter_params})


def wait_completions(connector: L2Connector, count: int, codes: bool = False) -> List[Tuple]:
    """The next `count` completions, polled on the connector's eventfd as LMCache's demux
    thread polls it; fails after WAIT_S."""
    poller = select.poll()
    poller.register(connector.event_fd(), select.POLLIN)
    done: List[Tuple] = []
    while len(done) < count:
        assert poller.poll(WAIT_S * 1000), f"{count - len(done)} completions never came"
        done += connector.drain_completions(codes=codes)
    assert len(done) == count
    return done


def one(connector: L2Connector, future_id: int, codes: bool = False) -> Tuple:
    (completion,) = wait_completions(connector, 1, codes)
    assert completion[0] == future_id
    return completion


def chunk(i: int, size: int = 64 << 10) -> bytearray:
    return bytearray((i * 7 + j) % 251 for j in range(256)) * (size // 256)


# --- LMCache's own check -----------------------------------------------------------------------

CHECK_LINES = ["Validation: 5/5 correctly absent", "Batch store OK", "Validation: 5/5 found",
               "Validation (loaded): 5/5", "Validation (content): 5/5"]


@pytest.mark.parametrize("shared_memory", [True, False], ids=["shm", "tcp-token"])
def test_lmcache_basic_check_passes(node_factory, record, shared_memory):
    node = node_factory(shared_memory=shared_memory, tokens=not shared_memory)
    params = {} if shared_memory else {"token": SECRET}
    before = node.stats()["counters"]
    run = subprocess.run(
        [sys.executable, "-m", "lmcache.v1.basic_check", "--mode", "test_l2_adapter",
         "--l2-adapter", adapter_json(node, **params)],
        capture_output=True, text=True, timeout=180, env=dict(os.environ, PYTHONHASHSEED="0"))
    out = run.stdout
    assert run.returncode == 0, run.stderr
    assert "Created native plugin L2 adapter: kvport.lmcache_mp.L2Connector" in run.stderr
    for line in CHECK_LINES:
        assert line in out, out
    assert "Test Failed" not in out and "FAIL" not in out, out
    assert "does not expose submit_batch_delete" not in run.stderr
    after = node.stats()["counters"]
    node.assert_values_took_its_transport(before, after)
    record(ENGINE, "MP mode: basic_check --mode test_l2_adapter with native_plugin "
           f"kvport.lmcache_mp, {'shm' if shared_memory else 'tcp, token'}",
           "absent 5/5, store OK, found 5/5, loaded 5/5, content 5/5")


# --- LMCache's NativeConnectorL2Adapter over the connector -------------------------------------


def test_lmcache_adapter_lookup_load_delete(node_factory, record):
    node = node_factory(shared_memory=True)
    config = parse_args_to_l2_adapters_config(
        argparse.Namespace(l2_adapter=[adapter_json(node)]))
    elements = 4096
    l1 = torch.zeros(8 * elements, dtype=torch.float32)
    adapter = create_l2_adapter(config.adapters[0], l1_memory_desc=L1MemoryDesc(
        ptr=l1.data_ptr(), size=l1.numel() * 4, align_bytes=4))
    try:
        keys = [ObjectKey(chunk_hash=ObjectKey.IntHash2Bytes(1000 + i), model_name="m/mp",
                          kv_rank=0) for i in range(4)]
        slots = [l1[i * elements:(i + 1) * elements] for i in range(8)]
        for i in range(3):
            slots[i].copy_(torch.arange(elements, dtype=torch.float32) * (i + 1))
        stored = adapter.submit_store_task(keys[:3], [memory_obj(s) for s in slots[:3]])
        wait_fd(adapter.get_store_event_fd(), WAIT_S)
        assert adapter.pop_completed_store_tasks()[stored].is_successful()
        assert adapter.get_usage().total_bytes_used == 3 * elements * 4

        # Per key: the three stored are found, the fourth is not.
        lookup = adapter.submit_lookup_and_lock_task(keys, {})
        wait_fd(adapter.get_lookup_and_lock_event_fd(), WAIT_S)
        bitmap = adapter.query_lookup_and_lock_result(lookup)
        assert [bitmap.test(i) for i in range(4)] == [True, True, True, False]
        adapter.submit_unlock(keys[:3])

        # Loads fill LMCache's memory objects in place; the missing key is not loaded.
        targets = [memory_obj(s) for s in slots[4:8]]
        load = adapter.submit_load_task(keys, targets)
        wait_fd(adapter.get_load_event_fd(), WAIT_S)
        bitmap = adapter.query_load_result(load)
        assert [bitmap.test(i) for i in range(4)] == [True, True, True, False]
        for i in range(3):
            assert torch.equal(slots[4 + i], slots[i])
        assert torch.count_nonzero(slots[7]) == 0

        # LMCache's eviction deletes through submit_batch_delete (blocking in adapter.delete).
        adapter.delete(keys[:2])
        assert adapter.get_usage().total_bytes_used == elements * 4
        lookup = adapter.submit_lookup_and_lock_task(keys, {})
        wait_fd(adapter.get_lookup_and_lock_event_fd(), WAIT_S)
        bitmap = adapter.query_lookup_and_lock_result(lookup)
        assert [bitmap.test(i) for i in range(4)] == [False, False, True, False]
        record(ENGINE, "MP mode: NativeConnectorL2Adapter store, lookup, load, delete, shm",
               "per-key bitmaps; loaded in place, bytes equal; deleted keys absent, usage down")
    finally:
        adapter.close()


# --- The connector itself ----------------------------------------------------------------------

@pytest.mark.parametrize("transport_type", [0, 1], ids=["shm", "tcp"])
def test_per_key_results_miss_other_length_and_delete(node_factory, transport_type):
    node = node_factory(shared_memory=True)
    connector = L2Connector(endpoint=node.endpoint, namespace=NS, transport_type=transport_type)
    try:
        assert connector.transport == ("shared memory" if transport_type == 0 else "TCP")
        keys = [f"m@00000000@0@{i:032x}" for i in range(3)]
        values = [chunk(i) for i in range(3)]
        future = connector.submit_batch_set(keys, [memoryview(v) for v in values])
        assert one(connector, future) == (future, True, "", [True, True, True])

        # A miss is an answer (ok), not an error; its buffer is left as it was.
        asked = keys + ["m@00000000@0@missing"]
        buffers = [bytearray(len(values[0])) for _ in asked]
        buffers[3][:] = b"\x5a" * len(buffers[3])
        future = connector.submit_batch_get(asked, [memoryview(b) for b in buffers])
        completion = one(connector, future, codes=True)
        assert completion[:3] == (future, True, "")
        assert [kvport.KeyCode(c) for c in completion[3]] == [kvport.KeyCode.SUCCESS] * 3 + [
            kvport.KeyCode.KEY_NOT_EXIST]
        assert buffers[:3] == values  # filled in place
        assert buffers[3] == b"\x5a" * len(buffers[3])

        # A value of another length than the buffer is never a hit.
        short = bytearray(len(values[0]) // 2)
        longer = bytearray(len(values[0]) * 2)
        future = connector.submit_batch_get(keys[:2], [memoryview(short), memoryview(longer)])
        fid, ok, error, codes = one(connector, future, codes=True)
        assert not ok and keys[0] in error, error
        assert [kvport.KeyCode(c) for c in codes] == [kvport.KeyCode.BUFFER_TOO_SMALL,
                                                     kvport.KeyCode.FAILED]

        # Deletes: per key, deleted or there was nothing to delete.
        future = connector.submit_batch_delete([keys[0], "m@00000000@0@missing"])
        assert one(connector, future) == (future, True, "", [True, False])
        future = connector.submit_batch_exists(keys)
        assert one(connector, future) == (future, True, "", [False, True, True])

        # The namespace is the connector's: the keys are not in the default namespace.
        other = L2Connector(endpoint=node.endpoint, transport_type=transport_type)
        try:
            future = other.submit_batch_exists(keys)
            assert one(other, future) == (future, True, "", [False, False, False])
        finally:
            other.close()
    finally:
        connector.close()


def test_many_calls_in_flight_complete_once_each(node_factory):
    node = node_factory(shared_memory=True)
    connector = L2Connector(endpoint=node.endpoint, namespace=NS)
    try:
        keys = [f"k{i}" for i in range(64)]
        values = [chunk(i, 4096) for i in range(64)]
        futures = [connector.submit_batch_set(keys[i:i + 8], [memoryview(v) for v in
                                                              values[i:i + 8]])
                   for i in range(0, 64, 8)]
        buffers = [bytearray(4096) for _ in keys]
        done = {c[0]: c for c in wait_completions(connector, len(futures))}
        assert sorted(done) == sorted(futures) and all(c[1] for c in done.values())
        futures = [connector.submit_batch_get(keys[i:i + 8], [memoryview(b) for b in
                                                              buffers[i:i + 8]])
                   for i in range(0, 64, 8)]
        futures += [connector.submit_batch_exists(keys[i:i + 8]) for i in range(0, 64, 8)]
        done = {c[0]: c for c in wait_completions(connector, len(futures))}
        assert sorted(done) == sorted(futures)
        assert all(c[1] and c[3] == [True] * 8 for c in done.values())
        assert buffers == values
    finally:
        connector.close()


def write_tokens(workdir: Path) -> Path:
    tokens = workdir / "tokens.yaml"
    tokens.write_text(
        f'tokens:\n  - name: mp\n    secret: "{SECRET}-mp"\n'
        f'    read: ["{NS}"]\n    write: ["{NS}"]\n')
    tokens.chmod(0o600)
    return tokens


def test_tokens_wrong_secret_and_ungranted_namespace(tmp_path, record):
    node = Node(tmp_path, shared_memory=False)
    node.env["KVPORT_TOKENS_FILE"] = str(write_tokens(tmp_path))
    node.start()
    try:
        # A wrong secret: the constructor raises (LMCache's factory reports it), nothing crashes.
        with pytest.raises(kvport.Error) as refused:
            L2Connector(endpoint=node.endpoint, namespace=NS, token="not-the-secret")
        assert refused.value.code == "PermissionDenied"

        # A namespace the token does not grant: PERMISSION_DENIED per key, ok False.
        connector = L2Connector(endpoint=node.endpoint, namespace="elsewhere",
                                token=f"{SECRET}-mp")
        try:
            value = chunk(1, 1024)
            futures = [connector.submit_batch_set(["a", "b"], [memoryview(value)] * 2),
                       connector.submit_batch_get(["a"], [memoryview(bytearray(1024))]),
                       connector.submit_batch_exists(["a", "b"]),
                       connector.submit_batch_delete(["a"])]
            done = {c[0]: c for c in wait_completions(connector, 4, codes=True)}
            assert sorted(done) == sorted(futures)
            for fid, ok, error, codes in done.values():
                assert not ok and "PERMISSION_DENIED" in error, error
                assert {kvport.KeyCode(c) for c in codes} == {kvport.KeyCode.PERMISSION_DENIED}
        finally:
            connector.close()

        # The granted namespace works with the same token.
        connector = L2Connector(endpoint=node.endpoint, namespace=NS, token=f"{SECRET}-mp")
        try:
            future = connector.submit_batch_set(["a"], [memoryview(chunk(1, 1024))])
            assert one(connector, future) == (future, True, "", [True])
        finally:
            connector.close()
        record(ENGINE, "MP mode: native_plugin with a wrong token / an ungranted namespace",
               "constructor raises PermissionDenied / ok False, PERMISSION_DENIED per key")
    finally:
        node.stop()


def wait_stopped(pid: int) -> None:
    """Until every thread of `pid` is stopped (SIGSTOP is delivered asynchronously: a thread
    may still answer a request meanwhile); fails after WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while True:
        states = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                # The state follows the ")" that ends the command name.
                states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
            except (FileNotFoundError, ProcessLookupError):
                continue
        if states and all(state in ("T", "t") for state in states):
            return
        assert time.monotonic() < deadline, f"kvport serve (pid {pid}) never stopped: {states}"
        os.sched_yield()


@pytest.mark.parametrize("shared_memory", [True, False], ids=["shm", "tcp"])
def test_node_gone_with_calls_in_flight(tmp_path, record, shared_memory):
    """The node stops answering (SIGSTOP) with calls in flight, then dies (SIGKILL): every call
    completes, failed with UNAVAILABLE per key, and the connector works again once a node is
    back on the same address."""
    node = Node(tmp_path, shared_memory=shared_memory).start()
    connector = L2Connector(endpoint=node.endpoint, namespace=NS, timeout=20)
    try:
        keys = [f"gone{i}" for i in range(4)]
        values = [chunk(i, 8192) for i in range(4)]
        future = connector.submit_batch_set(keys, [memoryview(v) for v in values])
        assert one(connector, future)[1]

        node.process.send_signal(signal.SIGSTOP)
        wait_stopped(node.process.pid)
        buffers = [bytearray(8192) for _ in keys]
        futures = [connector.submit_batch_get(keys, [memoryview(b) for b in buffers]),
                   connector.submit_batch_set(["late"], [memoryview(values[0])]),
                   connector.submit_batch_exists(keys),
                   connector.submit_batch_delete(keys[:1])]
        node.process.send_signal(signal.SIGKILL)
        node.process.wait(timeout=WAIT_S)
        node.process.stdout.close()
        node.process = None

        done = {c[0]: c for c in wait_completions(connector, 4, codes=True)}
        assert sorted(done) == sorted(futures)
        for fid, ok, error, codes in done.values():
            assert not ok and error
            assert {kvport.KeyCode(c) for c in codes} == {kvport.KeyCode.UNAVAILABLE}, error

        node.start()  # empty, same port and socket
        future = connector.submit_batch_set(keys[:1], [memoryview(values[0])])
        assert one(connector, future) == (future, True, "", [True])
        record(ENGINE, "MP mode: node killed with get / set / exists / delete in flight, "
               f"{'shm' if shared_memory else 'tcp'}",
               "each completes, ok False, UNAVAILABLE per key; works again on a new node")
    finally:
        connector.close()
        node.stop()


def test_close_waits_for_calls_in_flight_and_refuses_later_ones(node_factory):
    node = node_factory(shared_memory=True)
    connector = L2Connector(endpoint=node.endpoint, namespace=NS)
    values = [chunk(i, 1 << 20) for i in range(8)]
    keys = [f"close{i}" for i in range(8)]
    future = connector.submit_batch_set(keys, [memoryview(v) for v in values])
    connector.close()
    assert connector.closed
    # Finished before close returned, still there to drain.
    assert connector.drain_completions() == [(future, True, "", [True] * 8)]
    with pytest.raises(kvport.Error) as refused:
        connector.submit_batch_exists(keys)
    assert refused.value.code == "Unavailable"
    connector.close()  # idempotent


def test_bad_arguments_are_refused_before_anything_is_sent(node_factory):
    node = node_factory(shared_memory=True)
    with pytest.raises(TypeError):
        L2Connector(endpoint=node.endpoint, namespce=NS)  # a misspelt adapter_params key
    connector = L2Connector(endpoint=f"eic://{node.endpoint}/{NS}")
    try:
        assert connector.namespace == NS  # taken from the endpoint's path
        with pytest.raises(ValueError):
            connector.submit_batch_get(["a", "b"], [memoryview(bytearray(8))])
        with pytest.raises(TypeError):
            connector.submit_batch_exists([1, 2])
        read_only = memoryview(bytes(8))
        with pytest.raises(TypeError, match="read-only"):
            connector.submit_batch_get(["a"], [read_only])  # a get needs writable memory
        assert connector.drain_completions() == []
    finally:
        connector.close()
