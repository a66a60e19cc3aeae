# SPDX-License-Identifier: Apache-2.0
"""One vLLM engine process of the inference lane: `python engine.py JOB.json`.

JOB: {"model": DIR, "dtype": "float32"|"bfloat16", "lmcache": YAML or null, "steps":
[[prompt, ...], ...], "out": PATH}, optionally "max_tokens" (8), "max_model_len" (4096),
"prefix_caching" (true: vLLM's own), "kvport" (kvport.vllm's kv_connector_extra_config:
vLLM runs kvport's own connector, no LMCache; not with "lmcache") with
"kv_load_failure_policy" (vLLM's, "fail" by default), and "lmcache_mp" (the
kv_connector_extra_config of vLLM's LMCacheMPConnector, "lmcache.mp.host"/"lmcache.mp.port"...:
vLLM runs against an LMCache multiprocess server, the class named from kvport.vllm_connector,
which imports LMCache only when it is built). Each prompt is a list of
token ids; each step is one generate() call (greedy), so a later step sees what the earlier ones
stored. Writes to `out`: vLLM's block size; per step the new tokens, vLLM's cached-token count
of each prompt and the step's seconds; the tokens LMCache reported looked up, hit, retrieved
and stored over the whole run (summed from LMCache's own stats calls, which its stats thread
otherwise clears); with "kvport", the connector's counts of the blocks (x layers) it loaded and
saved.

With an LMCache config, vLLM runs LMCache's connector from kvport.vllm_connector (kvport's CPU KV
copy) and LMCACHE_CONFIG_FILE names the YAML. The engine runs in this process
(VLLM_ENABLE_V1_MULTIPROCESSING=0), its worker too, with one core left to the rest
(VLLM_CPU_NUM_OF_RESERVED_CPU=1): with or without a connector, the same thread count, so greedy
outputs compare bit for bit."""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any, Dict


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
