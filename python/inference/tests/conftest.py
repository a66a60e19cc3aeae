# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the inference lane (make test-inference): a model made here, `kvport serve`
nodes, and vLLM engine processes (python/inference/engine.py), all from build/inference/venv
(scripts/inference-venv) and the build's kvport binary.

The model is a small Llama with random weights, made with transformers and saved as safetensors:
nothing is downloaded, and greedy outputs with and without the cache are compared, so random
weights serve. Every wait is bounded: a node that does not say it is serving within 30 s, or an
engine process that has not finished within ENGINE_TIMEOUT, fails the test."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any, List, Optional

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "python" / "testing"))
from kvport_serve import KvportServe  # noqa: E402
KVPORT = os.environ.get("KVPORT_BIN", str(ROOT / "build" / "bin" / "kvport"))
ENGINE = Path(__file__).resolve().parents[1] / "engine.py"
ENGINE_TIMEOUT = 600  # s: an engine's start is mostly imports, ~20-40 s on 2 busy cores
OPERATOR_SECRET = "inference-operator-secret-0123456789"
CHUNK = 256  # LMCache's chunk_size: tokens per object on the node


def tenant_secret(namespace: str) -> str:
    return f"inference-tenant-secret-{namespace}-0123456789"


@pytest.fixture(scope="session")
def model(tmp_path_factory) -> str:
    """A Llama of 2 layers, 4 query and 2 KV heads of 64 (the CPU backend's head sizes are
    multiples of 32), random weights from a fixed seed, stored as float32."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=1024, hidden_size=256, intermediate_size=512,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=4096, torch_dtype="float32")
    path = tmp_path_factory.mktemp("model")
    LlamaForCausalLM(config).save_pretrained(path, safe_serialization=True)
    return str(path)


def prompt_tokens(seed: int, count: int, tokens: int, extension: int):
    """`count` prompts of `tokens` random token ids from `seed`, and each one extended by
    `extension` more: the prompts an engine stores and those a fresh one answers from the node."""
    rng = random.Random(seed)
    prompts = [[rng.randrange(1, 1024) for _ in range(tokens)] for _ in range(count)]
    extensions = [p + [rng.randrange(1, 1024) for _ in range(extension)] for p in prompts]
    return prompts, extensions


class Node(KvportServe):
    """A `kvport serve` process on 127.0.0.1 with a Unix socket (shared memory for clients on
    this host; python/testing/kvport_serve.py). tenants: the node requires tokens; one per
    namespace named, granted only that namespace and naming it as its default (tenant_secret),
    and an operator token for stats(). disk: a folder for the disk tier. restart() stops it
    cleanly (its memory goes to the disk tier) and starts it again on the same port and socket.
    capacity: the node's memory."""

    def __init__(self, workdir: Path, tenants: tuple = (), disk: bool = False,
                 capacity: str = "256MiB"):
        super().__init__(KVPORT, workdir, str(workdir / "kvport.sock"), stop_timeout=60)
        self.disk = str(workdir / "disk") if disk else ""
        self.capacity = capacity
        self.tokens = bool(tenants)
        if tenants:
            text = (f'tokens:\n  - name: operator\n    secret: "{OPERATOR_SECRET}"\n'
                    f'    read: ["*"]\n    write: ["*"]\n    admin: true\n')
            for ns in tenants:
                text += (f'  - name: {ns}\n    secret: "{tenant_secret(ns)}"\n'
                         f'    read: ["{ns}"]\n    write: ["{ns}"]\n    namespace: "{ns}"\n')
            self.write_tokens(text)

    def serve_args(self) -> List[str]:
        args = ["--capacity", self.capacity, "--threads", "2"]
        if self.disk:
            args += ["--disk", self.disk, "--disk-capacity", "256MiB"]
        return args

    def operator_token(self) -> str:
        return OPERATOR_SECRET if self.tokens else ""

    def objects_in(self, namespace: str) -> int:
        return sum(n["objects"] for n in self.stats()["namespaces"] if n["name"] == namespace)


@pytest.fixture(scope="module")
def node_factory(tmp_path_factory):
    nodes: List[Node] = []

    def make(**kwargs) -> Node:
        nodes.append(Node(tmp_path_factory.mktemp("node"), **kwargs).start())
        return nodes[-1]

    yield make
    for node in nodes:
        node.stop()


def lmcache_yaml(path: Path, node: Optional[Node], namespace: str, transport: str,
                 **overrides: Any) -> str:
    """LMCache's config for an engine of `namespace` on `node`: kvport's `eic` over TCP
    (eic_trans_type 1) or shared memory (2: kvport picks shared memory with a node on this
    host), chunks keyed by a hash that is the same in every process (sha256_cbor), and the
    engine's own CPU tier, so that a fresh process starts with nothing but the node. No node:
    LMCache's local tiers alone. overrides: more or other LMCache keys."""
    config = {
        "chunk_size": CHUNK,
        "local_cpu": True,
        "max_local_cpu_size": 0.5,
        "save_unfull_chunk": False,
        "pre_caching_hash_algorithm": "sha256_cbor",
    }
    if node is not None:
        config.update({
            "remote_url": node.url,
            "remote_serde": "naive",
            "blocking_timeout_secs": 10,
            "eic_instance_id": f"{namespace}-{path.stem}",
            "eic_log_dir": str(path.parent / "eic-logs"),
            "eic_log_level": 1,
            "eic_trans_type": {"tcp": 1, "shm": 2}[transport],
            "eic_kv_ns": namespace,
            "eic_kv_ttl": -1,
        })
    config.update(overrides)
    path.write_text(yaml.safe_dump(config))
    return str(path)


class EngineFailed(AssertionError):
    pass


def run_engine(workdir: Path, name: str, model: str, dtype: str, steps: list,
               lmcache: Optional[str] = None, token: str = "", **options) -> dict:
    """Runs python/inference/engine.py as a fresh process; its result (engine.py's `out`).
    token: KVPORT_TOKEN. The engine's namespace is its LMCache config's eic_kv_ns alone (no
    KVPORT_EIC_NS): the `eic` module reads it at init, so LMCache's existence checks, which name
    no namespace, stay in it from the first (docs/python.md, "Namespaces"). options: more of
    engine.py's job keys."""
    job = {"model": model, "dtype": dtype, "lmcache": lmcache, "steps": steps,
           "out": str(workdir / f"{name}.json"), "max_model_len": 2048, **options}
    (workdir / f"{name}.job.json").write_text(json.dumps(job))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("KVPORT_") and k != "LMCACHE_CONFIG_FILE"}
    if token:
        env["KVPORT_TOKEN"] = token
    log_path = workdir / f"{name}.log"
    with open(log_path, "wb") as log:
        try:
            code = subprocess.run([sys.executable, str(ENGINE), str(workdir / f"{name}.job.json")],
                                  stdout=log, stderr=subprocess.STDOUT, env=env,
                                  timeout=ENGINE_TIMEOUT).returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    log_text = log_path.read_text(errors="replace")
    if code != 0:
        raise EngineFailed(f"engine {name} exited {code}:\n{log_text[-6000:]}")
    result = json.loads(Path(job["out"]).read_text())
    result["log"] = log_text
    return result
