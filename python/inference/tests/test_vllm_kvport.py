# SPDX-License-Identifier: Apache-2.0
"""kvport.vllm, vLLM's KV connector over a kvport node with no LMCache in the path, on vLLM's CPU
build. Each engine is its own process (python/inference/engine.py), so every hit crosses
processes through vLLM's own block hashes (sha256, fixed seed).

- float32: engine A computes prompts and stores their full blocks on the node; a fresh engine
  B answers prompts that extend them, loading the shared prefix's blocks from the node, and
  must answer exactly as a fresh engine without any connector does (float32 makes a loaded
  prefix and a recomputed one agree); another fresh engine asked A's prompts again loads all
  of each but the block of its last token and answers as A did; an engine in another namespace
  of the same node loads nothing; once every stored object is replaced by one of another size,
  a fresh engine reports each block it fails to load and vLLM (kv_load_failure_policy
  "recompute") computes them: the same tokens again.
- bfloat16 (vLLM's "amx" kernels on an AMX host), on a node that requires tokens, the
  connector's token naming its namespace: a fresh engine answers the prompts from the node as
  the storing one did, and a float32 engine with the same token loads none of those blocks
  (another dtype and layout, other keys)."""

from __future__ import annotations

import pytest

import kvport
from conftest import prompt_tokens, run_engine, tenant_secret

PROMPTS = 2
PROMPT_TOKENS = 640  # whole blocks of 128 (vLLM's CPU default): the last one is computed
EXTENSION_TOKENS = 100
MAX_TOKENS = 8  # engine.py's default
LAYERS = 2  # conftest's model


def token_lists(seed: int):
    return prompt_tokens(seed, PROMPTS, PROMPT_TOKENS, EXTENSION_TOKENS)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, node_factory, model):
    workdir = tmp_path_factory.mktemp("kvport-vllm")
    node = node_factory()
    prompts, extensions = token_lists(seed=7)

    def connector(namespace: str) -> dict:
        return {"endpoint": node.endpoint, "namespace": namespace}

    result = {"node": node}
    result["a"] = run_engine(workdir, "a", model, "float32", [prompts],
                             kvport=connector("vllm-a"))
    result["objects_after_a"] = node.objects_in("vllm-a")
    result["plain"] = run_engine(workdir, "plain", model, "float32", [extensions])
    result["before_b"] = node.stats()
    result["b"] = run_engine(workdir, "b", model, "float32", [extensions],
                             kvport=connector("vllm-a"))
    result["after_b"] = node.stats()
    # Over TCP (transport_type 1), where the others take shared memory.
    result["again"] = run_engine(workdir, "again", model, "float32", [prompts],
                                 kvport=dict(connector("vllm-a"), transport_type=1))
    result["other"] = run_engine(workdir, "other", model, "float32", [extensions],
                                 kvport=connector("vllm-other"))
    # Every object A stored replaced by 16 bytes: still present, no longer a block.
    with kvport.Client(node.endpoint) as client:
        keys, _ = client.list(ns="vllm-a", max_keys=4096)
        assert client.mset(keys, [bytes(16)] * len(keys), ns="vllm-a").ok
    result["damaged"] = run_engine(workdir, "damaged", model, "float32", [extensions],
                                   kvport=connector("vllm-a"),
                                   kv_load_failure_policy="recompute")
    return result


