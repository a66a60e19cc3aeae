# SPDX-License-Identifier: Apache-2.0
"""One vLLM engine process of the inference lane: `python engine.py JOB.json`.

JOB: {"model": DIR, "dtype": "float32"|"bfloat16", "lmcache": YAML or null, "steps":
[[prompt, ...], ...], "out": PATH}, optionally "max_tokens" (8), "max_model_len" (4096),
"prefix_caching" (true: vLLM's own), "time_loads" (false: see LoadClock), "kvport"
(kvport.vllm's kv_connector_extra_config: vLLM runs kvport's own connector, no LMCache; not with
"lmcache") with "kv_load_failure_policy" (vLLM's, "fail" by default), and "lmcache_mp" (the
kv_connector_extra_config of vLLM's LMCacheMPConnector, "lmcache.mp.host"/"lmcache.mp.port"...:
vLLM runs against an LMCache multiprocess server, the class named from kvport.vllm_connector,
which imports LMCache only when it is built). Each prompt is a list of
token ids; each step is one generate() call (greedy), so a later step sees what the earlier ones
stored. Writes to `out`: vLLM's block size; per step the new tokens, vLLM's cached-token count
of each prompt, the step's seconds and, with "time_loads", its LoadClock times ("load"); the
tokens LMCache reported looked up, hit, retrieved and stored over the whole run (summed from
LMCache's own stats calls, which its stats thread otherwise clears); with "kvport", the
connector's counts of the blocks (x layers) it loaded and saved.

With an LMCache config, vLLM runs LMCache's connector from kvport.vllm_connector (kvport's CPU KV
copy) and LMCACHE_CONFIG_FILE names the YAML. The engine runs in this process
(VLLM_ENABLE_V1_MULTIPROCESSING=0), its worker too, with one core left to the rest
(VLLM_CPU_NUM_OF_RESERVED_CPU=1): with or without a connector, the same thread count, so greedy
outputs compare bit for bit."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from typing import Any, Dict, List, Tuple


def count_lmcache_reports(totals: Dict[str, int]) -> None:
    """Adds the token counts LMCache reports to its stats monitor to `totals`. Called once the
    engine is built: importing LMCache (and numba) before vLLM's CPU worker has started breaks
    the worker's start (kvport/vllm_connector.py says why)."""
    from lmcache.observability import LMCStatsMonitor

    def wrap(name: str, keyword: str, key: str) -> None:
        original = getattr(LMCStatsMonitor, name)  # (self, stats, tokens), tokens maybe -1

        def counted(*args: Any, **kwargs: Any) -> Any:
            tokens = args[2] if len(args) > 2 else kwargs.get(keyword, -1)
            if tokens < 0:  # "all of the request's": the stats object has the count
                tokens = getattr(args[1], "num_tokens", 0)
            totals[key] += int(tokens)
            return original(*args, **kwargs)

        setattr(LMCStatsMonitor, name, counted)

    wrap("on_lookup_finished", "num_hit_tokens", "hit_tokens_looked_up")
    wrap("on_retrieve_finished", "num_retrieved_tokens", "retrieved_tokens")
    wrap("on_store_finished", "num_stored_tokens", "stored_tokens")


