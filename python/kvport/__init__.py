# SPDX-License-Identifier: Apache-2.0
"""kvport: an open remote KV cache for LLM inference, from Python.

    import kvport
    with kvport.Server(capacity="1GiB") as node:          # an embedded node
        client = kvport.Client(node.url)
        client.mset(["k"], [b"value"])
        out = bytearray(5)
        result = client.mget(["k"], [out])              # out == b"value"

`Client` is the whole C++ client (include/kvport/client.h); `eic` (a sibling package) is the
drop-in for the vendor's `import eic`. Buffers are never copied: see `Client.mset`. Every call
releases the GIL while it waits, and a Client may be shared by any number of threads; a call
keeps its buffers (and the list of them) referenced until it returns. Device tensors are staged
when registered (`Client.register_memory`) and refused otherwise. docs/python.md is the
reference.
"""

from __future__ import annotations

import atexit
import enum
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Optional, Sequence, Tuple

from . import _core

__all__ = [
    "BatchCode", "BatchResult", "Client", "Error", "GetResult", "KeyCode", "Lent", "MemoryKind",
    "Server", "TransportType", "config_check", "doctor", "parse_size", "__version__",
]

__version__ = _core.VERSION


class Error(Exception):
    """A kvport call failed as a whole. `code` is the Status name ("Unavailable", "Timeout",
    "InvalidArgument", "NotSupported", ...; docs/protocol.md lists them), `message` says why."""

    def __init__(self, code: str, message: str, number: int = -1):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.number = number  # kvport::StatusCode's value (never 0)


_core._set_error_class(Error)
# Daemon threads still inside a kvport call when the interpreter exits park instead of taking
# the GIL back (which would end them mid-unwind and abort the process): see module.cc.
atexit.register(_core._interpreter_exiting)


class BatchCode(enum.IntEnum):
    """Overall outcome of a batched call."""
    SUCCESS = 0          # every key succeeded (an empty batch too)
    PARTIAL_FAILED = 1   # some keys succeeded, some did not
    FAILED = 2           # no key succeeded


class KeyCode(enum.IntEnum):
    """Outcome of one key (the same numbers as kvport::KeyCode)."""
    SUCCESS = 0
    KEY_NOT_EXIST = 1      # never written, deleted, evicted or expired
    NO_SPACE = 2           # mset: no room now
    TOO_LARGE = 3          # mset: over the capacity or a limit; will never fit
    BUFFER_TOO_SMALL = 4   # mget: the value is larger than the buffer (left untouched)
    INVALID_ARGUMENT = 5   # the key, namespace or meta is malformed or over a limit
    UNAVAILABLE = 6        # the node could not be reached / the connection was lost
    TIMEOUT = 7            # the deadline passed first
    DEVICE_ERROR = 8       # staging to or from device memory failed
    FAILED = 9             # any other failure (see the result's `error`)
    PERMISSION_DENIED = 10  # the client's token does not grant this namespace


class TransportType(enum.IntEnum):
    """eic_trans_type values (docs/python.md and docs/portability.md say what each resolves to)."""
    AUTO = 0   # shared memory with a same-host node; UCX where it finds RDMA hardware; else TCP
    TCP = 1    # TCP, even to a node on this host
    RDMA = 2   # shared memory with a same-host node, else UCX with a node offering it, else TCP
    GDR = 3    # as RDMA, device buffers staged; init fails without a usable CUDA runtime


class MemoryKind(enum.IntEnum):
    """Where registered memory lives (Client.register_memory)."""
    HOST = 0
    CUDA = 1
    ASCEND = 2


_KEY_CODES = tuple(KeyCode)


@dataclass
class BatchResult:
    """status: the overall BatchCode; codes: one KeyCode per key, in key order (the authority);
    error: "" when every key succeeded, else the first failing key's reason (for logs)."""
    status: BatchCode
    codes: List[KeyCode]
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status == BatchCode.SUCCESS


