# SPDX-License-Identifier: Apache-2.0
"""Imports both packages and round-trips through an embedded node, without pytest: run by
ctest with the python3 first on PATH (which may be another interpreter than Debian's)."""

import sys

import eic
import kvport

with kvport.Server(capacity="64MiB") as node:
    client = eic.Client()
    option = eic.InitOption()
    option.transport_type = eic.TransportType(1)
    option.flag_file = None
    assert client.init(None, node.address, option) == 0
    value = b"kvport from " + sys.executable.encode()
    keys = eic.StringVector()
    keys.append("smoke")
    vals = eic.IOBuffers()
    import ctypes
    vals.append(ctypes.cast(ctypes.c_char_p(value), ctypes.c_void_p).value, len(value), False)
    status, outcome = client.mset(keys, vals, eic.SetOption())
    assert status == eic.StatusCode.SUCCESS, (status, outcome)
    out = bytearray(len(value))
    got = eic.IOBuffers()
    got.append(ctypes.addressof(ctypes.c_char.from_buffer(out)), len(out), False)
    status, _, outcome = client.mget(keys, eic.GetOption(), got)
    assert status == eic.StatusCode.SUCCESS and bytes(out) == value, (status, outcome, out)
print(f"smoke: {sys.executable} {sys.version.split()[0]}: kvport {kvport.__version__} ok")
