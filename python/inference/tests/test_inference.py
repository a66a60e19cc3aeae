# SPDX-License-Identifier: Apache-2.0
"""Real inference through kvport: vLLM's CPU build computes prompts, LMCache (its own EIC
connector, unmodified) stores their KV cache in a `kvport serve` through kvport's `eic`, and a
fresh engine process answers the same prompts and prompts that extend them from the node.

Each engine is a process of its own (python/inference/engine.py). Two groups share them:

- float32 (vLLM's "vec" kernels), a node without tokens, each engine's namespace only in its
  LMCache config's eic_kv_ns (which the `eic` module reads at init, so even an engine's first
  existence checks stay in it): A stores prompts over TCP; T, a tenant of another namespace,
  answers their
  extensions (prompt + more tokens) on the same node and must reuse none of A's chunks, so
  its answers are full recomputes; B, fresh, answers the prompts and the extensions over shared
  memory from A's chunks, and must answer as A did for the prompts and as the full recompute
  (T) did for the extensions (float32 makes a loaded prefix and a recomputed one agree).
- bfloat16 (the "amx" kernels on an AMX host: keys and values packed for the tiles), a node
  that requires tokens, the tenant's token granting and naming its namespace only (so the node
  declines it shared memory: TCP), with a disk tier: A2 stores the prompts, then answers an
  extension from vLLM's own prefix cache; the node restarts; B2, fresh, answers the extension
  and the prompts from what the node restored from disk, as A2 did.

The prompts are 4 chunks long (LMCache keeps whole chunks) and the extensions add 300 tokens.
With the chunks keyed by Python's per-process hash instead of sha256_cbor, B and B2 would hit
nothing; without kvport's CPU copy, LMCache would not run at all on vLLM's CPU backend."""

from __future__ import annotations

import pytest

from conftest import CHUNK, lmcache_yaml, prompt_tokens, run_engine, tenant_secret

PROMPTS = 3
PROMPT_TOKENS = 4 * CHUNK
EXTENSION_TOKENS = 300


def token_lists(seed: int):
    return prompt_tokens(seed, PROMPTS, PROMPT_TOKENS, EXTENSION_TOKENS)


def delta(before: dict, after: dict, name: str) -> int:
    return after["counters"][name] - before["counters"][name]


def assert_loaded(result: dict, prompts: int) -> None:
    """LMCache reported, and vLLM counted, every whole chunk of each prompt as a hit."""
    assert result["lmcache"]["retrieved_tokens"] >= prompts * (PROMPT_TOKENS - CHUNK), result
    for cached in result["steps"][0]["cached"]:
        assert cached >= PROMPT_TOKENS - CHUNK, result["steps"][0]["cached"]


@pytest.fixture(scope="module")
def float32_run(tmp_path_factory, node_factory, model):
    workdir = tmp_path_factory.mktemp("float32")
    node = node_factory()
    prompts, extensions = token_lists(seed=1)
    run = {"node": node, "stats": [node.stats()]}
    run["A"] = run_engine(workdir, "A", model, "float32", [prompts],
                          lmcache_yaml(workdir / "A.yaml", node, "tenant-a", "tcp"))
    run["stats"].append(node.stats())
    run["a_objects"] = node.objects_in("tenant-a")
    run["T"] = run_engine(workdir, "T", model, "float32", [extensions],
                          lmcache_yaml(workdir / "T.yaml", node, "tenant-b", "shm"))
    run["stats"].append(node.stats())
    run["objects_after_t"] = {ns: node.objects_in(ns) for ns in ("tenant-a", "tenant-b")}
    run["B"] = run_engine(workdir, "B", model, "float32", [prompts + extensions],
                          lmcache_yaml(workdir / "B.yaml", node, "tenant-a", "shm"))
    run["stats"].append(node.stats())
    return run


def test_a_stores_its_prompts_on_the_node_over_tcp(float32_run):
    before, after = float32_run["stats"][0:2]
    assert float32_run["A"]["lmcache"]["stored_tokens"] >= PROMPTS * PROMPT_TOKENS
    assert float32_run["a_objects"] >= PROMPTS * PROMPT_TOKENS // CHUNK
    assert delta(before, after, "op_mset") > 0
    assert delta(before, after, "op_arena_commit") == 0


