# SPDX-License-Identifier: Apache-2.0
"""KvportServe: a `kvport serve` process on 127.0.0.1, as the Python lanes' tests start one
(python/engines/tests and python/inference/tests subclass it with their tokens and options).

It listens on an ephemeral TCP port (kept across restart()) and, when given one, a Unix socket;
start() returns once the node has printed the lines that say it serves, within 30 s, or raises
with the node's log. The node is configured by its flags alone: the KVPORT_* environment and an
LMCache config file a test set for its engine (kvport serve reads LMCACHE_CONFIG_FILE) are not
passed to it.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional

SERVING = b"kvport: serving on "
REDIS = b"kvport: redis protocol on "


class KvportServe:
    def __init__(self, kvport: str, workdir: Path, socket: str = "", resp: bool = False,
                 stop_timeout: float = 10):
        self.kvport = kvport
        self.workdir = workdir
        self.socket = socket
        self.resp = resp
        self.stop_timeout = stop_timeout
        self.port = 0
        self.resp_port = 0
        self.process: Optional[subprocess.Popen] = None
        self.env: Dict[str, str] = {k: v for k, v in os.environ.items()
                                    if not k.startswith("KVPORT_") and k != "LMCACHE_CONFIG_FILE"}

    def serve_args(self) -> List[str]:
        """The flags beyond the addresses (capacity, threads, disk...)."""
        return []

    def operator_token(self) -> str:
        """The token stats() presents ("" for a node without tokens)."""
        return ""

    def write_tokens(self, text: str) -> None:
        """Makes the node require the tokens of `text` (a token file's YAML)."""
        tokens_file = self.workdir / "tokens.yaml"
        tokens_file.write_text(text)
        tokens_file.chmod(0o600)
        self.env["KVPORT_TOKENS_FILE"] = str(tokens_file)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"eic://{self.endpoint}"

    def start(self):
        assert self.process is None
        command = [self.kvport, "serve", "--listen", f"127.0.0.1:{self.port}", "--unix-socket",
                   self.socket] + self.serve_args()
        if self.resp:
            command += ["--resp", f"127.0.0.1:{self.resp_port}"]
        log = open(self.workdir / "serve.log", "ab")
        # Unbuffered: each readline takes one line, so select() sees what is still unread.
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, env=self.env,
                                        bufsize=0)
        log.close()
        deadline = time.monotonic() + 30
        last_line = REDIS if self.resp else SERVING
        line = b""
        while not line.startswith(last_line):
            ready, _, _ = select.select([self.process.stdout], [], [],
                                        max(deadline - time.monotonic(), 0))
            if not ready or self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"kvport serve did not start: {self.log_text()}")
            line = self.process.stdout.readline()
            if line.startswith(SERVING):
                self.port = int(line.strip().rsplit(b":", 1)[1])
            elif line.startswith(REDIS):
                self.resp_port = int(line.strip().rsplit(b":", 1)[1])
        return self

    def stop(self) -> None:
        """SIGTERM (a clean stop: a disk tier writes what memory holds), then SIGKILL past
        stop_timeout."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=self.stop_timeout)
        finally:
            if self.process.poll() is None:
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
        """`kvport stat --json`: {"counters": {...}, "namespaces": [{name, objects, bytes}]}."""
        env = dict(self.env)
        if self.operator_token():
            env["KVPORT_TOKEN"] = self.operator_token()
        out = subprocess.run([self.kvport, "stat", "--json", "--url", self.url], env=env,
                             capture_output=True, timeout=30, check=True)
        return json.loads(out.stdout)
