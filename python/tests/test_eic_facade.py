# SPDX-License-Identifier: Apache-2.0
"""The `eic` drop-in: every call shape and status case LMCache and SGLang depend on
(the EIC notes, §1a, §2 and appendix A.2), against an embedded node."""

from __future__ import annotations

import ctypes
import logging
import os
import struct
import threading

import pytest

import eic
import kvport
from conftest import FakeTensor, HoldingProxy, pointer_of, unique

S = eic.StatusCode


def connect(address: str, trans_type: int = 2) -> eic.Client:
    client = eic.Client()
    option = eic.InitOption()
    option.log_dir = ""
    option.log_level = eic.LogLevel(1)
    option.transport_type = eic.TransportType(trans_type)
    option.flag_file = None
    assert client.init(None, address, option) == 0
    return client


@pytest.fixture
def ec(node):
    return connect(node.address)


def keys_of(*names) -> eic.StringVector:
    keys = eic.StringVector()
    for name in names:
        keys.append(name)
    return keys


def put_buffers(*values: bytes) -> eic.IOBuffers:
    vals = eic.IOBuffers()
    for value in values:
        vals.append(pointer_of(value), len(value), False)
    vals.keep_alive = values  # raw pointers: the memory must outlive the call, as in LMCache
    return vals


def get_buffers(*arrays: bytearray) -> eic.IOBuffers:
    vals = eic.IOBuffers()
    for array in arrays:
        vals.append(pointer_of(array), len(array), False)
    vals.keep_alive = arrays
    return vals


def set_option(ns=None, ttl=-1) -> eic.SetOption:
    option = eic.SetOption()
    if ns is not None:
        option.ns = ns
    option.ttl_second = ttl
    return option


def get_option(ns=None) -> eic.GetOption:
    option = eic.GetOption()
    if ns is not None:
        option.ns = ns
    return option


def exist_option(ns=None) -> eic.ExistOption:
    option = eic.ExistOption()
    if ns is not None:
        option.ns = ns
    return option


def test_surface_types():
    assert eic.StatusCode.SUCCESS == 0 and int(eic.StatusCode.KEY_NOT_EXIST) == 1
    assert {S.PARTIAL_FAILED, S.FAILED} <= set(eic.StatusCode)
    assert eic.TransportType(2) == eic.TransportType.TRANSPORT_RDMA
    assert eic.TransportType(3) == eic.TransportType.TRANSPORT_GDR
    assert isinstance(eic.LogLevel(1), eic.LogLevel)
    keys = eic.StringVector()
    keys.append("a")
    keys.extend(["b", "c"])
    assert list(keys) == ["a", "b", "c"] and [k for k in keys] == ["a", "b", "c"]
    with pytest.raises(TypeError):
        keys.append(7)
    vals = eic.IOBuffers()
    vals.append(1234, 10, True)
    assert list(vals) == [(1234, 10, True)]
    info = eic.MemoryInfo()
    info.type = eic.MemoryType.MEMORY_CUDA
    info.cuda_id = 0
    option = eic.InitOption()
    option.flag_file = None
    option.multi_net_local_interface_names = "eth1"
    with pytest.raises(AttributeError):
        option.no_such_field = 1  # options reject misspelt attributes, as pybind objects do
    assert eic.SetOption().ns == "" and eic.SetOption().ttl_second == -1


def test_init_results(node):
    assert isinstance(connect(node.address), eic.Client)
    client = eic.Client()
    option = eic.InitOption()
    option.transport_type = eic.TransportType(1)
    assert client.init("", "eic://" + node.address, option) == 0  # scheme accepted too
    assert client.init(None, node.address, option) != 0  # twice
    # GPUDirect on a host without usable CUDA: a nonzero int (NotSupported), reason logged.
    gdr = eic.Client()
    option.transport_type = eic.TransportType(3)
    assert gdr.init(None, node.address, option) == 9
    # Unreachable node.
    dead = eic.Client()
    option.transport_type = eic.TransportType(2)
    assert dead.init(None, "127.0.0.1:1", option) == 5
    # EIC's master list form with two entries: not a silent use of the first.
    assert eic.Client().init(None, f"{node.address};{node.address}", option) != 0
    assert eic.Client().init(None, f"{node.address};", option) == 0
    # Calls before a successful init fail, per key.
    status, outcome = dead.mexist(keys_of("k"), exist_option())
    assert status == S.FAILED and outcome.status_codes[0] == S.FAILED


