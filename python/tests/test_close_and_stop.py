# SPDX-License-Identifier: Apache-2.0
"""Ending a client or a node while other threads use it, and at interpreter exit:

- kvport.Client.close() (and the context manager): idempotent; a call another thread has inside
  finishes first, with its bytes; every later call raises kvport.Error ("closed").
- kvport.Server.stop() against stats() / reload_tokens() on other threads: a call inside finishes
  before the node is destroyed, a later one raises kvport.Error; nothing touches freed memory (the
  ASan build runs these tests too, and a use after free aborts it).
- The client's, the node's and a lease's destructors release the GIL to close connections or
  join threads; a daemon thread that drops the last reference after the interpreter's exit hook
  ran parks there instead of taking the GIL back (which would end it with pthread_exit through
  a noexcept destructor: an abort), and the process exits normally."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

import kvport
from conftest import HoldingProxy, needs_exec, unique


def _eventually(condition, what: str, timeout: float = 30) -> None:
    """Polls a condition that has no event to wait on, for at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.001)


# --- kvport.Client.close ----------------------------------------------------------------------

def test_close_is_idempotent_and_every_later_call_raises(node):
    client = kvport.Client(node.address)
    key = unique("close")
    assert client.mset([key], [b"v"]).ok
    assert not client.closed
    client.close()
    client.close()
    assert client.closed
    calls = {
        "mset": lambda: client.mset([key], [b"v"]),
        "mget": lambda: client.mget([key], [bytearray(1)]),
        "mget_in_place": lambda: client.mget_in_place([key]),
        "mget_meta": lambda: client.mget_meta([key]),
        "mexist": lambda: client.mexist([key]),
        "mdel": lambda: client.mdel([key]),
        "list": lambda: client.list(),
        "stats": lambda: client.stats(),
        "stats_per_node": lambda: client.stats_per_node(),
        "ping": lambda: client.ping(),
        "register_memory": lambda: client.register_memory([bytearray(8)]),
        "unregister_memory": lambda: client.unregister_memory([bytearray(8)]),
        "transport": lambda: client.transport,
        "endpoint": lambda: client.endpoint,
        "is_cluster": lambda: client.is_cluster,
    }
    for name, call in calls.items():
        with pytest.raises(kvport.Error, match="closed") as e:
            call()
        assert e.value.code == "Unavailable", name
        assert name in e.value.message, e.value.message
    assert kvport.Client(node.address).mexist([key]).ok  # the node is untouched


def test_client_is_a_context_manager(node):
    key = unique("with")
    with kvport.Client(node.address) as client:
        assert client.mset([key], [b"v"]).ok
    assert client.closed
    with pytest.raises(kvport.Error, match="closed"):
        client.ping()
    with pytest.raises(RuntimeError, match="inside"):  # an exception leaves closed, unchanged
        with kvport.Client(node.address) as other:
            raise RuntimeError("inside")
    assert other.closed


def test_close_waits_for_a_call_inside_and_refuses_new_ones(node):
    payload = b"answer" * 1000
    key = unique("close-during")
    assert kvport.Client(node.address).mset([key], [payload]).ok
    with HoldingProxy(node.address) as proxy:
        client = kvport.Client(proxy.address, transport_type=kvport.TransportType.TCP,
                               connections=1, timeout=120)
        out = bytearray(len(payload))
        got, closed = [], []
        caller = threading.Thread(target=lambda: got.append(client.mget([key], [out])))
        closer = threading.Thread(target=lambda: closed.append(client.close()))
        proxy.hold()
        caller.start()
        try:
            assert proxy.wait_held(len(payload)), "the node's answer never came"
            closer.start()
            _eventually(lambda: client.closed, "close() began")
            # close() waits for the mget inside (its answer is still held here) ...
            assert closer.is_alive() and caller.is_alive()
            # ... and a call that comes now is refused at once.
            with pytest.raises(kvport.Error, match="closed"):
                client.mexist([key])
        finally:
            proxy.release()
            caller.join(60)
            if closer.ident is not None:
                closer.join(60)
        assert not caller.is_alive() and not closer.is_alive()
        assert got and got[0].ok and out == payload, got
        assert closed == [None]
        with pytest.raises(kvport.Error, match="closed"):
            client.mget([key], [out])


# --- kvport.Server.stop -----------------------------------------------------------------------

