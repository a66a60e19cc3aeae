# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures: an embedded node per test module, and helpers for caller memory.

The packages come from PYTHONPATH (ctest sets build/python); every test is bounded by the ctest
timeout and none waits on wall-clock time except the TTL test, which polls for the expiry."""

from __future__ import annotations

import ctypes
import os
import socket
import threading

import pytest

import kvport


# qemu-user without binfmt_misc (the aarch64 lane) cannot start an aarch64 child process.
needs_exec = pytest.mark.skipif(
    os.environ.get("KVPORT_NO_CHILD_EXEC") == "1",
    reason="starts a child process, which qemu-user cannot without binfmt_misc "
           "(docs/aarch64.md); covered by the native run")

# qemu-user 7.2 (the aarch64 lane) aborts when a forked child of a threaded process starts a
# thread (an assertion in its plugin core), as a new client in the child does.
needs_threaded_fork = pytest.mark.skipif(
    os.environ.get("KVPORT_NO_THREADED_FORK") == "1",
    reason="starts threads in a forked child of a threaded process, which aborts qemu-user 7.2 "
           "(docs/aarch64.md); covered by the native run")


@pytest.fixture(scope="module")
def node():
    with kvport.Server(capacity="1GiB", threads=2) as server:
        yield server


@pytest.fixture
def client(node):
    return kvport.Client(node.address)


class FakeTensor:
    """Shaped like a torch tensor as the bindings see one: data_ptr(), nbytes, is_contiguous(),
    over ctypes memory it owns."""

    def __init__(self, size: int, fill: int = 0, contiguous: bool = True):
        self.memory = (ctypes.c_char * max(size, 1))()
        if fill:
            ctypes.memset(self.memory, fill, size)
        self.nbytes = size
        self.contiguous = contiguous

    def data_ptr(self) -> int:
        return ctypes.addressof(self.memory)

    def is_contiguous(self) -> bool:
        return self.contiguous

    def tobytes(self) -> bytes:
        return ctypes.string_at(self.data_ptr(), self.nbytes)


def pointer_of(buffer) -> int:
    """Address of a bytearray's (writable) or bytes' (read-only) memory, as LMCache takes it."""
    if isinstance(buffer, bytes):
        return ctypes.cast(ctypes.c_char_p(buffer), ctypes.c_void_p).value
    return ctypes.addressof(ctypes.c_char.from_buffer(buffer))


def unique(prefix: str) -> str:
    unique.counter += 1
    return f"{prefix}-{unique.counter}"


unique.counter = 0


class HoldingProxy:
    """A TCP proxy between clients and a node that the test can make hold the node's answers:
    while holding, what the node sends is kept here instead of forwarded, so a call waits for
    its answer (inside the bindings, the GIL released) for as long as the test wants, without a
    timer. wait_held(n) returns once n bytes of answers are held; release() forwards them.

        with HoldingProxy(node.address) as proxy:
            client = kvport.Client(proxy.address, transport_type=kvport.TransportType.TCP)

    requests: what carries the client's bytes to the node, requests(client, node) on a thread of
    its own per connection (to alter them); by default they pass as they are.
    """

    def __init__(self, target: str, requests=None):
        host, port = target.rsplit(":", 1)
        self._target = (host, int(port))
        self._requests = requests
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.address = "127.0.0.1:%d" % self._listener.getsockname()[1]
        self._cond = threading.Condition()
        self._holding = False
        self._held = []  # (client socket, bytes) in arrival order
        self._held_bytes = 0
        self._sockets = []
        self._closed = False
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            node = socket.create_connection(self._target, timeout=30)
            node.settimeout(None)
            with self._cond:
                if self._closed:
                    client.close()
                    node.close()
                    return
                self._sockets += [client, node]
            pumps = [threading.Thread(target=self._pump, args=(node, client, True), daemon=True)]
            if self._requests is None:
                pumps.append(threading.Thread(target=self._pump, args=(client, node, False),
                                              daemon=True))
            else:
                pumps.append(threading.Thread(target=self._requests, args=(client, node),
                                              daemon=True))
            for pump in pumps:
                self._threads.append(pump)
                pump.start()

    def _pump(self, source, sink, answers):
        while True:
            try:
                data = source.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                for s in (source, sink):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                return
            with self._cond:
                if answers and self._holding:
                    self._held.append((sink, data))
                    self._held_bytes += len(data)
                    self._cond.notify_all()
                    continue
            try:
                sink.sendall(data)
            except OSError:
                return

    def hold(self):
        with self._cond:
            self._holding = True

    def wait_held(self, nbytes: int, timeout: float = 30) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._held_bytes >= nbytes, timeout)

    def release(self):
        with self._cond:
            self._holding = False
            held, self._held, self._held_bytes = self._held, [], 0
            for sink, data in held:  # in order, before any later answer is forwarded
                sink.sendall(data)

    def close(self):
        with self._cond:
            self._closed = True
            sockets, self._sockets = self._sockets, []
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        except OSError:
            pass
        self._listener.close()
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