@dataclass
class GetResult(BatchResult):
    """Also: value_sizes (the stored length per key, set for SUCCESS and BUFFER_TOO_SMALL) and
    metas (the meta blob stored with each value, b"" when none)."""
    value_sizes: List[int] = field(default_factory=list)
    metas: List[bytes] = field(default_factory=list)


def _batch(raw: Tuple[int, List[int], str]) -> BatchResult:
    status, codes, error = raw
    return BatchResult(BatchCode(status), [_KEY_CODES[c] for c in codes], error)


def _get(raw: Tuple[int, List[int], List[int], List[bytes], str]) -> GetResult:
    status, codes, sizes, metas, error = raw
    return GetResult(BatchCode(status), [_KEY_CODES[c] for c in codes], error, sizes, metas)


def _keys(keys: Iterable) -> Sequence:
    return keys if isinstance(keys, (list, tuple)) else list(keys)


def _ns(ns: Optional[str]) -> Tuple[str, bool]:
    # None = any namespace (the default one first); see Client.mget.
    return ("", True) if ns is None else (ns, False)


class Client:
    """A client of one kvport node or a cluster of them. Connects in the constructor (raises
    Error when the node is unreachable or the transport cannot work here).

    endpoint: "host:port" or "eic://host:port", "unix:/path" (a node's Unix socket on this host:
    shared memory, whatever transport_type says), or a cluster (docs/cluster.md): EIC's
    "host:port;host:port" list, or "etcd:HOST:PORT/CLUSTER" (the nodes registered in etcd),
    each with an optional "?replicas=N&write_quorum=M". Keyword options are kvport::InitOptions'
    (docs/client.md), with the same defaults: replicas and write_quorum (1, 1; a cluster's),
    transport_type (TransportType or int; AUTO), connections (2), timeout and connect_timeout
    (seconds; 10 and 3), staging_cache_bytes (256 MiB), cuda_runtime_library,
    ascend_runtime_library, log_dir, log_level, flag_file, token (the secret for a node that
    requires one) or token_file (a file whose first line is it; neither: the KVPORT_TOKEN
    environment variable, if set), busy_poll_us (0: how long a call polls for its answer
    before it sleeps), tls_ca_file (TLS to the node, verified against this CA; with
    tls_cert_file and tls_key_file for a node that requires a client certificate; each empty
    one from KVPORT_TLS_CA_FILE, KVPORT_TLS_CERT_FILE, KVPORT_TLS_KEY_FILE: docs/security.md),
    tls_verify_hostname (True: the node's certificate must name the host or address connected
    to, and a client with no name to check fails closed; False checks the chain to the CA only;
    KVPORT_TLS_VERIFY_HOSTNAME),
    ucx_devices (a list: UCX multi-rail, one lane per entry, each lane's devices in
    UCX_NET_DEVICES' syntax; docs/transports.md), checksums (True: each value's checksum computed
    at its put and checked at its get, a value that fails being a miss; left True,
    KVPORT_CHECKSUMS=false turns it off; docs/client.md) and
    unchecked_namespaces (a list of namespaces without them); and instance_id ("").

    close() (or the end of a `with` block) closes the connections; collecting the object does
    the same. Every call after close() raises Error ("... the client is closed").
    """

    def __init__(self, endpoint: str, *, instance_id: str = "", **options: Any):
        if "transport_type" in options:
            options["transport_type"] = int(options["transport_type"])
        self._core = _core.Client()
        self._core.init(instance_id, endpoint, **options)

    # Every batched call takes `timeout` in seconds; 0 = the client's default.

    def mset(self, keys: Iterable[str], values: Sequence[Any], *, ns: str = "",
             ttl: int = -1, metas: Optional[Sequence[bytes]] = None,
             timeout: float = 0) -> BatchResult:
        """Stores values[i] under keys[i], each replacing any previous value atomically.
        A value is bytes, bytearray, memoryview (any C-contiguous buffer), a tensor (data_ptr()
        and nbytes), or a (pointer, size) tuple; it is sent from where it lies, never copied,
        and the call keeps it referenced until it returns. A CUDA or Ascend tensor must lie in
        memory passed to register_memory (it is then staged through pinned host memory); any
        other device buffer fails the call with Error. ttl: seconds the objects live, -1 (or 0)
        for no expiry. metas: one small blob per key stored atomically with its value (b"" =
        none)."""
        metas_list = None if metas is None else [bytes(m) for m in metas]
        return _batch(self._core.mset(_keys(keys), values, ns, ttl, metas_list, timeout))

    def mget(self, keys: Iterable[str], buffers: Sequence[Any], *, ns: Optional[str] = "",
             timeout: float = 0) -> GetResult:
        """Reads value i straight into buffers[i] (writable: bytearray, writable memoryview,
        tensor, (pointer, size); device tensors as for mset). A value larger than its buffer is
        BUFFER_TOO_SMALL for that key, with the true size in value_sizes, and the buffer is not
        written; a smaller value fills its first value_sizes[i] bytes. ns=None matches the key
        in any namespace (the default namespace first, then the others by name)."""
        name, anywhere = _ns(ns)
        return _get(self._core.mget(_keys(keys), buffers, name, anywhere, timeout))

    def mget_in_place(self, keys: Iterable[str], *, ns: Optional[str] = "",
                      timeout: float = 0) -> "Lent":
        """Reads the values without copying them: a Lent whose value(i) is a read-only
        memoryview into the node's arena (mapped in this process). Needs the shared-memory
        transport (`transport == "shared memory"`); raises Error NotSupported otherwise. The node
        keeps the values pinned until the Lent and every view taken from it are gone (or
        release() was called and the views dropped): use it as a context manager."""
        name, anywhere = _ns(ns)
        return Lent(self._core.mget_in_place(_keys(keys), name, anywhere, timeout))

    def mget_meta(self, keys: Iterable[str], *, ns: Optional[str] = "",
                  timeout: float = 0) -> GetResult:
        """Only the metas and value sizes: what a caller needs to size buffers for mget."""
        name, anywhere = _ns(ns)
        return _get(self._core.mget_meta(_keys(keys), name, anywhere, timeout))

    def mexist(self, keys: Iterable[str], *, ns: Optional[str] = "",
               timeout: float = 0) -> BatchResult:
        """SUCCESS per key that exists, KEY_NOT_EXIST per key that does not (a probe: no hit
        is counted, the LRU order is unchanged). ns=None: in any namespace."""
        name, anywhere = _ns(ns)
        return _batch(self._core.mexist(_keys(keys), name, anywhere, timeout))

    def mdel(self, keys: Iterable[str], *, ns: Optional[str] = "",
             timeout: float = 0) -> BatchResult:
        """SUCCESS per key deleted, KEY_NOT_EXIST per key that was not there. ns=None deletes
        the key in every namespace that holds it."""
        name, anywhere = _ns(ns)
        return _batch(self._core.mdel(_keys(keys), name, anywhere, timeout))

    def list(self, ns: str = "", cursor: int = 0, max_keys: int = 1024) -> Tuple[List[str], int]:
        """One page of namespace `ns`'s keys: (keys, next_cursor); next_cursor 0 = done."""
        return self._core.list(ns, cursor, max_keys)

    def stats(self) -> dict:
        """{"counters": {name: value}, "namespaces": [(name, objects, bytes)]} of the node; of a
        cluster, every node's counters summed (quantiles: the largest) and namespaces merged."""
        return self._core.stats()

    def stats_per_node(self) -> List[dict]:
        """One dict per node: {"id", "address", "epoch", "error" ("" when the node answered),
        "stats" (as stats() gives)}. One node: a list of one."""
        return self._core.stats_per_node()

    @property
    def is_cluster(self) -> bool:
        """Whether the endpoint named a cluster (a list of nodes, or etcd)."""
        return self._core.is_cluster

    def ping(self) -> None:
        self._core.ping()

    def register_memory(self, buffers: Sequence[Any], kind: int = MemoryKind.HOST,
                        device_id: int = 0) -> None:
        """Declares device memory (kind CUDA or ASCEND) so mset/mget stage it through pinned
        host memory with that runtime; raises Error NotSupported when the runtime is not usable
        here. A buffer may be a whole pool: any tensor lying inside it is then staged. A device
        tensor must be registered with its own kind and device_id (Error InvalidArgument
        otherwise). The memory must stay allocated until unregister_memory. Host memory needs
        no registration."""
        self._core.register_memory(buffers, int(kind), device_id)

    def unregister_memory(self, buffers: Sequence[Any]) -> None:
        """Forgets buffers registered with exactly these (address, size); Error NotFound for
        one that was not."""
        self._core.unregister_memory(buffers)

    def close(self) -> None:
        """Closes the connections. Idempotent. A call that another thread has inside finishes
        first (each is bounded by its timeout); every call after it raises Error."""
        self._core.close()

    @property
    def closed(self) -> bool:
        return self._core.closed

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def transport(self) -> str:
        """The data path Init chose: "shared memory" (a node on this host that offers it),
        "TCP", or "Unix socket" (a unix: endpoint whose node declined shared memory);
        `transport_reason` says why."""
        return self._core.transport

    @property
    def transport_reason(self) -> str:
        return self._core.transport_reason

    @property
    def checksum_mismatches(self) -> int:
        """Values a get found failing their checksum (each answered as a miss)."""
        return self._core.checksum_mismatches

    @property
    def default_namespace(self) -> Optional[str]:
        """The namespace the client's token names for calls that name none (the token file's
        `namespace`), learned at connect; None on an open node or for a token that names none.
        kvport.Client's own calls always name theirs (ns=...); the eic drop-in uses it."""
        return self._core.default_namespace

    @property
    def endpoint(self) -> str:
        return self._core.endpoint