def test_a_stores_every_full_block_of_every_layer(runs):
    a = runs["a"]
    block_size = a["block_size"]
    # The last generated token is sampled, never computed: its KV is in no block.
    full_blocks = PROMPTS * ((PROMPT_TOKENS + MAX_TOKENS - 1) // block_size)
    assert a["kvport"]["saved_blocks"] == LAYERS * full_blocks, a["kvport"]
    assert a["kvport"]["failed_saves"] == 0
    assert a["kvport"]["loaded_blocks"] == 0  # an empty node: nothing to load
    assert runs["objects_after_a"] == LAYERS * full_blocks


def test_a_fresh_process_loads_the_shared_prefix_and_answers_as_a_recompute(runs):
    b, plain = runs["b"], runs["plain"]
    block_size = b["block_size"]
    shared = PROMPT_TOKENS // block_size * block_size  # A's blocks that lie inside the prompt
    assert plain["steps"][0]["cached"] == [0] * PROMPTS  # nothing local in a fresh process
    assert b["steps"][0]["cached"] == [shared] * PROMPTS, b["steps"][0]["cached"]
    assert b["kvport"]["loaded_blocks"] == LAYERS * PROMPTS * (shared // block_size)
    assert b["kvport"]["failed_loads"] == 0
    assert b["steps"][0]["tokens"] == plain["steps"][0]["tokens"]
    hits = runs["after_b"]["counters"]["hits"] - runs["before_b"]["counters"]["hits"]
    assert hits >= LAYERS * PROMPTS * (shared // block_size)


def loaded_of_prompt(block_size: int) -> int:
    """Tokens a fresh engine loads of a prompt A stored: its full blocks but the one holding
    its last token."""
    return (PROMPT_TOKENS - 1) // block_size * block_size


def test_the_same_prompts_load_all_but_their_last_block(runs):
    again, a = runs["again"], runs["a"]
    block_size = again["block_size"]
    expected = loaded_of_prompt(block_size)
    assert again["steps"][0]["cached"] == [expected] * PROMPTS, again["steps"][0]["cached"]
    assert again["kvport"]["loaded_blocks"] == LAYERS * PROMPTS * expected // block_size
    assert again["steps"][0]["tokens"] == a["steps"][0]["tokens"]
    assert again["kvport"]["transport"] == "TCP"
    assert a["kvport"]["transport"] == "shared memory"


def test_another_namespace_loads_nothing(runs):
    other, plain = runs["other"], runs["plain"]
    assert other["steps"][0]["cached"] == [0] * PROMPTS
    assert other["kvport"]["loaded_blocks"] == 0
    assert other["steps"][0]["tokens"] == plain["steps"][0]["tokens"]


def test_keys_keep_ranks_layers_and_layouts_apart():
    from kvport.vllm import block_key, key_prefix

    descriptor = {"model": "m", "dtype": "torch.float32", "block_size": 128, "kv_heads": 2,
                  "head_size": 64, "layout": "cpu-vec"}
    rank0, rank1 = key_prefix(descriptor, 0, 2), key_prefix(descriptor, 1, 2)
    assert rank0 != rank1
    assert key_prefix(dict(descriptor), 0, 2) == rank0  # the same in every process
    assert key_prefix({**descriptor, "layout": "cpu-amx"}, 0, 2) != rank0
    assert key_prefix({**descriptor, "dtype": "torch.bfloat16"}, 0, 2) != rank0
    assert block_key(rank0, "l0", "ab") != block_key(rank0, "l1", "ab")
    assert block_key(rank0, "l0", "ab") != block_key(rank0, "l0", "cd")


def test_a_block_counts_only_with_all_of_its_keys():
    from kvport import KeyCode
    from kvport.vllm import leading_present

    ok, miss = KeyCode.SUCCESS, KeyCode.KEY_NOT_EXIST
    assert leading_present([ok, ok, ok, ok, ok, ok], 2) == 3
    assert leading_present([ok, ok, ok, miss, ok, ok], 2) == 1
    assert leading_present([miss, ok, ok, ok], 2) == 0
    assert leading_present([], 2) == 0


def test_blocks_that_fail_to_load_are_reported_and_recomputed(runs):
    damaged, plain = runs["damaged"], runs["plain"]
    shared_blocks = PROMPT_TOKENS // damaged["block_size"]
    # The node still says present; every get is a value of the wrong size.
    assert damaged["kvport"]["failed_loads"] == LAYERS * PROMPTS * shared_blocks
    assert damaged["kvport"]["loaded_blocks"] == 0
    assert damaged["steps"][0]["tokens"] == plain["steps"][0]["tokens"]


@pytest.fixture(scope="module")
def bfloat16_runs(tmp_path_factory, node_factory, model):
    workdir = tmp_path_factory.mktemp("kvport-vllm-bf16")
    node = node_factory(tenants=("vllm-bf16",))
    prompts, _ = token_lists(seed=8)
    # No namespace: the token's own.
    connector = {"endpoint": node.endpoint, "token": tenant_secret("vllm-bf16")}
    result = {"a": run_engine(workdir, "a", model, "bfloat16", [prompts], kvport=connector)}
    result["objects_after_a"] = node.objects_in("vllm-bf16")
    result["b"] = run_engine(workdir, "b", model, "bfloat16", [prompts], kvport=connector)
    result["float32"] = run_engine(workdir, "f32", model, "float32", [prompts],
                                   kvport=connector)
    return result


def test_bfloat16_prompts_come_back_from_the_node_in_the_tokens_namespace(bfloat16_runs):
    a, b = bfloat16_runs["a"], bfloat16_runs["b"]
    block_size = b["block_size"]
    assert bfloat16_runs["objects_after_a"] == a["kvport"]["saved_blocks"] > 0
    expected = loaded_of_prompt(block_size)
    assert b["steps"][0]["cached"] == [expected] * PROMPTS, b["steps"][0]["cached"]
    assert b["steps"][0]["tokens"] == a["steps"][0]["tokens"]


def test_another_dtype_reads_none_of_those_blocks(bfloat16_runs):
    other = bfloat16_runs["float32"]
    assert other["steps"][0]["cached"] == [0] * PROMPTS
    assert other["kvport"]["loaded_blocks"] == 0
    assert other["kvport"]["saved_blocks"] > 0  # its own blocks, under its own keys


def connector_config(algo: str, extra: dict):
    """The parts of a VllmConfig the connector reads before it connects."""
    from types import SimpleNamespace
    from vllm.config import KVTransferConfig

    return SimpleNamespace(
        kv_transfer_config=KVTransferConfig(kv_connector="KvportConnector", kv_role="kv_both",
                                            kv_connector_module_path="kvport.vllm",
                                            kv_connector_extra_config=extra),
        cache_config=SimpleNamespace(prefix_caching_hash_algo=algo, block_size=128))


def test_a_config_without_an_endpoint_or_a_stable_hash_is_refused(monkeypatch):
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    from kvport.vllm import KvportConnector

    with pytest.raises(ValueError, match="endpoint"):
        KvportConnector(connector_config("sha256", {}), KVConnectorRole.SCHEDULER)
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    with pytest.raises(ValueError, match="PYTHONHASHSEED"):
        KvportConnector(connector_config("xxhash", {"endpoint": "127.0.0.1:1"}),
                        KVConnectorRole.SCHEDULER)
