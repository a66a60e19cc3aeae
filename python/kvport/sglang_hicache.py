# SPDX-License-Identifier: Apache-2.0
"""kvport as an SGLang HiCache storage backend, loaded with ``--hicache-storage-backend
dynamic`` (docs/python.md, "SGLang HiCache")::

    --hicache-storage-backend dynamic --hicache-storage-backend-extra-config \\
      '{"backend_name": "kvport", "module_path": "kvport.sglang_hicache",
        "class_name": "HiCacheKvport", "interface_v1": 1, "endpoint": "127.0.0.1:7700",
        "namespace": "sglang"}'

Every page of every host pool moves straight between the pool's memory and the node: the
pool's own ``get_page_buffer_meta`` names each page's regions (an MHA page's K half and V half,
an MLA page, a Mamba state's temporal and conv parts, a DSA indexer page), and each region is
one node object, written from and read into the pool in place (shared memory or TCP).

**Page groups.** All pools of one page (its KV and its sidecars: a Mamba state, a DSA indexer,
an SWA window) form one group, keyed by the page's hash. SGLang writes a page's sidecars and
its KV in separate calls (sidecars through ``batch_set_v2``, then the KV through
``batch_set_v1``), possibly from different ranks (MLA's KV from one writer, a TP-sharded Mamba
state from every rank), and the node evicts objects one at a time, so a group can lose a
member. The rule this backend keeps: **a sidecar page is never reported present nor served
unless the page's whole KV is present** (the sglang#30321 failure is a sidecar read without
its KV, or a KV hit whose sidecar is gone: both are cut here), and a page is present only when
every region of it is. ``batch_exists_v2`` reports each pool's prefix under its
``PoolHitPolicy`` (ALL_PAGES: every page of the KV prefix; TRAILING_PAGES: the last
``len(keys)`` pages before each stop point) and the restorable prefix lengths all pools allow.
``batch_get_v2`` checks the KV of every sidecar page it read, after the read, and deletes the
regions of a sidecar page it found without its KV, so a broken group does not stay half in
the node. A write that stores only part of a page's regions deletes the part it stored.

What the node does not do: evict a group's objects together. A group loses members one at a
time under pressure and this backend stops serving it from the first loss; until a read meets
a broken group, its remaining objects take node memory until the node evicts them in turn.

The extra config (beside SGLang's backend_name, module_path and class_name): interface_v1
(required, 1: SGLang's controller moves a dynamic backend's pages with the v1 page calls only
when it is set; without it the backend refuses to start), endpoint (required: "HOST:PORT",
"unix:/PATH", "a:1;b:2", "etcd:..."), namespace (default ""), token or token_file (else
$KVPORT_TOKEN), transport_type (0 automatic: shared memory with a node on this host, else TCP;
1 TCP), connections, timeout (seconds), ttl_seconds (-1: none).
"""

from __future__ import annotations

import logging
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from sglang.srt.mem_cache.hicache_storage import (
    HiCacheStorage,
    HiCacheStorageConfig,
    HiCacheStorageExtraInfo,
    PoolHitPolicy,
    PoolName,
    PoolTransfer,
    PoolTransferResult,
)

from . import Client, Error, KeyCode

__all__ = ["HiCacheKvport"]

logger = logging.getLogger(__name__)

# Keys per node request: well under a node's default max_batch_keys (4096).
_KEYS_PER_CALL = 1024

# The end of a region key before its suffix: '.<pool>.<region number>'.
_REGION = re.compile(r"\.[A-Za-z0-9_]+\.[0-9]+$")

_CLIENT_OPTIONS = ("token", "token_file", "transport_type", "connections", "timeout",
                   "connect_timeout", "instance_id")