def test_another_tenant_reuses_none_of_a_s_chunks(float32_run):
    t = float32_run["T"]
    assert t["lmcache"]["retrieved_tokens"] == 0, t["lmcache"]
    assert t["steps"][0]["cached"] == [0] * PROMPTS
    before, after = float32_run["stats"][1:3]
    assert delta(before, after, "hits") == 0
    # T stored its own chunks in its namespace; A's are untouched.
    objects = float32_run["objects_after_t"]
    assert objects["tenant-b"] >= PROMPTS * (PROMPT_TOKENS // CHUNK)
    assert objects["tenant-a"] == float32_run["a_objects"]


def test_a_fresh_process_answers_from_the_node_as_a_did(float32_run):
    a, b = float32_run["A"], float32_run["B"]
    assert b["steps"][0]["tokens"][:PROMPTS] == a["steps"][0]["tokens"]
    assert_loaded(b, PROMPTS)


def test_extensions_from_the_node_match_a_full_recompute(float32_run):
    b, t = float32_run["B"], float32_run["T"]
    assert b["steps"][0]["tokens"][PROMPTS:] == t["steps"][0]["tokens"]
    for cached in b["steps"][0]["cached"][PROMPTS:]:
        assert cached >= PROMPT_TOKENS - CHUNK


def test_b_loaded_through_shared_memory_and_the_node_counted_hits(float32_run):
    before, after = float32_run["stats"][2:4]
    assert delta(before, after, "hits") >= PROMPTS * (PROMPT_TOKENS // CHUNK - 1)
    assert delta(before, after, "op_arena_get") >= PROMPTS * (PROMPT_TOKENS // CHUNK - 1)


@pytest.fixture(scope="module")
def bfloat16_run(tmp_path_factory, node_factory, model):
    workdir = tmp_path_factory.mktemp("bfloat16")
    node = node_factory(tenants=("tenant-a",), disk=True)
    prompts, extensions = token_lists(seed=2)
    token = tenant_secret("tenant-a")
    run = {"node": node}
    run["A"] = run_engine(workdir, "A2", model, "bfloat16", [prompts, extensions[:1]],
                          lmcache_yaml(workdir / "A2.yaml", node, "tenant-a", "tcp"), token)
    run["before_restart"] = node.stats()
    node.restart()
    run["restarted"] = node.stats()
    run["B"] = run_engine(workdir, "B2", model, "bfloat16", [extensions[:1] + prompts[1:]],
                          lmcache_yaml(workdir / "B2.yaml", node, "tenant-a", "tcp"), token)
    run["after"] = node.stats()
    return run


def test_the_node_restores_a2_s_chunks_from_disk(bfloat16_run):
    stored = bfloat16_run["before_restart"]
    assert stored["counters"]["op_mset"] > 0
    restarted = bfloat16_run["restarted"]
    assert restarted["counters"]["disk_restored"] >= PROMPTS * PROMPT_TOKENS // CHUNK


def test_after_the_restart_b2_answers_as_a2_did_over_tcp(bfloat16_run):
    a, b = bfloat16_run["A"], bfloat16_run["B"]
    # The extension, answered by A2 from vLLM's own prefix cache, by B2 from the node.
    assert b["steps"][0]["tokens"][0] == a["steps"][1]["tokens"][0]
    assert b["steps"][0]["tokens"][1:] == a["steps"][0]["tokens"][1:]
    assert_loaded(b, PROMPTS)
    before, after = bfloat16_run["restarted"], bfloat16_run["after"]
    assert delta(before, after, "hits") >= PROMPTS * (PROMPT_TOKENS // CHUNK - 1)
    assert delta(before, after, "op_mget") > 0
    assert delta(before, after, "op_arena_get") == 0


def test_the_engines_logged_no_lmcache_error(float32_run, bfloat16_run):
    for run in (float32_run, bfloat16_run):
        for name in ("A", "B"):
            log = run[name]["log"]
            assert "No supported cpu connector" not in log
            assert "LMCache ERROR" not in log, log[-4000:]
            assert "can't be retrieved" not in log, log[-4000:]
