# SPDX-License-Identifier: Apache-2.0
"""Every YAML file under examples/ must pass `kvport config check FILE` (exit status 0), and
every Python file under examples/ must compile (they import engines, so they are not run).

The kvport binary is $KVPORT_BIN (set by ctest), else <repo>/build/bin/kvport; the tests
skip, saying so, when neither exists. The repository is $KVPORT_SOURCE_DIR, else the nearest
ancestor of this file that holds examples/ and CMakeLists.txt (so a copy of this file in the
build tree still finds the sources).

No warning is allowed but the host-dependent ones (a misspelt key, a conflict, an LMCache file
pointing at a node whose chunks are keyed by a per-process hash, ... fail the test). Keys the engine reading the example uses and kvport does not (LMCache core's, SGLang's
EICStorage's) are reported as "engine key:" lines naming the engine, never as unknown keys
(ENGINE_KEYS: each example's, all of which must be reported so).
"""

from __future__ import annotations

import os
import py_compile
import re
import subprocess
from pathlib import Path

import pytest

# Keys the examples carry for the engine that reads them, which kvport's config check lists
# as unknown keys: LMCache core options, and SGLang EICStorage's own keys (docs: §1c of the
# EIC notes; examples/sglang/remote-eic.yaml).
ENGINE_KEYS = {
    "examples/eic/kvport.yaml": {"pre_caching_hash_algorithm": "LMCache"},
    "examples/lmcache/lmcache-ascend.yaml": {"enable_async_loading": "LMCache",
                                             "lookup_timeout_ms": "LMCache",
                                             "pre_caching_hash_algorithm": "LMCache"},
    "examples/lmcache/lmcache-cpu.yaml": {"pre_caching_hash_algorithm": "LMCache"},
    "examples/lmcache/lmcache-cuda.yaml": {"pre_caching_hash_algorithm": "LMCache"},
    "examples/sglang/remote-eic.yaml": {"eic_namespace": "SGLang", "enable_kvset_direct": "SGLang",
                                        "enable_kvget_direct": "SGLang"},
}
ENGINE_KEY = re.compile(r"^engine key: .*: (\S+) is read by (.+), not by kvport$")

# Warnings that depend on the machine, not on the example (configuration.md, "Capacities"):
# a default capacity the file did not write that exceeds this host's memory, or a host whose
# memory cannot be read.
HOST_DEPENDENT = re.compile(
    r"^warning: (\S+: the default .* is more than this host's physical memory"
    r"|this host's physical memory could not be read)"
)


def _repo_root() -> Path | None:
    env = os.environ.get("KVPORT_SOURCE_DIR")
    if env:
        return Path(env)
    for directory in Path(__file__).resolve().parents:
        if (directory / "examples").is_dir() and (directory / "CMakeLists.txt").is_file():
            return directory
    return None


ROOT = _repo_root()


def _kvport_bin() -> Path | None:
    env = os.environ.get("KVPORT_BIN")
    if env and Path(env).is_file():
        return Path(env)
    if ROOT is not None and (ROOT / "build" / "bin" / "kvport").is_file():
        return ROOT / "build" / "bin" / "kvport"
    return None


def _examples() -> list[Path]:
    if ROOT is None:
        return []
    return sorted(p for p in (ROOT / "examples").rglob("*.yaml") if p.is_file())


EXAMPLES = _examples()


def _clean_env() -> dict:
    # Environment variables override the file (LMCACHE_*, KVPORT_*): check the file alone.
    return {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith("LMCACHE_") or k.startswith("KVPORT_"))
    }


def test_examples_are_found():
    if ROOT is None:
        pytest.skip("repository not found (set KVPORT_SOURCE_DIR)")
    names = {p.relative_to(ROOT).as_posix() for p in EXAMPLES}
    for expected in (
        "examples/lmcache/lmcache-ascend.yaml",
        "examples/lmcache/lmcache-cuda.yaml",
        "examples/sglang/remote-eic.yaml",
    ):
        assert expected in names, sorted(names)


@pytest.mark.parametrize(
    "path", EXAMPLES, ids=[p.relative_to(ROOT).as_posix() for p in EXAMPLES] if ROOT else []
)
@pytest.mark.skipif(os.environ.get("KVPORT_NO_CHILD_EXEC") == "1",
                    reason="runs the kvport binary as a child process, which qemu-user cannot "
                           "without binfmt_misc; covered by the native run")
def test_example_passes_config_check(path: Path):
    kvport = _kvport_bin()
    if kvport is None:
        pytest.skip(
            "kvport binary not found: set KVPORT_BIN or build <repo>/build/bin/kvport "
            "(cmake --build build --target kvport)"
        )
    result = subprocess.run(
        [str(kvport), "config", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=_clean_env(),
        cwd=str(ROOT),
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"kvport config check {path} exited {result.returncode}:\n{output}"

    unexpected = []
    for line in output.splitlines():
        if not line.startswith("warning:"):
            continue
        if HOST_DEPENDENT.match(line):
            continue
        unexpected.append(line)
    assert not unexpected, f"unexpected warnings from kvport config check {path}:\n" + "\n".join(
        unexpected
    )
    engine_keys = dict(m.groups() for m in map(ENGINE_KEY.match, output.splitlines()) if m)
    for key, engine in ENGINE_KEYS.get(path.relative_to(ROOT).as_posix(), {}).items():
        assert engine_keys.get(key) == engine, f"{key} not reported as {engine}'s:\n{output}"


PY_EXAMPLES = sorted(p for p in (ROOT / "examples").rglob("*.py") if p.is_file()) if ROOT else []


@pytest.mark.parametrize(
    "path", PY_EXAMPLES, ids=[p.relative_to(ROOT).as_posix() for p in PY_EXAMPLES] if ROOT else []
)
def test_python_example_compiles(path: Path, tmp_path: Path):
    py_compile.compile(str(path), cfile=str(tmp_path / "example.pyc"), doraise=True)
