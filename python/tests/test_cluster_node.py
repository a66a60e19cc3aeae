# SPDX-License-Identifier: Apache-2.0
"""An embedded node in a cluster (docs/cluster.md): kvport.Server(cluster=..., etcd=...) registers
in a real etcd (Debian's etcd-server, started here on free loopback ports), has an epoch, and
deregisters when stopped; etcd unreachable at start raises kvport.Error (Unavailable)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest

import kvport
from conftest import needs_exec

ETCD = os.environ.get("KVPORT_ETCD_BINARY", "/usr/bin/etcd")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def etcd_call(endpoint: str, path: str, body: dict) -> dict:
    request = urllib.request.Request(f"http://{endpoint}/v3/{path}", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def node_records(endpoint: str, cluster: str) -> dict:
    """id -> record (a dict) of every node registered in `cluster`."""
    prefix = f"/kvport/clusters/{cluster}/nodes/".encode()
    end = prefix[:-1] + bytes([prefix[-1] + 1])
    answer = etcd_call(endpoint, "kv/range", {"key": base64.b64encode(prefix).decode(),
                                              "range_end": base64.b64encode(end).decode()})
    records = {}
    for kv in answer.get("kvs", []):
        record = json.loads(base64.b64decode(kv["value"]))
        records[record["id"]] = record
    return records


@pytest.fixture(scope="module")
def etcd(tmp_path_factory):
    if not os.path.exists(ETCD):
        pytest.fail(f"{ETCD} not found: install Debian's etcd-server (make test does)")
    data = tmp_path_factory.mktemp("etcd")
    client_port, peer_port = free_port(), free_port()
    endpoint = f"127.0.0.1:{client_port}"
    log = open(data / "etcd.log", "wb")
    process = subprocess.Popen(
        [ETCD, "--data-dir", str(data / "data"), "--name", "kvport-test",
         "--listen-client-urls", f"http://{endpoint}", "--advertise-client-urls",
         f"http://{endpoint}", "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
         "--initial-cluster", f"kvport-test=http://127.0.0.1:{peer_port}"],
        stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                etcd_call(endpoint, "kv/range", {"key": base64.b64encode(b"probe").decode()})
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((data / "etcd.log").read_text(errors="replace")[-2000:])
                time.sleep(0.05)
        yield endpoint
    finally:
        process.kill()
        process.wait()
        log.close()
        shutil.rmtree(data, ignore_errors=True)


@needs_exec
def test_a_cluster_node_registers_with_an_epoch_and_deregisters(etcd):
    with kvport.Server(capacity="16MiB", threads=1, cluster="py", etcd=etcd, node_id="py-node",
                       lease_ttl_secs=5) as node:
        assert node.epoch != 0
        record = node_records(etcd, "py")["py-node"]
        assert record["address"] == node.address
        assert int(record["epoch"]) == node.epoch
        assert node.stats()["counters"]["cluster_registered"] == 1
    assert "py-node" not in node_records(etcd, "py")


@needs_exec
def test_etcd_may_be_a_list_and_the_id_defaults_to_the_address(etcd):
    with kvport.Server(capacity="16MiB", threads=1, cluster="py-list", etcd=[etcd]) as node:
        assert node.address in node_records(etcd, "py-list")


def test_a_standalone_node_has_epoch_zero():
    with kvport.Server(capacity="16MiB", threads=1) as node:
        assert node.epoch == 0


def test_etcd_unreachable_at_start_raises_unavailable():
    dead = f"127.0.0.1:{free_port()}"
    with pytest.raises(kvport.Error) as failed:
        kvport.Server(capacity="16MiB", threads=1, cluster="nowhere", etcd=dead)
    assert failed.value.code == "Unavailable", failed.value
    assert dead in str(failed.value) and "nowhere" in str(failed.value)