def _big_tokens_file(path) -> str:
    """A valid token file of about 1 MiB (the limit): reading and parsing it keeps a
    reload_tokens() inside the node for a while."""
    lines = ["tokens:"]
    for i in range(6000):
        lines += [f"  - name: tenant-{i:05d}", f"    secret: secret-of-tenant-{i:05d}-xxxxxxxxxxxx",
                  f"    read: [\"tenant-{i:05d}/*\"]", f"    write: [\"tenant-{i:05d}/*\"]"]
    text = "\n".join(lines) + "\n"
    assert len(text) < 1 << 20
    path.write_text(text)
    os.chmod(path, 0o600)
    return str(path)


@pytest.mark.parametrize("call", ["reload_tokens", "stats"])
def test_stop_against_calls_on_other_threads(tmp_path, call):
    """stop() while another thread is inside reload_tokens() or stats(): that call finishes on
    a live node, never on one being destroyed, and the calls after stop() raise."""
    options = {"tokens_file": _big_tokens_file(tmp_path / "tokens.yaml")} \
        if call == "reload_tokens" else {}
    for _ in range(3):
        node = kvport.Server(capacity="16MiB", threads=1, **options)
        entered = threading.Event()
        outcome = []

        def hammer():
            try:
                while True:
                    entered.set()
                    getattr(node, call)()
            except kvport.Error as e:
                outcome.append(e)
            except BaseException as e:  # noqa: BLE001 - reported below
                outcome.append(e)

        worker = threading.Thread(target=hammer)
        worker.start()
        assert entered.wait(30)
        node.stop()  # while the worker is inside a call, or between two
        assert not node.running
        worker.join(60)
        assert not worker.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], kvport.Error), outcome
        assert outcome[0].code == "Unavailable" and "stopped" in outcome[0].message
        for after in (node.stats, node.reload_tokens, lambda: node.address, lambda: node.port,
                      lambda: node.epoch, lambda: node.unix_socket_path):
            with pytest.raises(kvport.Error, match="stopped"):
                after()
        node.stop()  # idempotent


def test_concurrent_stops_all_return_once_the_node_is_down():
    node = kvport.Server(capacity="16MiB", threads=1)
    address = node.address
    stoppers = [threading.Thread(target=node.stop) for _ in range(4)]
    for t in stoppers:
        t.start()
    for t in stoppers:
        t.join(60)
    assert not any(t.is_alive() for t in stoppers)
    with pytest.raises(kvport.Error) as e:
        kvport.Client(address, connect_timeout=2)
    assert e.value.code == "Unavailable"


# --- destructors at interpreter exit ----------------------------------------------------------

EXIT_DROP_SCRIPT = r"""
import os, sys, tempfile, threading, kvport
from kvport import _core
what = sys.argv[1]
socket_path = os.path.join(tempfile.mkdtemp(), "node.sock")
node = kvport.Server(capacity="16MiB", unix_socket=socket_path)
client = kvport.Client("unix:" + socket_path)
client.mset(["k"], [b"value"])
lent = client.mget_in_place(["k"])
assert lent.valid
held = {"client": [kvport.Client(node.address)], "server": [kvport.Server(capacity="16MiB")],
        "lease": [lent._core]}[what]
del lent
go = threading.Event()
resumed = threading.Event()
def drop():
    go.wait()
    held.clear()          # the last reference: the destructor releases the GIL, then takes it back
    resumed.set()
threading.Thread(target=drop, daemon=True).start()
_core._interpreter_exiting()   # what the atexit hook does when the interpreter exits
go.set()
deadline = __import__("time").monotonic() + 60
while _core._parked_threads() == 0 and not resumed.is_set():
    assert __import__("time").monotonic() < deadline, "the destructor never finished"
    resumed.wait(0.001)
print("parked" if _core._parked_threads() == 1 and not resumed.is_set() else "resumed",
      flush=True)
"""


@needs_exec
@pytest.mark.parametrize("what", ["client", "server", "lease"])
def test_destructors_park_instead_of_taking_the_gil_back_at_exit(what):
    """The destructor of a client, a node or a lease, run on a daemon thread after the exit hook,
    parks where it would take the GIL back; the process then exits with status 0 (it used to
    take the GIL back through pybind11's gil_scoped_release, which ends such a thread with
    pthread_exit once the interpreter finalizes, unwinding through a noexcept destructor: an
    abort)."""
    done = subprocess.run([sys.executable, "-c", EXIT_DROP_SCRIPT, what], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "parked", (done.stdout, done.stderr[-2000:])
