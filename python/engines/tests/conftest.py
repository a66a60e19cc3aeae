# SPDX-License-Identifier: Apache-2.0
"""Fixtures for the engine tests: released LMCache, SGLang and AIBrix, imported from
build/engines/venv (scripts/engines-venv), drive `kvport serve` processes through `import eic`.

Nothing of an engine is copied or edited here: the tests construct the engines' own classes the
way the engines construct them. `Node` is a real `kvport serve` process, the venv's `kvport`
command from the kvport wheel. `engine_log` collects every log record of the process (LMCache,
SGLang and AIBrix log through Python's logging, and so do the `eic` drop-in and, through it,
kvport's C++ client), so a test can assert that a success path logged no error.

Every wait here is bounded: a node that does not say it is serving within 30 s fails the test.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest

KVPORT = str(Path(sys.executable).with_name("kvport"))
SECRET = "engine-test-secret-0123456789"
ROOT = Path(__file__).resolve().parents[3]


def token_secret(namespace: str) -> str:
    """The secret of the token whose default namespace is `namespace` (Node(token_namespaces))."""
    return f"{SECRET}-{namespace}"


class Node:
    """A `kvport serve` process on 127.0.0.1. shared_memory: it also listens on a Unix socket
    and offers its arena to clients on this host (what `eic_trans_type: 2` then uses); without
    it every client talks TCP. tokens: the node requires KVPORT_TOKEN = SECRET (granted every
    namespace). token_namespaces: one more token per namespace named, each granted every
    namespace with that one as its default namespace (the token file's `namespace`), its secret
    token_secret(ns). resp: it also speaks the Redis protocol (`--resp`) on resp_port.
    restart() stops it and starts it again, empty, on the same ports and socket."""

    def __init__(self, workdir: Path, shared_memory: bool = True, tokens: bool = False,
                 capacity: str = "512MiB", token_namespaces: tuple = (), resp: bool = False):
        self.workdir = workdir
        self.resp = resp
        self.resp_port = 0
        self.shared_memory = shared_memory
        self.capacity = capacity
        self.port = 0
        self.process: Optional[subprocess.Popen] = None
        self.socket = str(workdir / "kvport.sock") if shared_memory else ""
        # Configured by its flags alone: not by the KVPORT_* environment, nor by an LMCache
        # config file a test set for its engine (kvport serve reads LMCACHE_CONFIG_FILE).
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("KVPORT_") and k != "LMCACHE_CONFIG_FILE"}
        if tokens or token_namespaces:
            tokens_file = workdir / "tokens.yaml"
            text = (f'tokens:\n  - name: engines\n    secret: "{SECRET}"\n'
                    f'    read: ["*"]\n    write: ["*"]\n')
            for ns in token_namespaces:
                text += (f'  - name: engines-{ns}\n    secret: "{token_secret(ns)}"\n'
                         f'    read: ["*"]\n    write: ["*"]\n    namespace: "{ns}"\n')
            tokens_file.write_text(text)
            tokens_file.chmod(0o600)
            self.env["KVPORT_TOKENS_FILE"] = str(tokens_file)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"eic://{self.endpoint}"

    def start(self) -> "Node":
        assert self.process is None
        log = open(self.workdir / "serve.log", "ab")
        command = [KVPORT, "serve", "--listen", f"127.0.0.1:{self.port}", "--unix-socket",
                   self.socket, "--capacity", self.capacity, "--threads", "2"]
        if self.resp:
            command += ["--resp", f"127.0.0.1:{self.resp_port}"]
            # Released LMCache announces nothing of its own: the node folds its redis:// pairs
            # in every namespace (docs/resp.md, "LMCache's Redis connector").
            self.env["KVPORT_RESP_FOLD_PAIRS"] = "*"
        # Unbuffered: each readline takes one line, so select() sees what is still unread.
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, env=self.env,
                                        bufsize=0)
        log.close()
        deadline = time.monotonic() + 30
        last_line = b"kvport: redis protocol on " if self.resp else b"kvport: serving on "
        line = b""
        while not line.startswith(last_line):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.process.stdout], [], [], max(left, 0))
            if not ready or self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"kvport serve did not start: {self.log_text()}")
            line = self.process.stdout.readline()
            port = int(line.strip().rsplit(b":", 1)[1]) if b" on " in line else 0
            if line.startswith(b"kvport: serving on "):
                self.port = port
            elif line.startswith(b"kvport: redis protocol on "):
                self.resp_port = port
        return self

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process.stdout.close()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def log_text(self) -> str:
        return (self.workdir / "serve.log").read_text(errors="replace")

    def stats(self) -> dict:
        """`kvport stat --json` of this node (its counters: objects, bytes, hits, ...)."""
        env = dict(self.env)
        if "KVPORT_TOKENS_FILE" in env:
            env["KVPORT_TOKEN"] = SECRET
        out = subprocess.run([KVPORT, "stat", "--json", "--url", self.url], env=env,
                             capture_output=True, timeout=30, check=True)
        return json.loads(out.stdout)

    def assert_values_took_its_transport(self, before: dict, after: dict) -> None:
        """Between two stats()["counters"]: values were written and read through the arena
        mapping (a node offering shared memory) or in MSET/MGET frames (TCP), never the other
        way. Not shm_attaches: `kvport stat` (stats()) attaches to the arena itself."""
        if self.shared_memory:
            assert after["op_shm_commit"] > before["op_shm_commit"]
            assert after["op_shm_get"] > before["op_shm_get"]
            assert (after["op_mset"], after["op_mget"]) == (before["op_mset"], before["op_mget"])
        else:
            assert after["op_mset"] > before["op_mset"] and after["op_mget"] > before["op_mget"]
            assert (after["op_shm_commit"], after["op_shm_get"]) == (0, 0)


@pytest.fixture(scope="module")
def node_factory(tmp_path_factory):
    """Starts nodes for one test module and stops them all at its end."""
    nodes: List[Node] = []

    def make(**kwargs) -> Node:
        workdir = tmp_path_factory.mktemp("node")
        nodes.append(Node(workdir, **kwargs).start())
        return nodes[-1]

    yield make
    for n in nodes:
        n.stop()


class LogCollector(logging.Handler):
    """Every record at or above DEBUG that reaches the root logger."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: List[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def mark(self) -> int:
        return len(self.records)

    def errors(self, since: int = 0) -> List[str]:
        """The records from `since` on that are errors or carry a traceback."""
        return [f"{r.name} {r.levelname}: {r.getMessage()}" for r in self.records[since:]
                if r.levelno >= logging.ERROR or r.exc_info]

    def messages(self, since: int = 0, logger: str = "", level: int = logging.DEBUG) -> List[str]:
        return [r.getMessage() for r in self.records[since:]
                if r.name.startswith(logger) and r.levelno >= level]


@pytest.fixture(scope="session")
def engine_log():
    collector = LogCollector()
    root = logging.getLogger()
    root.addHandler(collector)
    yield collector
    root.removeHandler(collector)


# --- The engine x call x result table (docs/python.md, "Engines") ---------------------------

RESULTS: Dict[tuple, str] = {}


@pytest.fixture(scope="session")
def record():
    """record(engine, call, result): one row of the table that python/engines/table.py writes
    into docs/python.md. Recorded only once the assertions before it passed."""

    def add(engine: str, call: str, result: str) -> None:
        RESULTS[(engine, call)] = result

    return add


def pytest_sessionfinish(session, exitstatus):
    out = os.environ.get("KVPORT_ENGINE_RESULTS")
    if not out:
        return
    from importlib.metadata import version
    rows = [{"engine": e, "version": version(e), "call": c, "result": r}
            for (e, c), r in RESULTS.items()]
    Path(out).write_text(json.dumps({"exitstatus": int(exitstatus), "rows": rows}, indent=1))
