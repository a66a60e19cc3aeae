# SPDX-License-Identifier: Apache-2.0
"""What the engines lane's LMCache MP test and bench_lmcache_mp.py both hand LMCache's
NativeConnectorL2Adapter: memory objects over slices of a tensor, and the wait for one of its
eventfds. LMCache's own classes, imported from its installed package."""

from __future__ import annotations

import select

import torch

from lmcache.v1.memory_management import MemoryFormat, MemoryObjMetadata, TensorMemoryObj
from lmcache.v1.platform import consume_fd


def memory_obj(buffer: torch.Tensor) -> TensorMemoryObj:
    """An LMCache memory object (KV_2LTD) over `buffer`, as its L1 allocator would hand out."""
    metadata = MemoryObjMetadata(shape=buffer.shape, dtype=buffer.dtype,
                                 address=buffer.data_ptr(),
                                 phy_size=buffer.numel() * buffer.element_size(),
                                 fmt=MemoryFormat.KV_2LTD, ref_count=1)
    return TensorMemoryObj(buffer, metadata, parent_allocator=None)


def wait_fd(fd: int, seconds: float) -> None:
    """Waits (at most `seconds`) until the adapter signals `fd`, then consumes the signal."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    if not poller.poll(int(seconds * 1000)):
        raise RuntimeError(f"the adapter's eventfd was not signalled within {seconds} s")
    consume_fd(fd)
