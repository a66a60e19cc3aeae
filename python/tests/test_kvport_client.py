# SPDX-License-Identifier: Apache-2.0
"""kvport.Client, kvport.Server, config_check and doctor against an embedded node."""

from __future__ import annotations

import array
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

import kvport
from conftest import FakeTensor, needs_exec, needs_threaded_fork, pointer_of, unique

MiB = 1 << 20


def test_every_buffer_kind_round_trips(client):
    payload = bytes(range(256)) * 16  # 4 KiB of every byte value
    sources = {
        "bytes": payload,
        "bytearray": bytearray(payload),
        "memoryview": memoryview(bytearray(payload)),
        "array": array.array("B", payload),
        "pointer": (pointer_of(payload), len(payload)),
        "tensor": FakeTensor(len(payload)),
    }
    ctypes_tensor = sources["tensor"]
    __import__("ctypes").memmove(ctypes_tensor.data_ptr(), payload, len(payload))
    keys = [unique(f"kind-{name}") for name in sources]
    result = client.mset(keys, list(sources.values()))
    assert result.status == kvport.BatchCode.SUCCESS, result
    assert result.codes == [kvport.KeyCode.SUCCESS] * len(keys)

    sinks = [bytearray(len(payload)), memoryview(bytearray(len(payload))),
             array.array("B", bytes(len(payload))), FakeTensor(len(payload))]
    sink_pointer = bytearray(len(payload))
    sinks.append((pointer_of(sink_pointer), len(sink_pointer)))
    for key in keys:
        got = client.mget([key] * len(sinks), sinks)
        assert got.status == kvport.BatchCode.SUCCESS, got
        assert got.value_sizes == [len(payload)] * len(sinks)
        assert bytes(sinks[0]) == payload and bytes(sinks[1]) == payload
        assert sinks[2].tobytes() == payload and sinks[3].tobytes() == payload
        assert bytes(sink_pointer) == payload


def test_read_only_and_unusable_buffers_are_refused(client):
    key = unique("ro")
    client.mset([key], [b"abc"])
    with pytest.raises(TypeError, match="cannot be read into"):
        client.mget([key], [b"xyz"])
    with pytest.raises(TypeError, match="not a buffer"):
        client.mset([key], [12345])
    with pytest.raises(ValueError, match="not contiguous"):
        client.mset([key], [FakeTensor(8, contiguous=False)])
    with pytest.raises(ValueError, match="null pointer"):
        client.mset([key], [(0, 10)])
    with pytest.raises(kvport.Error) as e:
        client.mset([key, "other"], [b"one"])
    assert e.value.code == "InvalidArgument"


def test_buffer_sizes(client):
    key = unique("size")
    client.mset([key], [b"0123456789"])
    exact, small, large = bytearray(10), bytearray(b"untouched"), bytearray(b"#" * 16)
    got = client.mget([key, key, key], [exact, small, large])
    assert got.codes == [kvport.KeyCode.SUCCESS, kvport.KeyCode.BUFFER_TOO_SMALL,
                         kvport.KeyCode.SUCCESS]
    assert got.status == kvport.BatchCode.PARTIAL_FAILED
    assert got.value_sizes == [10, 10, 10]
    assert exact == b"0123456789"
    assert small == b"untouched"  # never written past (or at all) when too small
    assert large == b"0123456789######"


def test_metas_exist_delete_list_overwrite(client):
    ns = unique("ns")
    keys = [f"k{i}" for i in range(5)]
    result = client.mset(keys, [b"v%d" % i for i in range(5)], ns=ns,
                         metas=[b"meta%d" % i for i in range(5)])
    assert result.ok
    meta = client.mget_meta(keys + ["absent"], ns=ns)
    assert meta.metas[:5] == [b"meta%d" % i for i in range(5)]
    assert meta.value_sizes[:5] == [2] * 5
    assert meta.codes[5] == kvport.KeyCode.KEY_NOT_EXIST
    assert meta.status == kvport.BatchCode.PARTIAL_FAILED

    client.mset(["k0"], [b"replaced"], ns=ns)
    out = bytearray(8)
    assert client.mget(["k0"], [out], ns=ns).ok and out == b"replaced"
    assert client.mget_meta(["k0"], ns=ns).metas == [b""]  # the meta went with the old value

    listed, cursor = client.list(ns)
    assert sorted(listed) == keys and cursor == 0
    deleted = client.mdel(["k1", "absent"], ns=ns)
    assert deleted.codes == [kvport.KeyCode.SUCCESS, kvport.KeyCode.KEY_NOT_EXIST]
    exists = client.mexist(["k1", "k2"], ns=ns)
    assert exists.codes == [kvport.KeyCode.KEY_NOT_EXIST, kvport.KeyCode.SUCCESS]