class LoadClock:
    """Times, per step, what loading from kvport costs in this process, at the kvport client
    (kvport._core.Client, which both kvport's `eic` module under LMCache and kvport.vllm call):
    kvport_get_seconds, the time at least one mget or mget_meta was in flight (calls on several
    threads overlap: their union, not their sum), kvport_get_bytes (the bytes mget read) and
    kvport_exist_seconds (mexist, the lookups); with LMCache, retrieve_seconds (LMCache's
    LMCacheEngine.retrieve: the gets, LMCache's own work and the copy into vLLM's cache),
    copy_in_seconds and copy_out_seconds (kvport's CPU KV copy into vLLM's cache, and out of
    it for a store); with kvport.vllm,
    waited_seconds (the forward pass waiting in wait_for_layer_load). Installed once the engine
    is built (count_lmcache_reports says why)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.intervals: Dict[str, List[Tuple[float, float]]] = {"get": [], "exist": []}
        self.sums = {"kvport_get_bytes": 0.0, "retrieve_seconds": 0.0, "copy_in_seconds": 0.0,
                     "copy_out_seconds": 0.0, "waited_seconds": 0.0}

    def install(self, lmcache: bool, kvport_connector: bool) -> None:
        from kvport import _core

        for name, kind in (("mget", "get"), ("mget_meta", "get"), ("mexist", "exist")):
            self._wrap(_core.Client, name, kind)
        if lmcache:
            from lmcache.v1.cache_engine import LMCacheEngine
            from kvport.lmcache_cpu import VLLMCPUPagedCopy

            self._wrap(LMCacheEngine, "retrieve", "retrieve_seconds")
            self._wrap(VLLMCPUPagedCopy, "to_gpu", "copy_in_seconds")
            self._wrap(VLLMCPUPagedCopy, "from_gpu", "copy_out_seconds")
        if kvport_connector:
            from kvport.vllm import KvportConnector

            self._wrap(KvportConnector, "wait_for_layer_load", "waited_seconds")

    def _wrap(self, cls: Any, name: str, kind: str) -> None:
        original = getattr(cls, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            result = original(*args, **kwargs)
            end = time.perf_counter()
            with self.lock:
                if kind in self.intervals:
                    self.intervals[kind].append((start, end))
                    if name == "mget":  # (status, codes, sizes, metas, error)
                        self.sums["kvport_get_bytes"] += sum(
                            size for code, size in zip(result[1], result[2]) if code == 0)
                else:
                    self.sums[kind] += end - start
            return result

        setattr(cls, name, timed)

    @staticmethod
    def _union(intervals: List[Tuple[float, float]]) -> float:
        total, reach = 0.0, float("-inf")
        for start, end in sorted(intervals):
            if end > reach:
                total += end - max(start, reach)
                reach = end
        return total

    def take(self) -> Dict[str, float]:
        """The times since the last take()."""
        with self.lock:
            taken = dict(self.sums, kvport_get_seconds=self._union(self.intervals["get"]),
                         kvport_exist_seconds=self._union(self.intervals["exist"]))
            self.sums = dict.fromkeys(self.sums, 0.0)
            self.intervals = {kind: [] for kind in self.intervals}
        return taken


def wait_for_lmcache_puts(timeout: float = 60.0) -> None:
    """Returns once LMCache's remote backend has no put in flight (its puts run on LMCache's
    event loop after generate() returns), so that what this engine stored is on the node."""
    from lmcache.integration.vllm.utils import ENGINE_NAME
    from lmcache.v1.cache_engine import LMCacheEngineBuilder

    engine = LMCacheEngineBuilder.get(ENGINE_NAME)
    remote = engine.storage_manager.storage_backends.get("RemoteBackend")
    deadline = time.monotonic() + timeout
    while remote is not None and remote.put_tasks:
        if time.monotonic() > deadline:
            raise TimeoutError(f"LMCache still puts {len(remote.put_tasks)} chunks")
        time.sleep(0.05)


def main() -> None:
    with open(sys.argv[1]) as f:
        job = json.load(f)
    for name, value in (("VLLM_ENABLE_V1_MULTIPROCESSING", "0"),
                        ("VLLM_CPU_NUM_OF_RESERVED_CPU", "1"),
                        ("VLLM_CPU_KVCACHE_SPACE", "1")):
        os.environ[name] = value
    totals = {"hit_tokens_looked_up": 0, "retrieved_tokens": 0, "stored_tokens": 0}
    extra: Dict[str, Any] = {}
    if job.get("lmcache"):
        os.environ["LMCACHE_CONFIG_FILE"] = job["lmcache"]
        from vllm.config import KVTransferConfig

        extra["kv_transfer_config"] = KVTransferConfig(
            kv_connector="LMCacheConnectorV1", kv_role="kv_both",
            kv_connector_module_path="kvport.vllm_connector")
    elif job.get("lmcache_mp"):
        from vllm.config import KVTransferConfig

        extra["kv_transfer_config"] = KVTransferConfig(
            kv_connector="LMCacheMPConnector", kv_role="kv_both",
            kv_connector_module_path="kvport.vllm_connector",
            kv_connector_extra_config=job["lmcache_mp"])
    elif job.get("kvport"):
        from vllm.config import KVTransferConfig

        extra["kv_transfer_config"] = KVTransferConfig(
            kv_connector="KvportConnector", kv_role="kv_both",
            kv_connector_module_path="kvport.vllm", kv_connector_extra_config=job["kvport"],
            kv_load_failure_policy=job.get("kv_load_failure_policy", "fail"))

    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    llm = LLM(model=job["model"], skip_tokenizer_init=True, dtype=job["dtype"],
              max_model_len=job.get("max_model_len", 4096), enforce_eager=True, seed=0,
              enable_prefix_caching=job.get("prefix_caching", True), **extra)
    if job.get("lmcache"):
        count_lmcache_reports(totals)
    clock = LoadClock() if job.get("time_loads") else None
    if clock is not None:
        clock.install(bool(job.get("lmcache")), bool(job.get("kvport")))
    sampling = SamplingParams(temperature=0, max_tokens=job.get("max_tokens", 8),
                              detokenize=False)
    steps = []
    for prompts in job["steps"]:
        start = time.perf_counter()
        outputs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], sampling,
                               use_tqdm=False)
        steps.append({"tokens": [list(o.outputs[0].token_ids) for o in outputs],
                      "cached": [o.num_cached_tokens for o in outputs],
                      "seconds": time.perf_counter() - start})
        if clock is not None:
            steps[-1]["load"] = clock.take()
    result = {"steps": steps, "lmcache": totals,
              "block_size": llm.llm_engine.vllm_config.cache_config.block_size}
    if job.get("kvport"):
        from vllm.distributed.kv_transfer import get_kv_transfer_group

        result["kvport"] = dict(get_kv_transfer_group().stats)
    with open(job["out"], "w") as f:
        json.dump(result, f)
    if job.get("lmcache"):
        wait_for_lmcache_puts()


if __name__ == "__main__":
    # The process leaves with os._exit: LMCache 0.5.6 cannot be stopped in it (its engine's
    # close() waits forever for its remote backend to close on the event loop it has just
    # stopped, its full stop aborts in zmq) and its event loop thread is no daemon, so the
    # interpreter would never exit, whether main() finished or failed.
    status = 1
    try:
        main()
        status = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