class HiCacheKvport(HiCacheStorage):
    """One SGLang rank's HiCache L3 storage on a kvport node (module doc)."""

    def __init__(self, storage_config: HiCacheStorageConfig, kwargs: Optional[dict] = None):
        extra = dict(storage_config.extra_config or {})
        endpoint = extra.get("endpoint")
        if not endpoint:
            raise ValueError("kvport HiCache backend: the extra config names no 'endpoint' "
                             "(HOST:PORT of a kvport node)")
        if not extra.get("interface_v1"):
            # Without it SGLang's controller copies each page out flat and calls batch_set /
            # batch_get (the tensor API), which this backend does not answer.
            raise ValueError("kvport HiCache backend: the extra config needs \"interface_v1\": 1 "
                             "(SGLang then moves pages with batch_get_v1 / batch_set_v1, in "
                             "place)")
        self.namespace = str(extra.get("namespace", ""))
        self.ttl = int(extra.get("ttl_seconds", -1))
        options = {k: extra[k] for k in _CLIENT_OPTIONS if k in extra}
        self.client = Client(endpoint, **options)
        self.is_mla = storage_config.is_mla_model
        # The key suffixes of SGLang's own file backend: MLA's KV is the same on every TP rank
        # and stored once; TP-sharded state (Mamba) is keyed by rank.
        model = "-".join(storage_config.model_name.split("/")) if storage_config.model_name \
            else ""
        shard = ""
        if storage_config.pp_size > 1:
            shard += f"_{storage_config.pp_size}_{storage_config.pp_rank}"
        if storage_config.attn_cp_size > 1:
            shard += f"_cp{storage_config.attn_cp_rank}_{storage_config.attn_cp_size}"
        self.rank_suffix = f"_{model}_{storage_config.tp_rank}_{storage_config.tp_size}{shard}"
        self.shared_suffix = f"_{model}{shard}" if self.is_mla else self.rank_suffix
        if storage_config.dcp_size > 1:
            dcp = (f"_tp{storage_config.tp_size}_dcp{storage_config.dcp_rank}"
                   f"_{storage_config.dcp_size}_page{storage_config.logical_page_size}")
            self.shared_suffix += dcp
            self.rank_suffix += dcp
        self.registered_pools: Dict[str, Any] = {}
        self._regions: Dict[str, int] = {}  # pool name -> regions of one page

    # --- SGLang's registration calls ---------------------------------------------------------

    def register_mem_pool_host(self, mem_pool_host) -> None:
        super().register_mem_pool_host(mem_pool_host)
        self._register(mem_pool_host, PoolName.KV.value)

    def register_mem_host_pool_v2(self, host_pool, host_pool_name) -> None:
        self._register(host_pool, str(host_pool_name))

    def _register(self, pool, name: str) -> None:
        """Takes a pool whose pages can be moved in place, or fails the attach saying why."""
        try:
            ptrs, _ = pool.get_page_buffer_meta(torch.arange(pool.page_size, dtype=torch.int64))
        except (NotImplementedError, ValueError) as e:
            raise ValueError(f"kvport HiCache backend: the '{name}' host pool cannot move its "
                             f"pages in place: {e}") from e
        self.registered_pools[name] = pool
        self._regions[name] = len(ptrs)

    def close(self) -> None:
        self.client.close()

    # --- Keys and regions --------------------------------------------------------------------

    def _pool(self, name) -> Any:
        pool = self.registered_pools.get(str(name))
        if pool is None:
            raise ValueError(f"kvport HiCache backend: no host pool registered as '{name}'")
        return pool

    def _regions_per_page(self, name: str) -> int:
        self._pool(name)  # registered, or a ValueError naming it
        return self._regions[name]

    def _suffix(self, name: str) -> str:
        return self.rank_suffix if name == PoolName.MAMBA else self.shared_suffix

    def _keys(self, name: str, page_keys: Sequence[str]) -> List[str]:
        """The node keys of each page's regions, page by page: '<hash>.<pool>.<i><suffix>'."""
        n, suffix = self._regions_per_page(name), self._suffix(name)
        return [f"{key}.{name}.{i}{suffix}" for key in page_keys for i in range(n)]

    def _is_ours(self, key: str) -> bool:
        """Whether `key` is '<hash>.<pool>.<i>' and one of this rank's suffixes (a model whose
        name ends like this one's has a suffix that does not follow '.<i>')."""
        return any(key.endswith(s) and _REGION.search(key, 0, len(key) - len(s))
                   for s in (self.rank_suffix, self.shared_suffix))

    def _buffers(self, name: str, host_indices: torch.Tensor,
                 pages: int) -> Optional[List[Tuple[int, int]]]:
        """(pointer, size) of each page's regions in the host pool, page by page; None when the
        indices do not cover `pages` whole pages."""
        pool = self._pool(name)
        if host_indices is None or host_indices.numel() != pages * pool.page_size:
            logger.error("kvport HiCache: %s pool got %s indices for %d pages of %d tokens",
                         name, None if host_indices is None else host_indices.numel(), pages,
                         pool.page_size)
            return None
        if pages == 0:
            return []
        ptrs, sizes = pool.get_page_buffer_meta(host_indices)
        if len(ptrs) != pages * self._regions_per_page(name):
            logger.error("kvport HiCache: %s pool gave %d regions for %d pages", name,
                         len(ptrs), pages)
            return None
        return list(zip(ptrs, sizes))

    # --- Node calls, in slices a node accepts ------------------------------------------------

    def _exist(self, keys: List[str]) -> List[bool]:
        out: List[bool] = []
        for s in range(0, len(keys), _KEYS_PER_CALL):
            part = keys[s:s + _KEYS_PER_CALL]
            try:
                codes = self.client.mexist(part, ns=self.namespace).codes
            except Error as e:  # a closed client: nothing is present
                logger.warning("kvport HiCache: mexist failed: %s", e)
                codes = [KeyCode.UNAVAILABLE] * len(part)
            out += [c == KeyCode.SUCCESS for c in codes]
        return out

    def _get(self, keys: List[str], buffers: List[Tuple[int, int]]) -> List[bool]:
        out: List[bool] = []
        for s in range(0, len(keys), _KEYS_PER_CALL):
            part, bufs = keys[s:s + _KEYS_PER_CALL], buffers[s:s + _KEYS_PER_CALL]
            try:
                r = self.client.mget(part, bufs, ns=self.namespace)
                # A shorter value is another layout's page: not a hit.
                out += [c == KeyCode.SUCCESS and n == b[1]
                        for c, n, b in zip(r.codes, r.value_sizes, bufs)]
            except Error as e:
                logger.warning("kvport HiCache: mget failed: %s", e)
                out += [False] * len(part)
        return out

    def _set(self, keys: List[str], buffers: List[Tuple[int, int]]) -> List[bool]:
        out: List[bool] = []
        for s in range(0, len(keys), _KEYS_PER_CALL):
            part, bufs = keys[s:s + _KEYS_PER_CALL], buffers[s:s + _KEYS_PER_CALL]
            try:
                codes = self.client.mset(part, bufs, ns=self.namespace, ttl=self.ttl).codes
            except Error as e:
                logger.warning("kvport HiCache: mset failed: %s", e)
                codes = [KeyCode.UNAVAILABLE] * len(part)
            out += [c == KeyCode.SUCCESS for c in codes]
        return out

    def _delete(self, keys: List[str]) -> None:
        for s in range(0, len(keys), _KEYS_PER_CALL):
            try:
                self.client.mdel(keys[s:s + _KEYS_PER_CALL], ns=self.namespace)
            except Error as e:
                logger.warning("kvport HiCache: mdel failed: %s", e)

    def _per_page(self, name: str, flags: List[bool]) -> List[bool]:
        """A page is whole when every one of its regions is."""
        n = self._regions_per_page(name)
        return [all(flags[i:i + n]) for i in range(0, len(flags), n)]

    # --- One pool's pages --------------------------------------------------------------------

    def _write_pages(self, name: str, page_keys: Sequence[str],
                     host_indices: torch.Tensor) -> List[bool]:
        buffers = self._buffers(name, host_indices, len(page_keys))
        if buffers is None:
            return [False] * len(page_keys)
        keys = self._keys(name, page_keys)
        stored = self._set(keys, buffers)
        pages = self._per_page(name, stored)
        # Regions stored of a page that did not store whole: no half page stays behind.
        n = self._regions_per_page(name)
        partial = [k for p, ok in enumerate(pages) if not ok
                   for k, s in zip(keys[p * n:(p + 1) * n], stored[p * n:(p + 1) * n]) if s]
        if partial:
            self._delete(partial)
        return pages

    def _read_pages(self, name: str, page_keys: Sequence[str],
                    host_indices: torch.Tensor) -> List[bool]:
        buffers = self._buffers(name, host_indices, len(page_keys))
        if buffers is None:
            return [False] * len(page_keys)
        return self._per_page(name, self._get(self._keys(name, page_keys), buffers))

    def _kv_present(self, page_keys: Sequence[str]) -> List[bool]:
        return self._per_page(PoolName.KV.value,
                              self._exist(self._keys(PoolName.KV.value, page_keys)))

    # --- v1: the KV pool ---------------------------------------------------------------------

    def batch_set_v1(self, keys: List[str], host_indices: torch.Tensor,
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> List[bool]:
        return self._write_pages(PoolName.KV.value, keys, host_indices)

    def batch_get_v1(self, keys: List[str], host_indices: torch.Tensor,
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> List[bool]:
        return self._read_pages(PoolName.KV.value, keys, host_indices)

    def batch_exists(self, keys: List[str],
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> int:
        present = self._kv_present(keys)
        return present.index(False) if False in present else len(present)

    def exists(self, key: str) -> bool:
        return self.batch_exists([key]) == 1

    # The tensor API (get/set of flat page copies) is SGLang's path for a dynamic backend
    # without "interface_v1"; this one requires it, so the controller calls the page API.
    def get(self, key, target_location=None, target_sizes=None):
        raise NotImplementedError("kvport HiCache backend: use the page API (batch_get_v1)")

    def set(self, key, value=None, target_location=None, target_sizes=None) -> bool:
        raise NotImplementedError("kvport HiCache backend: use the page API (batch_set_v1)")

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        raise NotImplementedError("kvport HiCache backend: use the page API (batch_get_v1)")

    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None) -> bool:
        raise NotImplementedError("kvport HiCache backend: use the page API (batch_set_v1)")

    # --- v2: several pools -------------------------------------------------------------------

    def batch_exists_v2(self, keys: List[str],
                        pool_transfers: Optional[List[PoolTransfer]] = None,
                        extra_info: Optional[HiCacheStorageExtraInfo] = None
                        ) -> PoolTransferResult:
        transfers = [t for t in pool_transfers or [] if t.name != PoolName.KV]
        for t in transfers:
            if t.hit_policy not in (PoolHitPolicy.ALL_PAGES, PoolHitPolicy.TRAILING_PAGES):
                raise ValueError(f"kvport HiCache backend: unsupported pool hit policy "
                                 f"'{t.hit_policy.value}' for pool '{t.name}' (this backend "
                                 f"answers all_pages and trailing_pages)")
        # One probe of every region: the KV's and each sidecar's, page by page.
        probe = self._keys(PoolName.KV.value, keys)
        kv_regions = len(probe)
        spans = []
        for t in transfers:
            region_keys = self._keys(str(t.name), keys)
            spans.append((t, len(probe), len(probe) + len(region_keys)))
            probe += region_keys
        found = self._exist(probe)
        kv = self._per_page(PoolName.KV.value, found[:kv_regions])
        kv_pages = kv.index(False) if False in kv else len(kv)
        hit_count: Dict[str, int] = {PoolName.KV: kv_pages} if kv_pages else {}
        restorable = list(range(1, kv_pages + 1))
        for t, start, end in spans:
            if not restorable:
                break
            # The group rule: a sidecar page counts only within the KV prefix.
            page = self._per_page(str(t.name), found[start:end])[:kv_pages]
            if t.hit_policy == PoolHitPolicy.ALL_PAGES:
                boundary = page.index(False) if False in page else kv_pages
                allowed = set(range(1, boundary + 1))
            else:
                trailing = max(1, len(t.keys) if t.keys else 1)
                allowed = {n for n in range(1, kv_pages + 1)
                           if all(page[max(0, n - trailing):n])}
                boundary = max(allowed, default=0)
            if boundary:
                hit_count[t.name] = boundary
            restorable = [n for n in restorable if n in allowed]
        final = restorable[-1] if restorable else 0
        return PoolTransferResult(final, hit_count, restorable)

    def batch_set_v2(self, transfers: List[PoolTransfer],
                     extra_info: Optional[HiCacheStorageExtraInfo] = None
                     ) -> Dict[str, List[bool]]:
        results: Dict[str, List[bool]] = {}
        for t in transfers:
            results[t.name] = self._write_pages(str(t.name), t.keys or [], t.host_indices)
        return results

    def batch_get_v2(self, transfers: List[PoolTransfer],
                     extra_info: Optional[HiCacheStorageExtraInfo] = None
                     ) -> Dict[str, List[bool]]:
        results: Dict[str, List[bool]] = {}
        for t in transfers:
            keys = t.keys or []
            read = self._read_pages(str(t.name), keys, t.host_indices)
            if t.name != PoolName.KV and any(read):
                # The group rule, checked after the read: a sidecar page whose KV is gone
                # is not served, and its regions are deleted.
                kv = self._kv_present(keys)
                orphans = [k for k, r, present in zip(keys, read, kv) if r and not present]
                if orphans:
                    logger.info("kvport HiCache: %d %s page(s) without their KV: not served, "
                                "deleted", len(orphans), t.name)
                    self._delete(self._keys(str(t.name), orphans))
                read = [r and present for r, present in zip(read, kv)]
            results[t.name] = read
        return results

    def clear(self) -> None:
        """Deletes this rank's pages of every pool: the namespace's keys that end in this
        rank's suffixes (other models and ranks sharing the namespace keep theirs)."""
        ours, cursor = [], 0
        while True:
            page, cursor = self.client.list(self.namespace, cursor)
            ours += [k for k in page if self._is_ours(k)]
            if cursor == 0:
                break
        self._delete(ours)