def test_mset_mget_status_semantics(ec):
    a, b, miss = unique("a"), unique("b"), unique("miss")
    status, outcome = ec.mset(keys_of(a, b), put_buffers(b"AAAA", b"BBBBBB"), set_option("t"))
    assert status == S.SUCCESS and list(outcome.status_codes) == [S.SUCCESS, S.SUCCESS]

    out_a, out_b = bytearray(4), bytearray(6)
    vals = get_buffers(out_a, out_b)
    status, returned, outcome = ec.mget(keys_of(a, b), get_option("t"), vals)
    assert status == S.SUCCESS and returned is vals
    assert outcome.status_codes[0] == S.SUCCESS and outcome.status_codes[1] == S.SUCCESS
    assert out_a == b"AAAA" and out_b == b"BBBBBB"

    out = [bytearray(4), bytearray(4)]
    status, _, outcome = ec.mget(keys_of(a, miss), get_option("t"), get_buffers(*out))
    assert status == S.PARTIAL_FAILED  # never SUCCESS with a miss (SGLang reads it as all-hit)
    assert list(outcome.status_codes) == [S.SUCCESS, S.KEY_NOT_EXIST]

    status, _, outcome = ec.mget(keys_of(miss, miss + "2"), get_option("t"),
                                 get_buffers(bytearray(4), bytearray(4)))
    assert status == S.FAILED
    assert list(outcome.status_codes) == [S.KEY_NOT_EXIST, S.KEY_NOT_EXIST]


def test_mexist_is_success_with_per_key_misses(ec):
    hit = unique("hit")
    ec.mset(keys_of(hit), put_buffers(b"x"), set_option("e"))
    status, outcome = ec.mexist(keys_of(hit, unique("absent")), exist_option("e"))
    assert status == S.SUCCESS
    assert outcome.status_codes[0] == S.SUCCESS and outcome.status_codes[1] == S.KEY_NOT_EXIST
    status, outcome = ec.mexist(keys_of(unique("absent")), exist_option("e"))
    assert status == S.SUCCESS and outcome.status_codes[0] == S.KEY_NOT_EXIST


def test_mdel_one_and_two_arguments(ec):
    k1, k2 = unique("d1"), unique("d2")
    ec.mset(keys_of(k1, k2), put_buffers(b"1", b"2"), set_option())
    status, outcome = ec.mdel(keys_of(k1))  # LMCache v0.4.4: no option
    assert status == S.SUCCESS and outcome.status_codes[0] == S.SUCCESS
    option = eic.DelOption()
    option.ns = ""
    status, outcome = ec.mdel(keys_of(k2, k1), option)
    assert status == S.SUCCESS
    assert list(outcome.status_codes) == [S.SUCCESS, S.KEY_NOT_EXIST]  # absent: no failure
    assert ec.mexist(keys_of(k1, k2), exist_option(""))[1].status_codes == [S.KEY_NOT_EXIST] * 2


def test_buffers_exact_and_too_small(ec):
    key = unique("sized")
    ec.mset(keys_of(key), put_buffers(b"0123456789"), set_option())
    small = bytearray(b"untouched")
    status, _, outcome = ec.mget(keys_of(key), get_option(), get_buffers(small))
    assert status == S.FAILED and outcome.status_codes[0] == S.BUFFER_TOO_SMALL
    assert small == b"untouched"
    exact = bytearray(10)
    assert ec.mget(keys_of(key), get_option(), get_buffers(exact))[0] == S.SUCCESS
    assert exact == b"0123456789"
    # A smaller value is another layout's chunk, never a hit: a v0.4.4-era LMCache with two KV
    # groups (a 48-byte meta buffer) reading a one-group chunk (28-byte meta) must miss.
    large = bytearray(16)
    status, _, outcome = ec.mget(keys_of(key), get_option(), get_buffers(large))
    assert status == S.FAILED and outcome.status_codes[0] == S.SIZE_MISMATCH
    pair = unique("chunk")
    ec.mset(keys_of(pair + "_meta", pair), put_buffers(b"m" * 28, b"d" * 64), set_option("ns"))
    meta, data = bytearray(48), bytearray(64)
    status, _, outcome = ec.mget(keys_of(pair + "_meta", pair), get_option("ns"),
                                 get_buffers(meta, data))
    assert status == S.PARTIAL_FAILED
    assert list(outcome.status_codes) == [S.SIZE_MISMATCH, S.SUCCESS]
    assert meta == bytearray(48) and data == b"d" * 64  # the folded meta is not written
    # mget(keys, option, None) sizes its own buffers: no mismatch there. (The key is in "":
    # written before the client named "ns", which its unassigned options now mean.)
    assert ec.mget(keys_of(key), get_option(""), None)[1] == [b"0123456789"]