def test_namespaces_isolate_and_none_matches_any(client):
    key = unique("shared-name")
    client.mset([key], [b"in-a"], ns="a")
    client.mset([key], [b"in-b"], ns="b")
    assert client.mexist([key], ns="").codes == [kvport.KeyCode.KEY_NOT_EXIST]
    assert client.mexist([key], ns="c").codes == [kvport.KeyCode.KEY_NOT_EXIST]
    assert client.mexist([key], ns=None).codes == [kvport.KeyCode.SUCCESS]
    out = bytearray(4)
    assert client.mget([key], [out], ns=None).ok and out == b"in-a"  # first by name
    client.mset([key], [b"in-0"])  # the default namespace comes first of all
    assert client.mget([key], [out], ns=None).ok and out == b"in-0"
    assert client.mdel([key], ns=None).ok
    for ns in ("", "a", "b"):
        assert client.mexist([key], ns=ns).codes == [kvport.KeyCode.KEY_NOT_EXIST]


def test_ttl_expires(client):
    key = unique("ttl")
    assert client.mset([key], [b"short-lived"], ttl=1).ok
    assert client.mset([key + "-forever"], [b"stays"], ttl=-1).ok
    assert client.mexist([key]).ok
    deadline = time.monotonic() + 30
    while client.mexist([key]).codes[0] == kvport.KeyCode.SUCCESS:
        assert time.monotonic() < deadline, "a ttl of 1 s never expired"
        time.sleep(0.05)
    assert client.mexist([key + "-forever"]).ok


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "pointer", "tensor"])
def test_128_mib_values(client, kind):
    size = 128 * MiB
    if kind == "tensor":
        value = FakeTensor(size, fill=0x5A)
        expected_head = b"\x5a" * 64
    else:
        raw = os.urandom(1 * MiB) * 128
        expected_head = raw[:64]
        value = {"bytes": raw, "bytearray": bytearray(raw),
                 "pointer": (pointer_of(raw), size)}[kind]
    key = unique("big")
    assert client.mset([key], [value]).ok
    out = FakeTensor(size)
    got = client.mget([key], [out])
    assert got.ok and got.value_sizes == [size]
    data = out.tobytes()
    assert data[:64] == expected_head
    if kind != "tensor":
        assert data == raw
    assert client.mdel([key]).ok


def test_eight_threads_share_one_client(client):
    errors = []
    barrier = threading.Barrier(8, timeout=30)

    def work(t):
        try:
            barrier.wait()
            for i in range(50):
                key = f"thread{t}-{i}"
                value = (b"%d:%d|" % (t, i)) * 100
                assert client.mset([key], [value], ns="threads").ok
                out = bytearray(len(value))
                assert client.mget([key], [out], ns="threads").ok
                assert bytes(out) == value
        except Exception as e:  # reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert not any(t.is_alive() for t in threads)


def test_gil_is_released_while_a_call_waits():
    # A node that accepts and reads the client's HELLO but never answers: the client's init
    # waits (up to connect_timeout). The Python thread serving the socket can only read the
    # HELLO if that wait released the GIL.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    address = "127.0.0.1:%d" % listener.getsockname()[1]
    hello_read = threading.Event()
    connections = []

    def silent_node():
        conn, _ = listener.accept()
        connections.append(conn)
        if conn.recv(32):
            hello_read.set()

    server = threading.Thread(target=silent_node, daemon=True)
    server.start()
    outcome = []
    caller = threading.Thread(
        target=lambda: outcome.append(_init_error(address)), daemon=True)
    caller.start()
    assert hello_read.wait(20), "the silent node never ran while init was waiting"
    assert caller.is_alive(), "init returned before the node read its HELLO"
    for conn in connections:
        conn.close()
    caller.join(30)
    assert outcome and outcome[0] is not None
    listener.close()


