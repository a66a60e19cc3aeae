# SPDX-License-Identifier: Apache-2.0
"""UCX from Python: a node offering it (kvport.Server(ucx=True)), a client asking for RDMA
(transport_type 2) that gets it and moves values over it (messages the node checks), over UCX's tcp transport here, and
the eic facade over it. Skipped where this process has no usable UCX."""

from __future__ import annotations

import os

import pytest

import eic
import kvport
from conftest import unique


@pytest.fixture(scope="module")
def ucx_node():
    # Read when the node's and the clients' UCX workers are made: before either.
    os.environ["UCX_TLS"] = "tcp"
    try:
        server = kvport.Server(capacity="64MiB", ucx=True)
    except kvport.Error as e:
        os.environ.pop("UCX_TLS")
        pytest.skip(f"no usable UCX here: {e.message}")
    with server:
        yield server
    os.environ.pop("UCX_TLS")


def test_rdma_moves_values_over_ucx(ucx_node):
    with kvport.Client(ucx_node.url, transport_type=kvport.TransportType.RDMA) as client:
        assert client.transport == "UCX", client.transport_reason
        key = unique("ucx")
        value = os.urandom(3 << 20)
        assert client.mset([key], [value]).ok
        out = bytearray(len(value))
        got = client.mget([key], [out])
        assert got.ok and bytes(out) == value
        # Two lanes over the same device: the value is striped over both and comes back whole.
    with kvport.Client(ucx_node.url, transport_type=2, ucx_devices=["lo", "lo"]) as striped:
        assert striped.transport == "UCX", striped.transport_reason
        out = bytearray(len(value))
        assert striped.mget([key], [out]).ok and bytes(out) == value


def test_eic_rdma_config_gets_ucx_on_the_named_interfaces(ucx_node):
    option = eic.InitOption()
    option.transport_type = eic.TransportType.TRANSPORT_RDMA
    option.multi_net_local_interface_names = "lo, lo"  # SGLang's NIC affinity: two lanes
    client = eic.Client()
    assert client.init(None, ucx_node.address, option) == 0
    assert client._core.transport == "UCX", client._core.transport_reason
    assert "on 2 lanes (lo; lo)" in client._core.transport_reason
    option.multi_net_local_interface_names = "no-such-nic0"
    unknown = eic.Client()
    assert unknown.init(None, ucx_node.address, option) == 0  # served over TCP, saying why
    assert unknown._core.transport == "TCP"
    assert "no-such-nic0" in unknown._core.transport_reason