def test_multi_mib_values_from_tensors_bytes_bytearrays_pointers(ec):
    size = 8 << 20
    tensor = FakeTensor(size, fill=0x11)
    raw = bytes([0x22]) * size
    ba = bytearray([0x33]) * size
    keys = [unique("t"), unique("b"), unique("ba")]
    vals = eic.IOBuffers()
    vals.append(tensor.data_ptr(), size, True)
    vals.append(pointer_of(raw), size, False)
    vals.append(pointer_of(ba), size, False)
    assert ec.mset(keys_of(*keys), vals, set_option("big"))[0] == S.SUCCESS
    outs = [FakeTensor(size) for _ in keys]
    back = eic.IOBuffers()
    for out in outs:
        back.append(out.data_ptr(), size, True)
    status, _, _ = ec.mget(keys_of(*keys), get_option("big"), back)
    assert status == S.SUCCESS
    assert [o.tobytes()[:3] + o.tobytes()[-3:] for o in outs] == [
        b"\x11" * 6, b"\x22" * 6, b"\x33" * 6]
    assert outs[0].tobytes() == tensor.tobytes()


def test_overwrite_wins(ec):
    key = unique("ow")
    ec.mset(keys_of(key), put_buffers(b"first"), set_option("o"))
    ec.mset(keys_of(key), put_buffers(b"second"), set_option("o"))
    out = bytearray(6)
    assert ec.mget(keys_of(key), get_option("o"), get_buffers(out))[0] == S.SUCCESS
    assert out == b"second"


def test_ttl_second_is_honoured(ec):
    import time
    key = unique("ttl")
    ec.mset(keys_of(key), put_buffers(b"v"), set_option("ttl", ttl=1))
    assert ec.mexist(keys_of(key), exist_option("ttl"))[1].status_codes[0] == S.SUCCESS
    deadline = time.monotonic() + 30
    while ec.mexist(keys_of(key), exist_option("ttl"))[1].status_codes[0] == S.SUCCESS:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_namespace_rule_unassigned_matches_any_explicit_is_exact(node, ec):
    """A client that has named no namespace: an unassigned ns matches any namespace on reads,
    probes and deletes and writes the default one; an assigned one is exact."""
    key = unique("chunk")
    ec.mset(keys_of(key), put_buffers(b"data"), set_option("kvport_ns"))
    fresh = connect(node.address)
    # LMCache before its first put or get: ExistOption never assigned finds the key anywhere.
    status, outcome = fresh.mexist(keys_of(key), eic.ExistOption())
    assert status == S.SUCCESS and outcome.status_codes[0] == S.SUCCESS
    out = bytearray(4)
    assert fresh.mget(keys_of(key), eic.GetOption(), get_buffers(out))[0] == S.SUCCESS
    # A SetOption with ns never assigned writes the default namespace.
    plain = unique("plain")
    fresh.mset(keys_of(plain), put_buffers(b"p"), eic.SetOption())
    assert ec.mexist(keys_of(plain), exist_option(""))[1].status_codes[0] == S.SUCCESS
    # mdel(keys) without option deletes in the namespace that holds it.
    assert fresh.mdel(keys_of(key))[0] == S.SUCCESS
    assert ec.mexist(keys_of(key), exist_option("kvport_ns"))[1].status_codes[0] == \
        S.KEY_NOT_EXIST
    # SGLang: explicit "" is the default namespace only; another namespace does not see it.
    ec.mset(keys_of(key), put_buffers(b"data"), set_option("kvport_ns"))
    assert fresh.mexist(keys_of(key), exist_option(""))[1].status_codes[0] == S.KEY_NOT_EXIST
    assert fresh.mexist(keys_of(key), exist_option("other"))[1].status_codes[0] == \
        S.KEY_NOT_EXIST
    assert fresh.mget(keys_of(key), get_option("other"), get_buffers(out))[0] == S.FAILED