class Lent:
    """Values a same-host node lent in place (Client.mget_in_place).

        with client.mget_in_place(["k"]) as lent:
            if lent.result.codes[0] == kvport.KeyCode.SUCCESS:
                view = lent.value(0)        # read-only memoryview, no copy
                data = bytes(view)          # a copy, if one is wanted
                if not lent.valid:          # checked after the read
                    data = None             # the node ended the lease meanwhile

    result: a GetResult (codes, value_sizes, metas). The lease ends when this object and every
    view taken from it are gone, or when the node ends it (the connection was lost, the node
    stopped), which can happen while a view is being read: check `valid` after reading. True
    then means every byte read before was the lent value (docs/client.md, "Values in place")."""

    def __init__(self, core: Any):
        self._core = core
        self.result = _get(core.result)

    def __len__(self) -> int:
        return len(self._core)

    def value(self, index: int) -> Optional[memoryview]:
        """Key `index`'s value, or None unless its code is SUCCESS."""
        lent = self._core.value(index)
        return None if lent is None else memoryview(lent)

    @property
    def valid(self) -> bool:
        return self._core.valid

    def release(self) -> None:
        """Gives the values back (once no view taken from them is left)."""
        self._core.release()

    def __enter__(self) -> "Lent":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def parse_size(size: Any) -> int:
    """An int (bytes) as is; a string with a unit ("1GiB", "512 MiB", "64MB") in bytes."""
    if isinstance(size, int):
        if size < 0:
            raise ValueError("a size is >= 0 bytes")
        return size
    return _core.parse_size(str(size))


