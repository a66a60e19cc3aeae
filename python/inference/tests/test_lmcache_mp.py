# SPDX-License-Identifier: Apache-2.0
"""LMCache's multiprocess (MP) mode on vLLM's CPU build, kvport its L2: an LMCache MP server
(`python -m lmcache.v1.multiprocess.server`) runs with kvport's `native_plugin` L2 adapter
(kvport.lmcache_mp.L2Connector) over a `kvport serve` node, and vLLM engine processes reach it
through vLLM's LMCacheMPConnector (named from kvport.vllm_connector, which defers LMCache's
import until the connector is built: python/kvport/vllm_connector.py says why). On a CPU the
KV moves in LMCache's engine-driven mode (the worker copies blocks out of and into vLLM's
cache and the server holds them), so the server is started with that mode.

Engine A computes prompts; the server stores their chunks in its L1 and in kvport. The server
then restarts: a fresh process, an empty L1, so the only copy of the chunks is on the node.
Engine B, a fresh process too, answers the same prompts: vLLM counts every whole chunk of each
prompt as cached, the node counts the hits, and B's greedy tokens are A's (float32). With the
L2 adapter removed (or one that loses the chunks), B finds nothing and caches nothing. The
chunks are keyed by blake3 (the server's default): a hash that is the same in every process,
so a restarted server finds them."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Optional

import pytest

from conftest import prompt_tokens, run_engine

PROMPTS = 2
CHUNK = 256  # the MP server's --chunk-size: tokens per object on the node
PROMPT_TOKENS = 2 * CHUNK + 88  # two whole chunks and a partial one, never stored
NAMESPACE = "lmcache-mp"
RUNNING = "LMCache cache server is running"
START_TIMEOUT = 180  # s: the server's start is mostly imports, ~15 s on 2 idle cores


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MPServer:
    """An LMCache MP server process on 127.0.0.1:`port`, kvport its L2 (the adapter JSON of
    docs/python.md, "LMCache multiprocess mode"). start() returns once it says it serves, within
    START_TIMEOUT, or raises with its log; its output goes to `log` through a thread that reads
    it to the end, so the server never blocks on a full pipe."""

    def __init__(self, log: Path, port: int, node_endpoint: str):
        self.log = log
        self.port = port
        self.adapter = {"type": "native_plugin", "module_path": "kvport.lmcache_mp",
                        "class_name": "L2Connector",
                        "adapter_params": {"endpoint": node_endpoint, "namespace": NAMESPACE}}
        self.process: Optional[subprocess.Popen] = None

    def start(self) -> "MPServer":
        command = [sys.executable, "-m", "lmcache.v1.multiprocess.server", "--host", "127.0.0.1",
                   "--port", str(self.port), "--chunk-size", str(CHUNK), "--l1-size-gb", "0.25",
                   "--eviction-policy", "LRU", "--supported-transfer-mode", "engine_driven",
                   "--disable-observability", "--l2-adapter", json.dumps(self.adapter)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("KVPORT_")}
        env["LMCACHE_TRACK_USAGE"] = "false"
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, env=env)
        running = threading.Event()
        ended = threading.Event()

        def copy(stream, log) -> None:
            with log:
                for line in stream:
                    log.write(line)
                    log.flush()
                    if RUNNING.encode() in line:
                        running.set()
            ended.set()
            running.set()

        threading.Thread(target=copy, args=(self.process.stdout, open(self.log, "ab")),
                         daemon=True).start()
        if not running.wait(START_TIMEOUT) or ended.is_set():
            self.stop()
            raise RuntimeError(f"LMCache MP server did not start:\n{self.log_text()[-6000:]}")
        return self

    def stop(self) -> None:
        """SIGTERM (the server closes its engine and the L2 adapter), SIGKILL past 30 s."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def runs(tmp_path_factory, node_factory, model):
    workdir = tmp_path_factory.mktemp("lmcache-mp")
    node = node_factory()
    prompts, _ = prompt_tokens(seed=11, count=PROMPTS, tokens=PROMPT_TOKENS, extension=0)
    port = free_port()
    connector = {"lmcache.mp.host": "tcp://127.0.0.1", "lmcache.mp.port": port,
                 "lmcache.mp.mq_timeout": 60}
    result = {"stats": [node.stats()]}
    server = MPServer(workdir / "server-a.log", port, node.endpoint).start()
    try:
        result["a"] = run_engine(workdir, "a", model, "float32", [prompts], lmcache_mp=connector)
    finally:
        server.stop()  # its L1 goes with it; the node keeps what the server stored in L2
    result["stats"].append(node.stats())
    result["objects_after_a"] = node.objects_in(NAMESPACE)
    server = MPServer(workdir / "server-b.log", port, node.endpoint).start()
    try:
        result["b"] = run_engine(workdir, "b", model, "float32", [prompts], lmcache_mp=connector)
    finally:
        server.stop()
    result["stats"].append(node.stats())
    result["server_b_log"] = (workdir / "server-b.log").read_text(errors="replace")
    return result


def test_a_stores_every_whole_chunk_in_kvport(runs):
    assert runs["a"]["steps"][0]["cached"] == [0] * PROMPTS  # an empty server and node
    assert runs["objects_after_a"] == PROMPTS * (PROMPT_TOKENS // CHUNK)


def test_a_fresh_server_and_engine_load_the_chunks_from_kvport(runs):
    b, a = runs["b"], runs["a"]
    whole = PROMPT_TOKENS // CHUNK * CHUNK
    assert b["steps"][0]["cached"] == [whole] * PROMPTS, b["steps"][0]["cached"]
    before, after = runs["stats"][1]["counters"], runs["stats"][2]["counters"]
    assert after["hits"] - before["hits"] >= PROMPTS * (PROMPT_TOKENS // CHUNK)
    assert b["steps"][0]["tokens"] == a["steps"][0]["tokens"]