def test_an_unassigned_ns_means_the_namespace_the_client_named(node, ec, caplog):
    """An engine configured with namespace "mine" (LMCache's eic_kv_ns, AIBrix's) assigns it on
    its SetOption and GetOption only: once a call named it, the client's unassigned ExistOption,
    GetOption, SetOption and option-less mdel mean "mine" exactly, with no token and no
    KVPORT_EIC_NS, so another namespace's keys are neither seen nor deleted."""
    theirs, mine = unique("theirs"), unique("mine")
    ec.mset(keys_of(theirs), put_buffers(b"t"), set_option("other"))
    engine = connect(node.address)
    # Named none yet: any namespace (its warm-up probes, a lookup before its first put).
    assert engine.mexist(keys_of(theirs), eic.ExistOption())[1].status_codes[0] == S.SUCCESS
    with caplog.at_level(logging.INFO, logger="eic"):
        assert engine.mset(keys_of(mine), put_buffers(b"m"), set_option("mine"))[0] == S.SUCCESS
    assert any("named namespace 'mine'" in r.getMessage() for r in caplog.records)
    status, outcome = engine.mexist(keys_of(theirs, mine), eic.ExistOption())
    assert status == S.SUCCESS and list(outcome.status_codes) == [S.KEY_NOT_EXIST, S.SUCCESS]
    out = bytearray(1)
    status, _, outcome = engine.mget(keys_of(theirs, mine), eic.GetOption(),
                                     get_buffers(out, bytearray(1)))
    assert list(outcome.status_codes) == [S.KEY_NOT_EXIST, S.SUCCESS] and out == b"\0"
    status, _, outcome = engine.mget(keys_of(theirs), None, None)
    assert outcome.status_codes == [S.KEY_NOT_EXIST]
    assert engine.mdel(keys_of(theirs))[1].status_codes[0] == S.KEY_NOT_EXIST
    assert engine.mdel(keys_of(theirs), eic.DelOption())[1].status_codes[0] == S.KEY_NOT_EXIST
    assert ec.mexist(keys_of(theirs), exist_option("other"))[1].status_codes[0] == S.SUCCESS
    # Unassigned writes go there too; an assigned ns is still exact.
    plain = unique("plain")
    engine.mset(keys_of(plain), put_buffers(b"p"), eic.SetOption())
    assert ec.mexist(keys_of(plain), exist_option("mine"))[1].status_codes[0] == S.SUCCESS
    assert ec.mexist(keys_of(plain), exist_option(""))[1].status_codes[0] == S.KEY_NOT_EXIST
    assert engine.mexist(keys_of(theirs), exist_option("other"))[1].status_codes[0] == S.SUCCESS
    assert engine.mdel(keys_of(mine))[1].status_codes[0] == S.SUCCESS
    assert ec.mexist(keys_of(mine), exist_option("mine"))[1].status_codes[0] == S.KEY_NOT_EXIST


@pytest.mark.parametrize("hash_line,warned", [("", True),
                                               ("pre_caching_hash_algorithm: builtin\n", True),
                                               ("pre_caching_hash_algorithm: sha256_cbor\n", False)])
def test_init_warns_about_an_lmcache_config_keying_chunks_per_process(node, tmp_path, monkeypatch,
                                                                    caplog, hash_line, warned):
    """An engine whose LMCache config points at the node but keys chunks with Python's
    per-process hash would never reuse another engine's chunks: init says so, once."""
    config = tmp_path / "lmcache.yaml"
    config.write_text(f"chunk_size: 256\nremote_url: eic://{node.address}\n{hash_line}")
    monkeypatch.setenv("LMCACHE_CONFIG_FILE", str(config))
    with caplog.at_level(logging.WARNING, logger="eic"):
        connect(node.address)
    found = [r.getMessage() for r in caplog.records
             if "pre_caching_hash_algorithm" in r.getMessage()]
    assert len(found) == (1 if warned else 0), found
    if warned:
        assert str(config) in found[0] and "sha256_cbor" in found[0]


