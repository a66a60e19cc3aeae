# SPDX-License-Identifier: Apache-2.0
"""Access control from Python: a node with a token file, kvport.Client with a token, the eic
drop-in with KVPORT_TOKEN, per-key PERMISSION_DENIED, and reload_tokens()."""

from __future__ import annotations

import ctypes
import logging
import os

import pytest

import eic
import kvport

WRITER = "writer-secret-0123456789"
READER = "reader-secret-0123456789"
ENGINE = "engine-secret-0123456789"


def write_tokens(path, text):
    path.write_text(text)
    os.chmod(path, 0o600)


@pytest.fixture
def token_node(tmp_path):
    tokens = tmp_path / "tokens.yaml"
    write_tokens(tokens,
                 "tokens:\n"
                 f"  - name: writer\n    secret: {WRITER}\n"
                 "    read: [\"tenant/*\"]\n    write: [\"tenant/*\"]\n"
                 f"  - name: reader\n    secret: {READER}\n    read: [\"*\"]\n"
                 f"  - name: engine\n    secret: {ENGINE}\n    namespace: tenant/lmcache\n"
                 "    read: [\"tenant/*\"]\n    write: [\"tenant/*\"]\n")
    with kvport.Server(capacity="16MiB", threads=1, max_value_bytes="1MiB",
                       tokens_file=str(tokens)) as server:
        yield server, tokens


def test_a_client_without_a_token_is_refused(token_node):
    server, _ = token_node
    with pytest.raises(kvport.Error) as refused:
        kvport.Client(server.url, transport_type=kvport.TransportType.TCP)
    assert refused.value.code == "PermissionDenied", refused.value
    assert "requires a token" in str(refused.value)


def test_a_token_grants_its_namespaces_per_key(token_node):
    server, _ = token_node
    writer = kvport.Client(server.url, token=WRITER, transport_type=kvport.TransportType.TCP)
    reader = kvport.Client(server.url, token=READER, transport_type=kvport.TransportType.TCP)
    assert writer.mset(["k"], [b"value"], ns="tenant/a").codes == [kvport.KeyCode.SUCCESS]
    assert writer.mset(["k"], [b"value"], ns="other").codes == [kvport.KeyCode.PERMISSION_DENIED]
    assert reader.mset(["k"], [b"x"], ns="tenant/a").codes == [kvport.KeyCode.PERMISSION_DENIED]
    buffer = bytearray(5)
    got = reader.mget(["k"], [buffer], ns="tenant/a")
    assert got.codes == [kvport.KeyCode.SUCCESS] and bytes(buffer) == b"value"


def test_the_eic_drop_in_takes_the_token_from_the_environment(token_node, monkeypatch):
    server, _ = token_node
    option = eic.InitOption()
    option.transport_type = eic.TransportType.TRANSPORT_TCP
    anonymous = eic.Client()
    assert anonymous.init("t", server.address, option) == 13  # PermissionDenied
    monkeypatch.setenv("KVPORT_TOKEN", WRITER)
    client = eic.Client()
    assert client.init("t", server.address, option) == 0
    set_option = eic.SetOption()
    set_option.ns = "other"
    status, outcome = client.mset(["k"], [b"v"], set_option)
    assert status == eic.StatusCode.FAILED
    assert outcome.status_codes == [eic.StatusCode.PERMISSION_DENIED]