def _init_error(address):
    try:
        kvport.Client(address, connect_timeout=20, timeout=20)
    except kvport.Error as e:
        return e
    return None


def test_unreachable_node_and_bad_endpoints():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    with pytest.raises(kvport.Error) as e:
        kvport.Client(f"127.0.0.1:{port}", connect_timeout=2)
    assert e.value.code == "Unavailable"
    with pytest.raises(kvport.Error) as e:
        kvport.Client("redis://127.0.0.1:7470")
    assert e.value.code == "InvalidArgument"
    with pytest.raises(kvport.Error, match="listed twice"):
        kvport.Client(f"127.0.0.1:{port};127.0.0.1:{port}")
    with pytest.raises(kvport.Error) as e:  # a cluster none of whose nodes answers
        kvport.Client(f"127.0.0.1:{port};127.0.0.1:{port + 1}", connect_timeout=2)
    assert e.value.code == "Unavailable"


def test_gpudirect_without_cuda_fails_at_init(node):
    with pytest.raises(kvport.Error) as e:
        kvport.Client(node.address, transport_type=kvport.TransportType.GDR)
    assert e.value.code == "NotSupported"
    assert "CUDA" in e.value.message
    rdma = kvport.Client(node.address, transport_type=kvport.TransportType.RDMA)
    assert rdma.transport == "TCP" and "RDMA" in rdma.transport_reason


def test_register_memory(client):
    host = bytearray(4096)
    client.register_memory([host])  # host memory: accepted, nothing to stage
    with pytest.raises(kvport.Error) as e:
        client.register_memory([bytearray(4096)], kvport.MemoryKind.CUDA)
    assert e.value.code == "NotSupported"  # no usable CUDA runtime on this machine


def test_server_stats_stop_and_url():
    with kvport.Server(capacity="64MiB") as node:
        assert node.url == "eic://" + node.address
        c = kvport.Client(node.url)
        c.ping()
        c.mset(["a", "b"], [b"1", b"22"], ns="s")
        stats = c.stats()
        assert stats["counters"]["capacity_bytes"] == 64 * MiB
        assert ("s", 2, 3) in stats["namespaces"]
        assert node.stats()["counters"]["objects"] == 2
        node.stop()
        node.stop()  # idempotent
        assert not node.running
        with pytest.raises(kvport.Error):
            c.ping()
    with pytest.raises(kvport.Error) as e:
        kvport.Server(capacity="12 parsecs")
    assert e.value.code == "InvalidArgument"


