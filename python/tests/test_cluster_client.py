# SPDX-License-Identifier: Apache-2.0
"""Clients of a cluster (docs/cluster.md) from Python: kvport.Client and the eic drop-in over
EIC's "host:port;host:port" list of embedded nodes, and over etcd:HOST:PORT/CLUSTER with nodes
that register in a real etcd."""

from __future__ import annotations

import time

import pytest

import eic
import kvport
from conftest import needs_exec
from test_cluster_node import etcd  # noqa: F401  (the module's etcd fixture)
from test_eic_facade import get_buffers, keys_of, put_buffers


@pytest.fixture
def three_nodes():
    nodes = [kvport.Server(capacity="16MiB", threads=1) for _ in range(3)]
    try:
        yield nodes
    finally:
        for node in nodes:
            node.stop()


def test_a_static_list_spreads_keys_and_sums_stats(three_nodes):
    endpoint = ";".join(node.address for node in three_nodes)
    client = kvport.Client("eic://" + endpoint + "/")
    assert client.is_cluster and client.endpoint == endpoint
    keys = [f"k{i}" for i in range(60)]
    values = [f"value-{i}".encode() for i in range(60)]
    assert client.mset(keys, values).ok
    out = [bytearray(16) for _ in keys]
    got = client.mget(keys + ["missing"], out + [bytearray(4)])
    assert list(got.codes[:60]) == [kvport.KeyCode.SUCCESS] * 60
    assert got.codes[60] == kvport.KeyCode.KEY_NOT_EXIST
    assert all(bytes(out[i][:got.value_sizes[i]]) == values[i] for i in range(60))

    per_node = client.stats_per_node()
    assert [n["address"] for n in per_node] == sorted(node.address for node in three_nodes)
    objects = [n["stats"]["counters"]["objects"] for n in per_node]
    assert sum(objects) == 60 and all(o > 0 for o in objects)
    assert client.stats()["counters"]["objects"] == 60

    # A node that stops: its keys are misses, the others still hits, writes go on.
    three_nodes[0].stop()
    got = client.mget(keys, [bytearray(16) for _ in keys])
    hits = sum(code == kvport.KeyCode.SUCCESS for code in got.codes)
    assert 0 < hits < 60
    assert all(code in (kvport.KeyCode.SUCCESS, kvport.KeyCode.KEY_NOT_EXIST)
               for code in got.codes)
    assert client.mset([f"n{i}" for i in range(30)], [b"x"] * 30).ok


def test_replicas_from_the_url_or_the_options(three_nodes):
    endpoint = ";".join(node.address for node in three_nodes)
    for client in (kvport.Client(endpoint + "?replicas=2"), kvport.Client(endpoint, replicas=2)):
        keys = [f"r{i}-{id(client)}" for i in range(30)]
        assert client.mset(keys, [b"v"] * 30).ok
    assert kvport.Client(endpoint).stats()["counters"]["objects"] == 120  # two copies each
    with pytest.raises(kvport.Error) as e:
        kvport.Client(endpoint, replicas=2, write_quorum=3)
    assert e.value.code == "InvalidArgument"


def test_the_eic_drop_in_takes_the_list_form(three_nodes):
    client = eic.Client()
    option = eic.InitOption()
    option.transport_type = eic.TransportType(1)
    # What LMCache passes after removing "eic://" and a trailing "/".
    assert client.init(None, ";".join(node.address for node in three_nodes), option) == 0
    data = [bytes([65 + i]) * 8 for i in range(20)]
    keys = keys_of(*[f"e{i}" for i in range(20)])
    status, _ = client.mset(keys, put_buffers(*data))
    assert status == eic.StatusCode.SUCCESS
    out = [bytearray(8) for _ in data]
    status, _, outcome = client.mget(keys, None, get_buffers(*out))
    assert status == eic.StatusCode.SUCCESS
    assert [bytes(o) for o in out] == data


@needs_exec
def test_an_etcd_endpoint_sees_nodes_join(etcd):  # noqa: F811
    first = kvport.Server(capacity="16MiB", threads=1, cluster="pyc", etcd=etcd, node_id="a",
                          lease_ttl_secs=2)
    try:
        client = kvport.Client(f"eic://etcd:{etcd}/pyc/team")
        assert client.is_cluster and client.endpoint == f"etcd:{etcd}/pyc"
        assert [n["id"] for n in client.stats_per_node()] == ["a"]
        second = kvport.Server(capacity="16MiB", threads=1, cluster="pyc", etcd=etcd,
                               node_id="b", lease_ttl_secs=2)
        try:
            deadline = time.monotonic() + 15
            while len(client.stats_per_node()) < 2:
                assert time.monotonic() < deadline, "the client never saw node b join"
                time.sleep(0.01)
            assert client.mset([f"k{i}" for i in range(40)], [b"v"] * 40).ok
            assert all(n["stats"]["counters"]["objects"] > 0 for n in client.stats_per_node())
            assert all(n["epoch"] != 0 for n in client.stats_per_node())
        finally:
            second.stop()
    finally:
        first.stop()