def test_the_tokens_namespace_bounds_an_unassigned_ns(token_node, monkeypatch, caplog):
    """A token that names a namespace: the eic drop-in's never-assigned ns (LMCache's
    ExistOption and mdel) means exactly that namespace, so an engine neither sees nor deletes
    another namespace's chunks; it wins over KVPORT_EIC_NS (with a warning)."""
    server, _ = token_node
    writer = kvport.Client(server.url, token=WRITER, transport_type=kvport.TransportType.TCP)
    assert writer.default_namespace is None
    assert writer.mset(["theirs"], [b"t"], ns="tenant/other").codes == [kvport.KeyCode.SUCCESS]
    monkeypatch.setenv("KVPORT_TOKEN", ENGINE)
    monkeypatch.setenv("KVPORT_EIC_NS", "tenant/elsewhere")
    option = eic.InitOption()
    option.transport_type = eic.TransportType.TRANSPORT_TCP
    client = eic.Client()
    with caplog.at_level(logging.INFO, logger="eic"):
        assert client.init("t", server.address, option) == 0
    messages = [r.getMessage() for r in caplog.records if r.name == "eic"]
    assert any("KVPORT_EIC_NS='tenant/elsewhere' is ignored" in m for m in messages), messages
    assert any("an unassigned ns means 'tenant/lmcache'" in m for m in messages), messages
    assert client.mset(["mine"], [b"m"], eic.SetOption())[0] == eic.StatusCode.SUCCESS
    status, outcome = client.mexist(["theirs", "mine"], eic.ExistOption())
    assert list(outcome.status_codes) == [eic.StatusCode.KEY_NOT_EXIST, eic.StatusCode.SUCCESS]
    assert client.mdel(["theirs"])[1].status_codes == [eic.StatusCode.KEY_NOT_EXIST]
    assert writer.mexist(["theirs"], ns="tenant/other").codes == [kvport.KeyCode.SUCCESS]
    assert writer.mexist(["mine"], ns="tenant/lmcache").codes == [kvport.KeyCode.SUCCESS]


def test_reload_tokens_revokes_and_keeps_the_old_ones_on_a_bad_file(token_node):
    server, tokens = token_node
    write_tokens(tokens, "tokens: [\n")
    with pytest.raises(kvport.Error):
        server.reload_tokens()
    kvport.Client(server.url, token=READER, transport_type=kvport.TransportType.TCP)
    write_tokens(tokens, f"tokens:\n  - name: writer\n    secret: {WRITER}\n    read: [\"*\"]\n")
    server.reload_tokens()
    with pytest.raises(kvport.Error) as refused:
        kvport.Client(server.url, token=READER, transport_type=kvport.TransportType.TCP)
    assert refused.value.code == "PermissionDenied"


def test_a_partial_grant_says_on_the_client_why_shared_memory_is_off(tmp_path, monkeypatch,
                                                                     caplog):
    """A token granted only some namespaces may not map the arena (it holds them all): the
    eic drop-in says so once, at INFO, on the client side, and still works over the socket."""
    tokens = tmp_path / "tokens.yaml"
    write_tokens(tokens, "tokens:\n"
                         f"  - name: tenant\n    secret: {WRITER}\n"
                         "    read: [\"tenant/*\"]\n    write: [\"tenant/*\"]\n"
                         f"  - name: engine-host\n    secret: {READER}\n"
                         "    read: [\"*\"]\n    write: [\"*\"]\n")
    socket = str(tmp_path / "kvport.sock")
    with kvport.Server(capacity="16MiB", threads=1, tokens_file=str(tokens),
                       unix_socket=socket) as server:
        option = eic.InitOption()
        option.transport_type = eic.TransportType.TRANSPORT_RDMA
        for secret, expected in ((WRITER, "does not grant every namespace"),
                                 (READER, "over shared memory")):
            monkeypatch.setenv("KVPORT_TOKEN", secret)
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="eic"):
                client = eic.Client()
                assert client.init(None, server.address, option) == 0
            connected = [r.getMessage() for r in caplog.records
                         if r.name == "eic" and r.getMessage().startswith("eic: connected")]
            assert len(connected) == 1 and expected in connected[0], connected
            keys = eic.StringVector()
            keys.append("k")
            written = eic.SetOption()
            written.ns = "tenant/a"
            value = b"value"
            buffers = eic.IOBuffers()
            buffers.append(ctypes.cast(ctypes.c_char_p(value), ctypes.c_void_p).value, 5, False)
            assert client.mset(keys, buffers, written)[0] == eic.StatusCode.SUCCESS
