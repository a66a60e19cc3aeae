# SPDX-License-Identifier: Apache-2.0
"""The wheel from build/python/dist installs offline into a fresh venv, and its `kvport`
console script serves a node that the venv's `eic` talks to."""

from __future__ import annotations

import glob
import os
import re
import signal
import subprocess
import sys

import pytest

from conftest import needs_exec

WHEEL_DIR = os.environ.get("KVPORT_WHEEL_DIR", "")

CLIENT = r"""
import ctypes, sys, eic, kvport
assert kvport.__file__.startswith(sys.prefix), kvport.__file__   # the venv's copy
client = eic.Client()
option = eic.InitOption()
option.transport_type = eic.TransportType(2)
assert client.init(None, sys.argv[1], option) == 0
keys = eic.StringVector(); keys.append("from-the-wheel")
value = b"installed offline"
vals = eic.IOBuffers(); vals.append(ctypes.cast(ctypes.c_char_p(value), ctypes.c_void_p).value, len(value), False)
status, _ = client.mset(keys, vals, eic.SetOption())
assert status == eic.StatusCode.SUCCESS
out = bytearray(len(value))
back = eic.IOBuffers(); back.append(ctypes.addressof(ctypes.c_char.from_buffer(out)), len(out), False)
status, _, _ = client.mget(keys, eic.GetOption(), back)
assert status == eic.StatusCode.SUCCESS and bytes(out) == value
print("wheel client ok")
"""


@pytest.mark.skipif(os.environ.get("KVPORT_SANITIZED") == "1",
                    reason="the sanitizer build's wheel needs the ASan runtime preloaded; the "
                           "normal build's wheel is the one tested")
@needs_exec
def test_wheel_installs_offline_and_serves(tmp_path):
    wheels = glob.glob(os.path.join(WHEEL_DIR, "kvport-*.whl"))
    assert len(wheels) == 1, f"expected one wheel in {WHEEL_DIR!r}, found {wheels}"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "--no-index",
                              "--no-deps", "--disable-pip-version-check", "-q", wheels[0]],
                             capture_output=True, text=True, timeout=120)
    assert install.returncode == 0, install.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LMCACHE_CONFIG_FILE")}
    serve = subprocess.Popen([str(venv / "bin" / "kvport"), "serve", "--listen", "127.0.0.1:0",
                              "--capacity", "64MiB"], stderr=subprocess.PIPE, text=True, env=env,
                             cwd=tmp_path)
    try:
        address = None
        for line in serve.stderr:
            found = re.search(r"listening on (\S+)", line)
            if found:
                address = found.group(1)
                break
        assert address, "kvport serve from the wheel never said where it listens"
        done = subprocess.run([str(python), "-c", CLIENT, address], capture_output=True,
                              text=True, timeout=60, env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "wheel client ok" in done.stdout
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.communicate(timeout=30)
    assert serve.returncode == 0
