# SPDX-License-Identifier: Apache-2.0
"""LMCache's EICConnector call sequence against the eic drop-in, written from the EIC notes
(appendix A: what each connector call sends through `eic` and how it reads every status; no
LMCache code is used or copied, and LMCache itself is not installed here).

The class below issues exactly the eic traffic of the v0.4.4-era (L2) and #5141 (L5)
connectors: construction (init, GDR registration of the whole pool, 2048 warm-up probes),
put, batched_put, exists/contains, get, batched_get (L5: all metas, then the data of the meta
hits), get_non_blocking (leading run), delete (`mdel(keys)`, no option)."""

from __future__ import annotations

import ctypes
import random
import struct

import pytest

import eic
import kvport
from conftest import FakeTensor, pointer_of

S = eic.StatusCode
META_BYTES = 28  # one group: int32 length, fmt, dtype, d0..d3 in native order


class LMCacheLikeConnector:
    def __init__(self, endpoint: str, ns: str, trans_type: int, pool: FakeTensor):
        self.ns = ns
        self.trans_type = eic.TransportType(trans_type)
        self.pool = pool
        self.connection = eic.Client()
        option = eic.InitOption()
        option.log_dir = "/tmp"
        option.log_level = eic.LogLevel(1)
        option.transport_type = self.trans_type
        option.flag_file = None
        ret = self.connection.init(None, endpoint, option)
        if ret != 0:
            raise RuntimeError(f"fail to init eic client, error code: {ret}")
        if self.trans_type == eic.TransportType.TRANSPORT_GDR:
            vals = eic.IOBuffers()
            vals.append(pool.data_ptr(), pool.nbytes, True)
            info = eic.MemoryInfo()
            info.type = eic.MemoryType.MEMORY_CUDA
            info.cuda_id = 0
            if not self.connection.register_memory(vals, info):
                raise SystemExit(1)
        for _ in range(2048):  # prebuilt_connection
            key = ns.join(random.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", k=30))
            keys = eic.StringVector()
            keys.append(key)
            self.connection.mexist(keys, eic.ExistOption())

    @property
    def registered(self) -> bool:
        return self.trans_type == eic.TransportType.TRANSPORT_GDR

    def _set_option(self) -> eic.SetOption:
        option = eic.SetOption()
        option.ns = self.ns
        option.ttl_second = -1
        return option

    def _get_option(self) -> eic.GetOption:
        option = eic.GetOption()
        option.ns = self.ns
        return option

    def put(self, key: str, chunk: FakeTensor, shape=(1, 2, 16, 8)) -> None:
        self.batched_put([key], [chunk], shape)

    def batched_put(self, keys, chunks, shape=(1, 2, 16, 8)) -> None:
        eic_keys, vals, metas = eic.StringVector(), eic.IOBuffers(), []
        for key, chunk in zip(keys, chunks):
            meta = struct.pack("i" * 7, META_BYTES, 1, 3, *shape)
            metas.append(meta)  # kept alive for the call, as LMCache's locals are
            eic_keys.append(key + "_meta")
            vals.append(pointer_of(meta), len(meta), False)
            eic_keys.append(key)
            vals.append(chunk.data_ptr(), chunk.nbytes, self.registered)
        status, outcome = self.connection.mset(eic_keys, vals, self._set_option())
        if status not in (S.SUCCESS, S.PARTIAL_FAILED):
            raise RuntimeError(f"mset failed: {status}")
        for pos in range(len(keys)):  # L5 maps codes 2*pos, 2*pos+1
            if outcome.status_codes[2 * pos] != S.SUCCESS or \
                    outcome.status_codes[2 * pos + 1] != S.SUCCESS:
                raise RuntimeError(f"put failed for {keys[pos]}")

    def exists_sync(self, key: str) -> bool:
        keys = eic.StringVector()
        keys.append(key)
        status, outcome = self.connection.mexist(keys, eic.ExistOption())  # ns never set
        return status == S.SUCCESS and outcome.status_codes[0] == S.SUCCESS

    def batched_async_contains(self, keys) -> int:
        eic_keys = eic.StringVector()
        for key in keys:
            eic_keys.append(key)
        status, outcome = self.connection.mexist(eic_keys, eic.ExistOption())
        if status != S.SUCCESS:
            return 0
        hits = 0
        for i in range(len(keys)):
            if outcome.status_codes[i] != S.SUCCESS:
                break
            hits += 1
        return hits

    def _get_metas(self, keys):
        eic_keys, vals, buffers = eic.StringVector(), eic.IOBuffers(), []
        for key in keys:
            buffer = bytearray(META_BYTES)
            buffers.append(buffer)
            eic_keys.append(key + "_meta")
            vals.append(ctypes.addressof(ctypes.c_char.from_buffer(buffer)), META_BYTES, False)
        status, _, outcome = self.connection.mget(eic_keys, self._get_option(), vals)
        return status, outcome, buffers

    def get(self, key: str):
        status, outcome, buffers = self._get_metas([key])
        if status != S.SUCCESS or outcome.status_codes[0] != S.SUCCESS:
            return None
        length, fmt, dtype, d0, d1, d2, d3 = struct.unpack("i" * 7, bytes(buffers[0]))
        assert length == META_BYTES and fmt == 1 and dtype == 3
        chunk = self.pool_slice(d0 * d1 * d2 * d3 * 2)  # bf16
        keys, vals = eic.StringVector(), eic.IOBuffers()
        keys.append(key)
        vals.append(chunk.data_ptr(), chunk.nbytes, self.registered)
        status, _, outcome = self.connection.mget(keys, self._get_option(), vals)
        if status != S.SUCCESS or outcome.status_codes[0] != S.SUCCESS:
            return None
        return chunk.tobytes()

    def batched_get(self, keys):
        status, outcome, buffers = self._get_metas(keys)
        if status not in (S.SUCCESS, S.PARTIAL_FAILED, S.FAILED):
            return [None] * len(keys)
        hits = [i for i in range(len(keys)) if outcome.status_codes[i] == S.SUCCESS]
        results = [None] * len(keys)
        if not hits:
            return results
        data_keys, vals, chunks = eic.StringVector(), eic.IOBuffers(), {}
        for i in hits:
            dims = struct.unpack("i" * 7, bytes(buffers[i]))[3:]
            chunk = self.pool_slice(dims[0] * dims[1] * dims[2] * dims[3] * 2)
            chunks[i] = chunk
            data_keys.append(keys[i])
            vals.append(chunk.data_ptr(), chunk.nbytes, self.registered)
        status, _, outcome = self.connection.mget(data_keys, self._get_option(), vals)
        if status not in (S.SUCCESS, S.PARTIAL_FAILED, S.FAILED):
            return results
        for n, i in enumerate(hits):
            if outcome.status_codes[n] == S.SUCCESS:
                results[i] = chunks[i].tobytes()
        return results

    def batched_get_non_blocking(self, keys):
        prefix = []
        for value in self.batched_get(keys):
            if value is None:
                break
            prefix.append(value)
        return prefix

    def delete_sync(self, key: str) -> bool:
        keys = eic.StringVector()
        keys.append(key)
        status, _ = self.connection.mdel(keys)  # L1/L2: one argument, no namespace
        return status == S.SUCCESS

    def pool_slice(self, size: int) -> FakeTensor:
        return FakeTensor(size)  # stands in for an allocation from the pinned pool


def chunk(fill: int) -> FakeTensor:
    return FakeTensor(1 * 2 * 16 * 8 * 2, fill=fill)


@pytest.mark.parametrize("ns", ["kvport_ns", ""])
def test_lmcache_sequence_rdma(node, ns):
    pool = FakeTensor(1 << 20)
    connector = LMCacheLikeConnector(node.address, ns, 2, pool)
    k0, k1, k2, k3, miss = (f"vllm@model/x@1@0@{h}@bfloat16@{ns}" for h in
                            ("a0", "-1b", "c2", "d3", "ffff"))
    c0, c1 = chunk(1), chunk(2)
    connector.put(k0, c0)
    connector.put(k1, c1)
    assert connector.exists_sync(k0)  # unmodified LMCache finds its own chunk
    assert connector.batched_async_contains([k0, k1, miss]) == 2
    assert connector.get(k0) == c0.tobytes()
    assert connector.get(miss) is None
    c2, c3 = chunk(3), chunk(4)
    connector.batched_put([k2, k3], [c2, c3])
    assert connector.batched_get([k0, miss, k2]) == [c0.tobytes(), None, c2.tobytes()]
    assert connector.batched_get_non_blocking([k0, miss, k2]) == [c0.tobytes()]
    assert connector.delete_sync(k1)  # and deletes it
    assert not connector.exists_sync(k1)
    assert connector.get(k1) is None
    assert connector.batched_async_contains([k0, k1]) == 1


def test_lmcache_gdr_mode(node):
    # GPUDirect on this host (no usable CUDA): init fails, and LMCache raises from __init__.
    with pytest.raises(RuntimeError, match="error code: 9"):
        LMCacheLikeConnector(node.address, "kvport_ns", 3, FakeTensor(4096))


def test_lmcache_registered_buffers_inside_pool(node):
    # The GDR data path (registered=True buffers inside one registered region, metas outside)
    # run over trans type 2 on this host.
    pool = FakeTensor(1 << 20)
    connector = LMCacheLikeConnector(node.address, "gdr_like", 2, pool)
    connector.trans_type = eic.TransportType.TRANSPORT_GDR
    vals = eic.IOBuffers()
    vals.append(pool.data_ptr(), pool.nbytes, True)
    assert connector.connection.register_memory(vals, eic.MemoryInfo())
    key = "vllm@model@1@0@beef@bfloat16"
    c = chunk(9)
    connector.put(key, c)
    assert connector.batched_get([key]) == [c.tobytes()]
