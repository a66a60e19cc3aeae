# SPDX-License-Identifier: Apache-2.0
"""SGLang's EICStorage call sequence (HiCache L3 backend) against the eic drop-in, written from
the EIC notes (§1c); SGLang is not installed here.

SGLang assigns ns explicitly on Set/Get/Exist (possibly ""), warms up with 1024 keys in 32-key
mexists (default ExistOption), reads per-key codes of an mget only on PARTIAL_FAILED, writes
zero-copy pages of a registered host pool (registered=True), and deletes with a DelOption
whose ns it never sets."""

from __future__ import annotations

import pytest

import eic
from conftest import FakeTensor

S = eic.StatusCode
PAGE = 4096


class SGLangLikeStorage:
    def __init__(self, endpoint: str, namespace: str, pages: int = 64):
        self.ns = namespace
        self.client = eic.Client()
        option = eic.InitOption()
        option.log_dir = "/tmp"
        option.log_level = eic.LogLevel(2)
        option.transport_type = eic.TransportType(2)
        option.flag_file = None
        assert self.client.init(None, endpoint, option) == 0
        self.pool = FakeTensor(pages * PAGE)  # the host KV pool, registered whole
        vals = eic.IOBuffers()
        vals.append(self.pool.data_ptr(), self.pool.nbytes, True)
        info = eic.MemoryInfo()
        info.type = eic.MemoryType.MEMORY_CUDA
        info.cuda_id = 0
        self.client.register_memory(vals, info)
        self.prefix = "model_mha_attn_page_first_0_1_@sglang"
        self._warmup()

    def _warmup(self):
        keys = [f"warmup_key_{i}" for i in range(1024)]
        for start in range(0, len(keys), 32):
            batch = eic.StringVector()
            for key in keys[start:start + 32]:
                batch.append(key)
            self.client.mexist(batch, eic.ExistOption())

    def _key(self, page_key: str) -> str:
        return self.prefix + "_" + page_key

    def page(self, index: int) -> int:
        return self.pool.data_ptr() + index * PAGE

    def batch_set(self, page_keys, indices):
        keys, vals = eic.StringVector(), eic.IOBuffers()
        for page_key, index in zip(page_keys, indices):
            for n, half in enumerate(("_k", "_v")):  # MHA zero copy: two values per page
                keys.append(self._key(page_key) + half)
                vals.append(self.page(index) + n * PAGE // 2, PAGE // 2, True)
        option = eic.SetOption()
        option.ns = self.ns
        option.ttl_second = -1
        status, outcome = self.client.mset(keys, vals, option)
        if status != S.SUCCESS:
            return [False] * len(page_keys)
        return [True] * len(page_keys)

    def batch_get(self, page_keys, indices):
        keys, vals = eic.StringVector(), eic.IOBuffers()
        for page_key, index in zip(page_keys, indices):
            for n, half in enumerate(("_k", "_v")):
                keys.append(self._key(page_key) + half)
                vals.append(self.page(index) + n * PAGE // 2, PAGE // 2, True)
        option = eic.GetOption()
        option.ns = self.ns
        status, _, outcome = self.client.mget(keys, option, vals)
        if status == S.SUCCESS:
            return [True] * len(page_keys)
        if status != S.PARTIAL_FAILED:
            return [False] * len(page_keys)
        return [outcome.status_codes[2 * i] == S.SUCCESS and
                outcome.status_codes[2 * i + 1] == S.SUCCESS for i in range(len(page_keys))]

    def batch_exists(self, page_keys) -> int:
        keys = eic.StringVector()
        for page_key in page_keys:
            keys.append(self._key(page_key) + "_k")
            keys.append(self._key(page_key) + "_v")
        option = eic.ExistOption()
        option.ns = self.ns
        hits = 0
        for start in range(0, len(keys), 1024):  # exist_bs
            chunk = eic.StringVector()
            for key in keys[start:start + 1024]:
                chunk.append(key)
            status, outcome = self.client.mexist(chunk, option)
            if status != S.SUCCESS:
                return hits // 2
            for code in outcome.status_codes:
                if code != S.SUCCESS:
                    return hits // 2
                hits += 1
        return hits // 2

    def delete(self, page_key: str):
        keys = eic.StringVector()
        keys.append(self._key(page_key) + "_k")
        keys.append(self._key(page_key) + "_v")
        self.client.mdel(keys, eic.DelOption())


@pytest.mark.parametrize("namespace", ["sglang-ns", ""])
def test_sglang_sequence(node, namespace):
    storage = SGLangLikeStorage(node.address, namespace)
    for i in range(4):  # distinct page contents
        __import__("ctypes").memset(storage.page(i), 0x40 + i, PAGE)
    hashes = [f"{namespace}hash{i}" for i in range(4)]
    assert storage.batch_set(hashes[:3], [0, 1, 2]) == [True] * 3
    assert storage.batch_exists(hashes) == 3
    __import__("ctypes").memset(storage.page(10), 0, 3 * PAGE)
    # A miss inside the batch: PARTIAL_FAILED, read per key.
    assert storage.batch_get([hashes[0], hashes[3], hashes[2]], [10, 11, 12]) == [True, False,
                                                                                  True]
    got = __import__("ctypes").string_at(storage.page(10), PAGE)
    assert got == bytes([0x40]) * (PAGE // 2) * 2
    storage.delete(hashes[1])  # DelOption() without ns still deletes SGLang's own page
    assert storage.batch_exists(hashes) == 1


def test_sglang_explicit_empty_namespace_is_exact(node):
    writer = SGLangLikeStorage(node.address, "tenant-a")
    reader = SGLangLikeStorage(node.address, "")
    assert writer.batch_set(["p"], [0]) == [True]
    assert writer.batch_exists(["p"]) == 1
    assert reader.batch_exists(["p"]) == 0  # "" assigned: the default namespace only
    assert reader.batch_get(["p"], [1]) == [False]