def test_the_first_namespace_named_stays(node, ec, caplog):
    """Naming a second namespace changes nothing (logged once): what a client's unassigned
    calls reach never moves or widens. An explicit "" names the default namespace; a call
    naming one counts whatever it finds (here a probe of an absent key)."""
    key = unique("first")
    ec.mset(keys_of(key), put_buffers(b"a"), set_option("a"))
    ec.mset(keys_of(key), put_buffers(b"b"), set_option("b"))
    client = connect(node.address)
    assert client.mexist(keys_of(unique("absent")), exist_option("a"))[0] == S.SUCCESS
    caplog.clear()  # ec's own lines (it named "a", then "b")
    with caplog.at_level(logging.WARNING, logger="eic"):
        client.mexist(keys_of(key), exist_option("b"))
        client.mset(keys_of(unique("c")), put_buffers(b"c"), set_option("c"))
    warnings = [r.getMessage() for r in caplog.records if "named namespace" in r.getMessage()]
    assert len(warnings) == 1 and "named namespace 'b' after 'a'" in warnings[0], warnings
    out = bytearray(1)
    assert client.mget(keys_of(key), eic.GetOption(), get_buffers(out))[0] == S.SUCCESS
    assert out == b"a"
    assert client.mdel(keys_of(key))[1].status_codes[0] == S.SUCCESS
    assert ec.mexist(keys_of(key), exist_option("b"))[1].status_codes[0] == S.SUCCESS

    default = connect(node.address)  # SGLang with eic_namespace "" assigns it
    assert default.mexist(keys_of(unique("absent")), exist_option(""))[0] == S.SUCCESS
    assert default.mexist(keys_of(key), eic.ExistOption())[1].status_codes[0] == \
        S.KEY_NOT_EXIST


def test_the_named_namespace_wins_over_kvport_eic_ns(node, monkeypatch, caplog):
    """KVPORT_EIC_NS means what an unassigned ns means until the client names a namespace;
    naming another one then wins, with a warning (the engine's own setting is what its assigned
    calls use, so its unassigned ones follow it)."""
    writer = connect(node.address)
    key = unique("env")
    writer.mset(keys_of(key), put_buffers(b"e"), set_option("env-ns"))
    monkeypatch.setenv("KVPORT_EIC_NS", "env-ns")
    client = connect(node.address)
    assert client.mexist(keys_of(key), eic.ExistOption())[1].status_codes[0] == S.SUCCESS
    with caplog.at_level(logging.WARNING, logger="eic"):
        client.mexist(keys_of(unique("absent")), exist_option("engine-ns"))
    assert any("not 'env-ns' (KVPORT_EIC_NS)" in r.getMessage() for r in caplog.records)
    assert client.mexist(keys_of(key), eic.ExistOption())[1].status_codes[0] == S.KEY_NOT_EXIST


def test_kvport_eic_ns_bounds_the_unassigned_namespace(node, monkeypatch):
    """KVPORT_EIC_NS: an unassigned ns means that namespace exactly, so an LMCache with
    eic_kv_ns "mine" neither sees nor deletes another namespace's chunks."""
    ec = connect(node.address)
    theirs, mine = unique("theirs"), unique("mine")
    ec.mset(keys_of(theirs), put_buffers(b"t"), set_option("other"))
    monkeypatch.setenv("KVPORT_EIC_NS", "mine")
    bounded = connect(node.address)
    bounded.mset(keys_of(mine), put_buffers(b"m"), set_option("mine"))
    status, outcome = bounded.mexist(keys_of(theirs, mine), eic.ExistOption())
    assert status == S.SUCCESS and list(outcome.status_codes) == [S.KEY_NOT_EXIST, S.SUCCESS]
    assert bounded.mdel(keys_of(theirs))[1].status_codes[0] == S.KEY_NOT_EXIST
    assert ec.mexist(keys_of(theirs), exist_option("other"))[1].status_codes[0] == S.SUCCESS
    # An unassigned SetOption writes there too; an assigned ns is still exact.
    plain = unique("plain")
    bounded.mset(keys_of(plain), put_buffers(b"p"), eic.SetOption())
    assert ec.mexist(keys_of(plain), exist_option("mine"))[1].status_codes[0] == S.SUCCESS
    assert bounded.mexist(keys_of(theirs), exist_option("other"))[1].status_codes[0] == S.SUCCESS
    # The client initialized before the variable named "other" on its first call.
    assert ec.mexist(keys_of(theirs), eic.ExistOption())[1].status_codes[0] == S.SUCCESS
    assert bounded.mdel(keys_of(mine))[1].status_codes[0] == S.SUCCESS