def test_config_check_and_doctor(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("remote_url: eic://127.0.0.1:7470\nmax_local_cpu_size: 2\n")
    report = kvport.config_check(str(good))
    assert report["values"]["max_local_cpu_size"]["source"] == f"file:{good}"
    assert report["values"]["max_local_cpu_size"]["human"] == "2 GiB"
    assert report["values"]["remote_url"]["value"] == "eic://127.0.0.1:7470"
    bad = tmp_path / "bad.yaml"
    bad.write_text("max_local_cpu_size: 512000000000\n")
    with pytest.raises(kvport.Error, match="EiB"):
        kvport.config_check(str(bad))
    with pytest.raises(kvport.Error) as e:
        kvport.config_check(str(tmp_path / "missing.yaml"))
    assert e.value.code == "NotFound"
    doctor = kvport.doctor()
    kinds = {runtime["name"]: runtime for runtime in doctor["runtimes"]}
    assert kinds["host"]["state"] == "available"
    assert kinds["cuda"]["state"] in ("absent", "unusable", "available")


EXIT_SCRIPT = r"""
import threading, kvport, eic
node = kvport.Server(capacity="64MiB")          # module-level, never stopped
client = kvport.Client(node.address)           # module-level, never closed
client.mset(["k"], [b"v" * 1024])
ec = eic.Client()
assert ec.init(None, node.address, eic.InitOption()) == 0
def reader():                                   # a daemon thread busy in calls at exit
    out = bytearray(1024)
    while True:
        client.mget(["k"], [out])
threading.Thread(target=reader, daemon=True).start()
print("exiting", flush=True)
"""


@needs_exec
def test_interpreter_exits_with_live_clients():
    done = subprocess.run([sys.executable, "-c", EXIT_SCRIPT], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "exiting" in done.stdout


def test_busy_poll_option(node):
    # InitOptions::busy_poll from Python: calls work with it, and an out-of-range value is refused.
    polled = kvport.Client(node.address, busy_poll_us=50)
    key = unique("polled")
    assert polled.mset([key], [b"value"]).ok
    assert polled.mexist([key]).ok
    with pytest.raises(kvport.Error, match="busy_poll"):
        kvport.Client(node.address, busy_poll_us=2_000_000)


def test_checksum_options(node):
    # InitOptions::checksums from Python: values put and got with checksums on, off, and for a
    # namespace left unchecked; none fails its check.
    for options in ({}, {"checksums": False}, {"unchecked_namespaces": ["ns"]}):
        client = kvport.Client(node.address, **options)
        key = unique("checked")
        assert client.mset([key], [b"value" * 100], ns="ns").ok
        out = bytearray(500)
        assert client.mget([key], [out], ns="ns").ok
        assert bytes(out) == b"value" * 100
        assert client.checksum_mismatches == 0


def test_a_busy_polling_embedded_node():
    # ServerOptions::busy_poll from Python: a node polling for a second finds each next call of
    # a client calling back to back without sleeping (busy_poll_hits), and one over 1 s is refused.
    with kvport.Server(capacity="64MiB", threads=1, busy_poll_us=1_000_000) as node:
        client = kvport.Client(node.address, transport_type=kvport.TransportType.TCP)
        client.ping()
        before = node.stats()["counters"]["busy_poll_hits"]
        for i in range(40):
            assert client.mset([f"k{i}"], [b"v" * 4096]).ok
        # A preempted client may miss a spin now and then.
        assert node.stats()["counters"]["busy_poll_hits"] - before >= 20
    with pytest.raises(kvport.Error, match="busy_poll"):
        kvport.Server(capacity="64MiB", busy_poll_us=2_000_000)


@needs_threaded_fork
def test_a_client_used_after_fork_fails_in_the_child_and_the_parent_goes_on(node):
    """vLLM's multiprocess executor and multiprocessing's fork start method copy a live client
    into the child. There, every call raises naming the fork (it would otherwise write into the
    parent's connections), dropping the client returns (no join of threads the child lacks), and
    a client made in the child works; the parent's client goes on."""
    import gc
    inherited = kvport.Client(node.address)
    ns = unique("fork")
    assert inherited.mset(["k"], [b"parent bytes"], ns=ns).ok
    pid = os.fork()
    if pid == 0:  # the child: report through the exit code, never return into pytest
        code = 0
        try:
            try:
                inherited.mset(["child"], [b"child bytes"], ns=ns)
                code |= 1
            except kvport.Error as e:
                if "after fork" not in str(e):
                    code |= 2
            del inherited
            gc.collect()
            fresh = kvport.Client(node.address)
            out = bytearray(12)
            if not (fresh.mget(["k"], [out], ns=ns).ok and out == b"parent bytes"):
                code |= 4
        except BaseException:  # noqa: BLE001 - anything else is a failure of the child
            code |= 8
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid or time.monotonic() > deadline:
            break
        time.sleep(0.005)
    if done != pid:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    assert done == pid, "the child hung"
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, os.WEXITSTATUS(status)
    out = bytearray(12)
    assert inherited.mget(["k"], [out], ns=ns).ok and out == b"parent bytes"
    assert inherited.mset(["after"], [b"fine"], ns=ns).ok
    assert inherited.mexist(["child"], ns=ns).codes == [kvport.KeyCode.KEY_NOT_EXIST]
