# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures: an embedded node per test module, and helpers for caller memory.

The packages come from PYTHONPATH (ctest sets build/python); every test is bounded by the ctest
timeout and none waits on wall-clock time except the TTL test, which polls for the expiry."""

from __future__ import annotations

import ctypes
import os

import pytest

import kvport


# qemu-user without binfmt_misc (the aarch64 lane) cannot start an aarch64 child process.
needs_exec = pytest.mark.skipif(
    os.environ.get("KVPORT_NO_CHILD_EXEC") == "1",
    reason="starts a child process, which qemu-user cannot without binfmt_misc "
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
