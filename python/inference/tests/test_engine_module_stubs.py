# SPDX-License-Identifier: Apache-2.0
"""The type stubs of the kvport modules that import vLLM or LMCache (kvport.vllm,
kvport.vllm_connector, kvport.lmcache_cpu), checked as python/tests/test_stubs.py checks the
others: every public name, class member and instance attribute, nothing the module lacks. They
are checked here because this lane's venv is where those modules import."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from test_stubs import test_stubs_name_every_public_name_and_member as check_stub  # noqa: E402


@pytest.mark.parametrize("name", ["kvport.vllm", "kvport.vllm_connector", "kvport.lmcache_cpu"])
def test_stub_names_every_public_name_and_member(name):
    check_stub(name)