_HEADER = struct.Struct("<4sBBHQIIQ")  # magic, version, opcode, flags, id, lengths
_MSET = 3


def _read_exactly(sock, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise OSError("closed")
        data += chunk
    return bytes(data)


def alter_mset_values(client, node):
    """A HoldingProxy's requests: changes the last byte of every MSET's values on their way to
    the node (what a flipped bit between a writer and the node looks like), so the node keeps
    bytes that do not match the checksum their writer sent. It parses the client's frames
    (docs/protocol.md: a 32-byte header, then the descriptor and the payload)."""
    try:
        while True:
            header = _read_exactly(client, _HEADER.size)
            _, _, opcode, _, _, descriptor_length, _, payload_length = _HEADER.unpack(header)
            body = bytearray(_read_exactly(client, descriptor_length + payload_length))
            if opcode == _MSET and payload_length > 0:
                body[-1] ^= 0x01
            node.sendall(header + bytes(body))
    except OSError:
        node.close()


def test_kvport_checksums_turns_the_eic_clients_checks_off(node, monkeypatch):
    """An engine's eic client has no checksum option: KVPORT_CHECKSUMS=false turns its checks off.
    A value whose bytes were altered after its writer hashed them is a miss with the default
    (never bytes the writer did not put) and comes back as the node holds it with the variable
    off."""
    with HoldingProxy(node.address, requests=alter_mset_values) as relay:
        writer = kvport.Client(relay.address, transport_type=kvport.TransportType.TCP)
        key, value = unique("altered"), b"written" * 1000
        assert writer.mset([key], [value], ns="cksum").ok
    altered = value[:-1] + bytes([value[-1] ^ 0x01])

    monkeypatch.delenv("KVPORT_CHECKSUMS", raising=False)
    checked = connect(node.address, trans_type=1)
    status, _, outcome = checked.mget(keys_of(key), get_option("cksum"),
                                      get_buffers(bytearray(len(value))))
    assert status == S.FAILED and list(outcome.status_codes) == [S.KEY_NOT_EXIST]

    monkeypatch.setenv("KVPORT_CHECKSUMS", "false")
    unchecked = connect(node.address, trans_type=1)
    out = bytearray(len(value))
    status, _, outcome = unchecked.mget(keys_of(key), get_option("cksum"), get_buffers(out))
    assert status == S.SUCCESS and list(outcome.status_codes) == [S.SUCCESS]
    assert bytes(out) == altered


def test_kvport_log_lines_reach_the_eic_logger(node, tmp_path, caplog, capfd):
    """kvport's C++ lines (here the client's transport choice for eic_trans_type 2) arrive on
    the "eic" logger, not on stderr; an init failure's reason is an ERROR record there; and
    log_dir gets the logger's records."""
    with caplog.at_level(logging.DEBUG, logger="eic"):
        client = eic.Client()
        option = eic.InitOption()
        option.log_level = eic.LogLevel(0)
        option.log_dir = str(tmp_path / "eic-logs")
        option.transport_type = eic.TransportType(2)
        assert client.init(None, node.address, option) == 0
        refused = eic.Client()
        option.transport_type = eic.TransportType(3)
        assert refused.init(None, node.address, option) == 9
    records = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "eic"]
    assert any(m.startswith("kvport: ") and "eic_trans_type 2" in m for _, m in records), records
    assert any(level == logging.ERROR and "GPUDirect" in m for level, m in records), records
    assert any(level == logging.INFO and m.startswith("eic: connected to") for level, m in records)
    assert "eic_trans_type" not in capfd.readouterr().err
    log_file = tmp_path / "eic-logs" / f"eic-{os.getpid()}.log"
    assert "GPUDirect" in log_file.read_text()


