# SPDX-License-Identifier: Apache-2.0
"""Same-host shared memory from Python: a node with a Unix socket, clients that find it by
themselves (transport "shared memory"), the ones that must not (TCP forced, shared memory off),
values read in place, and the eic facade over it."""

from __future__ import annotations

import os
import stat

import pytest

import eic
import kvport
from conftest import pointer_of, unique


@pytest.fixture(scope="module")
def shm_node():
    with kvport.Server(capacity="256MiB", unix_socket="auto") as server:
        yield server


def test_server_options_and_socket_path(shm_node):
    path = shm_node.unix_socket_path
    assert path.startswith("/") and path.endswith(f"/kvport-{shm_node.port}.sock"), path
    assert stat.S_ISSOCK(os.stat(path).st_mode)
    with kvport.Server(capacity="16MiB") as plain:
        assert plain.unix_socket_path == ""  # ServerOptions' default: no Unix socket
    with pytest.raises(TypeError):
        kvport.Server(capacity="16MiB", unix_sockets="auto")  # misspelt: refused
    with pytest.raises(kvport.Error) as e:
        kvport.Server(capacity="16MiB", unix_socket="relative.sock")
    assert "absolute" in e.value.message


def test_socket_is_removed_when_the_node_stops(tmp_path):
    path = str(tmp_path / "node.sock")
    node = kvport.Server(capacity="16MiB", unix_socket=path)
    assert node.unix_socket_path == path and os.path.exists(path)
    node.stop()
    assert not os.path.exists(path)


def test_automatic_choice_is_shared_memory_and_round_trips(shm_node):
    client = kvport.Client(shm_node.address)  # transport_type AUTO by default
    assert client.transport == "shared memory", client.transport_reason
    assert shm_node.unix_socket_path in client.transport_reason
    small, large = unique("small"), unique("large")
    payload = bytes(range(256)) * 4096 + b"tail"  # 1 MiB and 4 bytes, every byte value
    result = client.mset([small, large], [b"hello", payload], metas=[b"m1", b""])
    assert result.ok, result.error
    out_small, out_large = bytearray(5), bytearray(len(payload))
    got = client.mget([small, large], [out_small, out_large])
    assert got.ok, got.error
    assert out_small == b"hello" and out_large == payload
    assert got.value_sizes == [5, len(payload)] and got.metas == [b"m1", b""]
    # The TCP view of the same node sees the same bytes.
    tcp = kvport.Client(shm_node.address, transport_type=kvport.TransportType.TCP)
    assert tcp.transport == "TCP"
    again = bytearray(len(payload))
    assert tcp.mget([large], [again]).ok and again == payload


def test_transport_types_and_unix_endpoint(shm_node):
    # RDMA to a node on this host: shared memory beats every network path.
    rdma = kvport.Client(shm_node.address, transport_type=kvport.TransportType.RDMA)
    assert rdma.transport == "shared memory", rdma.transport_reason
    # unix:/PATH asks for shared memory whatever the type says.
    forced = kvport.Client("unix:" + shm_node.unix_socket_path,
                           transport_type=kvport.TransportType.TCP)
    assert forced.transport == "shared memory", forced.transport_reason
    key = unique("unix")
    assert forced.mset([key], [b"via unix"]).ok
    out = bytearray(8)
    assert rdma.mget([key], [out]).ok and out == b"via unix"


def test_node_without_shared_memory_serves_bytes_through_the_socket(tmp_path):
    with kvport.Server(capacity="16MiB", unix_socket=str(tmp_path / "n.sock"),
                       shared_memory=False) as node:
        auto = kvport.Client(node.address)
        assert auto.transport == "TCP" and "no shared memory" in auto.transport_reason
        over_socket = kvport.Client("unix:" + node.unix_socket_path)
        assert over_socket.transport == "Unix socket", over_socket.transport_reason
        assert over_socket.mset(["k"], [b"bytes"]).ok
        out = bytearray(5)
        assert auto.mget(["k"], [out]).ok and out == b"bytes"
        with pytest.raises(kvport.Error) as e:
            over_socket.mget_in_place(["k"])
        assert e.value.code == "NotSupported"


def test_mget_in_place_lends_read_only_views(shm_node):
    client = kvport.Client(shm_node.address)
    hit, miss = unique("lent"), unique("missing")
    value = b"in place " * 1000
    assert client.mset([hit], [value], metas=[b"meta"]).ok
    with client.mget_in_place([hit, miss]) as lent:
        assert len(lent) == 2 and lent.valid
        assert lent.result.codes == [kvport.KeyCode.SUCCESS, kvport.KeyCode.KEY_NOT_EXIST]
        assert lent.result.value_sizes[0] == len(value) and lent.result.metas[0] == b"meta"
        view = lent.value(0)
        assert view.readonly and bytes(view) == value
        assert lent.value(1) is None
        with pytest.raises(TypeError):
            view[0] = 0  # the mapping is read-only
        with pytest.raises(IndexError):
            lent.value(2)
    assert not lent.valid
    # A view taken before the release keeps its bytes (the lease ends when it is gone too).
    assert bytes(view) == value
    del view
    with pytest.raises(ValueError):
        lent.value(0)
    # Over TCP there is no mapping to lend from.
    tcp = kvport.Client(shm_node.address, transport_type=kvport.TransportType.TCP)
    with pytest.raises(kvport.Error) as e:
        tcp.mget_in_place([hit])
    assert e.value.code == "NotSupported" and "TCP" in e.value.message


def test_lease_cap_per_session():
    with kvport.Server(capacity="16MiB", unix_socket="auto", max_leases_per_session=1) as node:
        client = kvport.Client(node.address, connections=1)
        assert client.transport == "shared memory", client.transport_reason
        assert client.mset(["a", "b"], [b"A", b"B"]).ok
        first = client.mget_in_place(["a"])
        assert first.result.codes == [kvport.KeyCode.SUCCESS]
        second = client.mget_in_place(["b"])  # the session holds its one lease already
        assert second.result.codes[0] != kvport.KeyCode.SUCCESS
        first.release()
        third = client.mget_in_place(["b"])
        assert third.result.codes == [kvport.KeyCode.SUCCESS] and bytes(third.value(0)) == b"B"


def test_eic_facade_uses_shared_memory_by_itself(shm_node):
    for trans_type in (None, 2):  # InitOption's default (AUTO), and RDMA as Ascend configs say
        client = eic.Client()
        option = eic.InitOption()
        if trans_type is not None:
            option.transport_type = eic.TransportType(trans_type)
        assert client.init(None, shm_node.address, option) == 0
        assert client._core.transport == "shared memory", client._core.transport_reason
        key = unique(f"eic{trans_type}")
        keys = eic.StringVector()
        keys.append(key)
        data = b"eic over shared memory"
        vals = eic.IOBuffers()
        vals.append(pointer_of(data), len(data), False)
        set_option = eic.SetOption()
        set_option.ns = "shm"
        status, _ = client.mset(keys, vals, set_option)
        assert status == eic.StatusCode.SUCCESS
        out = bytearray(len(data))
        got = eic.IOBuffers()
        got.append(pointer_of(out), len(out), False)
        get_option = eic.GetOption()
        get_option.ns = "shm"
        status, _, outcome = client.mget(keys, get_option, got)
        assert status == eic.StatusCode.SUCCESS, outcome
        assert bytes(out) == data
    assert eic.InitOption().transport_type == eic.TransportType.TRANSPORT_AUTO