class Server:
    """An embedded kvport node, for notebooks and tests:

        with kvport.Server(capacity="1GiB") as node:
            client = kvport.Client(node.url)

    capacity: bytes or a size string. threads: I/O threads (2 here; 0 = one per CPU).
    Keyword options are kvport::ServerOptions' (include/kvport/server.h), with its defaults:
    listen (loopback, an ephemeral port), unix_socket ("" none; "auto" for
    $XDG_RUNTIME_DIR or /tmp/kvport-PORT.sock; or an absolute path: clients on this host then
    map the node's arena, see unix_socket_path), shared_memory (True), max_leases_per_session
    (4096), max_reservations_per_session (256), max_value_bytes (bytes or a size string),
    max_key_bytes, max_meta_bytes, max_batch_keys, tokens_file (a token file: clients must then
    present a token, docs/security.md; reload_tokens() re-reads it), insecure (allow a
    non-loopback listen address without tokens), and cluster membership (docs/cluster.md):
    cluster (a name; "" standalone), etcd ("HOST:PORT,HOST:PORT" or a list), advertise
    (HOST:PORT clients connect to; default the bound address), node_id (default the advertised
    address), lease_ttl_secs (10), tls_cert_file + tls_key_file (TLS 1.3 on the TCP port) and
    tls_ca_file (clients must then present a certificate: docs/security.md), busy_poll_us (0:
    how long an I/O thread polls for the next request before it sleeps, at most 1 s; see
    docs/operations.md), ucx (False: serve values over UCX, node-checked, to clients asking for RDMA,
    transport_type 2; docs/transports.md). The node stops when the `with` block ends, on stop(), or
    when the object is collected; stopping lets requests in flight finish (a cluster node
    deregisters first)."""

    def __init__(self, capacity: Any = "1GiB", *, threads: int = 2, **options: Any):
        if "max_value_bytes" in options:
            options["max_value_bytes"] = parse_size(options["max_value_bytes"])
        if isinstance(options.get("etcd"), str):
            options["etcd"] = options["etcd"].split(",") if options["etcd"] else []
        self._core = _core.Server(capacity_bytes=parse_size(capacity), threads=threads,
                                  **options)

    def reload_tokens(self) -> None:
        """Re-reads tokens_file (what `kvport serve` does on SIGHUP); raises kvport.Error and
        keeps the tokens in force when the file is invalid."""
        self._core.reload_tokens()

    @property
    def address(self) -> str:
        """HOST:PORT actually bound."""
        return self._core.address

    @property
    def port(self) -> int:
        return self._core.port

    @property
    def url(self) -> str:
        """eic://HOST:PORT, what LMCache's remote_url and kvport.Client take."""
        return "eic://" + self._core.address

    @property
    def unix_socket_path(self) -> str:
        """The Unix socket's path ("" when the node has none). A client of this host that
        connects to `url` finds it by itself; "unix:" + this path forces shared memory."""
        return self._core.unix_socket_path

    @property
    def epoch(self) -> int:
        """The node's epoch in its cluster: random, nonzero, new on every start and whenever
        the node re-registers after its lease lapsed (its store dropped). 0 when standalone."""
        return self._core.epoch

    @property
    def running(self) -> bool:
        return self._core.running

    def stats(self) -> dict:
        """The node's counters and per-namespace usage, read in-process."""
        return self._core.stats()

    def stop(self) -> None:
        """Graceful; idempotent. A stats() or reload_tokens() that another thread has inside
        finishes first; every call after it (or arriving while it waits) raises Error."""
        self._core.stop()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def config_check(path: Optional[str] = None) -> dict:
    """Loads a config the way the client and the node do (`kvport config check --json`):
    {"file", "values": {key: {"value", "source", "env", ["human"]}}, "warnings"}. Without a
    path, LMCACHE_CONFIG_FILE names the file. Raises Error with every invalid value named."""
    return json.loads(_core.config_check_json(path))


def doctor(cuda_runtime_library: str = "", ascend_runtime_library: str = "",
           ucx_library: str = "") -> dict:
    """What `kvport doctor --json` reports: runtimes (found where, or why not), UCX, transports
    and which eic_trans_type values initialize here."""
    return json.loads(_core.doctor_json(cuda_runtime_library, ascend_runtime_library,
                                        ucx_library))