def test_namespaces_isolate(ec):
    key = unique("iso")
    ec.mset(keys_of(key), put_buffers(b"in-a"), set_option("a"))
    ec.mset(keys_of(key), put_buffers(b"in-b"), set_option("b"))
    out = bytearray(4)
    ec.mget(keys_of(key), get_option("b"), get_buffers(out))
    assert out == b"in-b"
    ec.mdel(keys_of(key), _del("a"))
    assert ec.mexist(keys_of(key), exist_option("a"))[1].status_codes[0] == S.KEY_NOT_EXIST
    assert ec.mexist(keys_of(key), exist_option("b"))[1].status_codes[0] == S.SUCCESS


def _del(ns):
    option = eic.DelOption()
    option.ns = ns
    return option


def meta_blob(length: int) -> bytes:
    # LMCache's RemoteMetadata: int32 fields in native order (one group: 28 bytes).
    return struct.pack("i" * 7, 28, 1, 3, 1, 16, 8, 128) if length == 28 else bytes(length)


def test_meta_pair_is_one_object(node, ec):
    ns = unique("pair-ns")
    key = unique("K")
    meta, data = meta_blob(28), b"D" * 4096
    status, outcome = ec.mset(keys_of(key + "_meta", key), put_buffers(meta, data),
                              set_option(ns))
    assert status == S.SUCCESS and list(outcome.status_codes) == [S.SUCCESS, S.SUCCESS]
    usage = {name: objects for name, objects, _ in node.stats()["namespaces"]}
    assert usage[ns] == 1  # the meta rides with its data
    meta_out = bytearray(28)
    status, _, outcome = ec.mget(keys_of(key + "_meta"), get_option(ns), get_buffers(meta_out))
    assert status == S.SUCCESS and bytes(meta_out) == meta
    too_small = bytearray(b"tiny")
    status, _, outcome = ec.mget(keys_of(key + "_meta"), get_option(ns), get_buffers(too_small))
    assert outcome.status_codes[0] == S.BUFFER_TOO_SMALL and too_small == b"tiny"
    assert ec.mexist(keys_of(key + "_meta"), exist_option(ns))[1].status_codes[0] == S.SUCCESS
    # vals=None returns the values themselves.
    status, values, _ = ec.mget(keys_of(key + "_meta", key), get_option(ns), None)
    assert status == S.SUCCESS and values == [meta, data]
    # Deleting the meta deletes the pair: a chunk never exists half.
    assert ec.mdel(keys_of(key + "_meta"), _del(ns))[1].status_codes[0] == S.SUCCESS
    assert ec.mexist(keys_of(key), exist_option(ns))[1].status_codes[0] == S.KEY_NOT_EXIST
    # A lone K_meta (no K in the same call) is a plain key.
    lone = unique("lone")
    ec.mset(keys_of(lone + "_meta"), put_buffers(meta), set_option(ns))
    out = bytearray(28)
    assert ec.mget(keys_of(lone + "_meta"), get_option(ns), get_buffers(out))[0] == S.SUCCESS
    assert bytes(out) == meta


def test_meta_pair_never_half_present_under_eviction():
    # A node far too small for what is written: eviction runs all the time. Reading the metas
    # of the first pairs makes them recently used; were meta and data separate objects, the
    # data would be evicted before its meta and the meta would read as a phantom hit.
    with kvport.Server(capacity="2MiB", threads=1) as small:
        client = connect(small.address)
        data = b"d" * (64 << 10)
        meta = meta_blob(28)
        names = [f"chunk{i}" for i in range(200)]
        for i, name in enumerate(names):
            ec_status, outcome = client.mset(keys_of(name + "_meta", name),
                                             put_buffers(meta, data), set_option("p"))
            assert list(outcome.status_codes)[0] == outcome.status_codes[1]
            if i >= 8:
                for early in names[:8]:  # LMCache's lookup path: read the metas
                    client.mget(keys_of(early + "_meta"), get_option("p"),
                                get_buffers(bytearray(28)))
        present = 0
        for name in names:
            _, outcome = client.mexist(keys_of(name + "_meta", name), exist_option("p"))
            meta_there, data_there = (c == S.SUCCESS for c in outcome.status_codes)
            assert meta_there == data_there, f"{name}: meta {meta_there}, data {data_there}"
            present += data_there
        assert 0 < present < len(names)  # eviction did happen, and did not empty the node


