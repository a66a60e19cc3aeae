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
import sys
from pathlib import Path
from typing import Dict, List

import pytest

KVPORT = str(Path(sys.executable).with_name("kvport"))
SECRET = "engine-test-secret-0123456789"
ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "python" / "testing"))
from kvport_serve import KvportServe  # noqa: E402


def token_secret(namespace: str) -> str:
    """The secret of the token whose default namespace is `namespace` (Node(token_namespaces))."""
    return f"{SECRET}-{namespace}"


class Node(KvportServe):
    """A `kvport serve` process on 127.0.0.1 (python/testing/kvport_serve.py). shared_memory:
    it also listens on a Unix socket and offers its arena to clients on this host (what
    `eic_trans_type: 2` then uses); without it every client talks TCP. tokens: the node requires
    KVPORT_TOKEN = SECRET (granted every namespace). token_namespaces: one more token per
    namespace named, each granted every namespace with that one as its default namespace (the
    token file's `namespace`), its secret token_secret(ns). resp: it also speaks the Redis
    protocol (`--resp`) on resp_port, folding LMCache's redis:// pairs in every namespace
    (released LMCache announces nothing of its own; docs/resp.md, "LMCache's Redis connector").
    restart() stops it and starts it again, empty, on the same ports and socket."""

    def __init__(self, workdir: Path, shared_memory: bool = True, tokens: bool = False,
                 capacity: str = "512MiB", token_namespaces: tuple = (), resp: bool = False):
        super().__init__(KVPORT, workdir, str(workdir / "kvport.sock") if shared_memory else "",
                         resp=resp)
        self.shared_memory = shared_memory
        self.capacity = capacity
        self.tokens = tokens or bool(token_namespaces)
        if resp:
            self.env["KVPORT_RESP_FOLD_PAIRS"] = "*"
        if self.tokens:
            text = (f'tokens:\n  - name: engines\n    secret: "{SECRET}"\n'
                    f'    read: ["*"]\n    write: ["*"]\n')
            for ns in token_namespaces:
                text += (f'  - name: engines-{ns}\n    secret: "{token_secret(ns)}"\n'
                         f'    read: ["*"]\n    write: ["*"]\n    namespace: "{ns}"\n')
            self.write_tokens(text)

    def serve_args(self) -> List[str]:
        return ["--capacity", self.capacity, "--threads", "2"]

    def operator_token(self) -> str:
        return SECRET if self.tokens else ""

    def assert_values_took_its_transport(self, before: dict, after: dict) -> None:
        """Between two stats()["counters"]: values were written and read through the arena
        mapping (a node offering shared memory) or in MSET/MGET frames (TCP), never the other
        way. Not shm_attaches: `kvport stat` (stats()) attaches to the arena itself."""
        if self.shared_memory:
            assert after["op_arena_commit"] > before["op_arena_commit"]
            assert after["op_arena_get"] > before["op_arena_get"]
            assert (after["op_mset"], after["op_mget"]) == (before["op_mset"], before["op_mget"])
        else:
            assert after["op_mset"] > before["op_mset"] and after["op_mget"] > before["op_mget"]
            assert (after["op_arena_commit"], after["op_arena_get"]) == (0, 0)


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