def test_register_memory_is_bookkeeping(ec):
    info = eic.MemoryInfo()
    info.type = eic.MemoryType.MEMORY_CUDA  # what LMCache declares for its pinned host pool
    info.cuda_id = 0
    huge = eic.IOBuffers()
    # 512 GiB at an address nothing is mapped at: registering must not touch or pin it.
    huge.append(0x7F0000000000, 512 << 30, True)
    assert ec.register_memory(huge, info)
    assert ec.registered_regions()[-1][:2] == (0x7F0000000000, 512 << 30)
    empty = eic.IOBuffers()
    empty.append(0, 0, True)
    assert not ec.register_memory(empty, info)
    # Host memory declared MEMORY_CUDA is still read as host memory.
    pool = FakeTensor(1 << 20, fill=7)
    region = eic.IOBuffers()
    region.append(pool.data_ptr(), pool.nbytes, True)
    assert ec.register_memory(region, info)
    key = unique("registered")
    page = eic.IOBuffers()
    page.append(pool.data_ptr(), 4096, True)
    assert ec.mset(keys_of(key), page, set_option())[0] == S.SUCCESS
    out = FakeTensor(4096)
    back = eic.IOBuffers()
    back.append(out.data_ptr(), 4096, True)
    assert ec.mget(keys_of(key), get_option(), back)[0] == S.SUCCESS
    assert out.tobytes() == b"\x07" * 4096


def test_managed_buffers(ec):
    ptr = ec.allocate_managed_buffer(1 << 20)
    assert ptr != 0 and ptr % 4096 == 0
    ctypes.memset(ptr, 9, 1 << 20)
    key = unique("managed")
    vals = eic.IOBuffers()
    vals.append(ptr, 1 << 20, True)
    assert ec.mset(keys_of(key), vals, set_option())[0] == S.SUCCESS
    ec.free_managed_buffer(ptr, 1 << 20)


def test_warm_up_probes(ec):
    # LMCache's prebuilt_connection: 2048 single-key mexists of 30 random chars joined with
    # eic_kv_ns (30 + 29 * len(ns) characters), ExistOption never assigned. kvport's key limit
    # admits them for any namespace length the node accepts (255).
    import random
    ns = "n" * 255
    for _ in range(2048):
        chars = random.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", k=30)
        key = ns.join(chars)
        assert len(key) == 30 + 29 * len(ns)
        status, outcome = ec.mexist(keys_of(key), eic.ExistOption())
        assert status == S.SUCCESS and outcome.status_codes[0] == S.KEY_NOT_EXIST


def test_eight_threads_share_one_eic_client(ec):
    errors = []
    barrier = threading.Barrier(8, timeout=30)

    def work(t):
        try:
            barrier.wait()
            for i in range(40):
                key = f"eic-thread{t}-{i}"
                value = bytes([t]) * (1000 + i)
                assert ec.mset(keys_of(key), put_buffers(value), set_option("mt"))[0] == S.SUCCESS
                out = bytearray(len(value))
                assert ec.mget(keys_of(key), get_option("mt"), get_buffers(out))[0] == S.SUCCESS
                assert bytes(out) == value
                assert ec.mexist(keys_of(key), eic.ExistOption())[0] == S.SUCCESS
        except Exception as e:
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and not any(t.is_alive() for t in threads)


def test_node_gone_is_a_failed_call_not_an_exception():
    with kvport.Server(capacity="16MiB") as temporary:
        client = connect(temporary.address)
        key = "k"
        assert client.mset(keys_of(key), put_buffers(b"v"), set_option())[0] == S.SUCCESS
    status, outcome = client.mexist(keys_of(key), eic.ExistOption())
    assert status == S.FAILED and outcome.status_codes[0] == S.UNAVAILABLE
    status, _, outcome = client.mget(keys_of(key), eic.GetOption(), get_buffers(bytearray(1)))
    assert status == S.FAILED and outcome.status_codes[0] in (S.UNAVAILABLE, S.FAILED)
