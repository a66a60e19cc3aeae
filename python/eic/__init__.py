# SPDX-License-Identifier: Apache-2.0
"""eic: kvport's drop-in for the vendor's EIC Python SDK.

LMCache's EICConnector (`remote_url: eic://...`) and SGLang's EIC storage backend call
`import eic`; with this package installed they run unchanged against a kvport node. The
surface, argument order, return shapes and status semantics are the ones those callers use
(../shared/notes/eic-python-api.md in the kvport team's notes; docs/python.md has the table):

    client = eic.Client()
    ret = client.init(instance_id, "host:port", init_option)        # int, 0 = ok
    status, outcome = client.mset(keys, vals, set_option)
    status, vals, outcome = client.mget(keys, get_option, vals)      # option BEFORE vals
    status, outcome = client.mexist(keys, exist_option)
    status, outcome = client.mdel(keys[, del_option])
    ok = client.register_memory(vals, memory_info)
    outcome.status_codes[i]                                          # one per key

Where the vendor's behaviour is unknown kvport chose, and docs/python.md says what:
  - Namespaces. An option whose `ns` was never assigned (LMCache's ExistOption and mdel,
    SGLang's delete(), AIBrix's ExistOption) means, in this order: the namespace this client
    named first (the first `ns` assigned on an option passed to any of its calls: an engine
    configured with namespace X names X on its puts and gets, so its probes and deletes stay in
    X); else the namespace its token names (its `namespace` field, learned at init); else the
    one in KVPORT_EIC_NS when that is set (at init); else, for an LMCache engine whose config
    (LMCACHE_CONFIG_FILE) has an eic:// remote_url, that file's eic_kv_ns ("" when unset): the
    namespace its EIC connector will name on its puts and gets, known before its first probe,
    so that a fresh engine never finds (and then fails to read) another tenant's chunks; with
    none of them it matches the key in ANY
    namespace on reads, probes and deletes (the default namespace "" first, then the others by
    name), and writes go to "". The first named namespace stays for the client's life: naming
    another later is logged once and changes nothing, so what a client's unassigned calls reach
    never widens. An explicit `ns = ""` means the default namespace only, and names it.
  - LMCache's `K_meta` + `K` pair. When one mset carries both a key K and K + "_meta" (a
    small value), the meta is stored as K's metadata blob: one object, so the pair is written
    all-or-nothing and can never be evicted apart (a meta without its data is never readable).
    Reads, probes and deletes of K_meta look at K's blob first, then at a plain K_meta key.
  - mget reads exact sizes: a value larger than the buffer is a per-key BUFFER_TOO_SMALL (the
    buffer untouched), a smaller one SIZE_MISMATCH (the buffer's front may hold it). Every
    caller sizes its buffers from what it stored (LMCache's metadata, SGLang's and AIBrix's
    pages), so a size that differs is a chunk of another layout, never a hit.
  - Logs. From the first init on, kvport's C++ log lines go to the "eic" logger (forwarded at
    the end of each call) instead of stderr; log_level sets that logger's level and kvport's,
    and a log_dir gets the logger's records in eic-<pid>.log.
  - mdel of absent keys: overall SUCCESS, per-key KEY_NOT_EXIST (deleting nothing is no error).
  - Checksums are on, as for every kvport client: a value whose bytes do not match the checksum
    its writer computed is a per-key KEY_NOT_EXIST, never bytes. The callers have no option for
    it; KVPORT_CHECKSUMS=false in the environment (read at init) turns them off.
  - register_memory is bookkeeping: it never touches, pins or copies the region and does not
    trust MemoryInfo.type (callers declare pinned host memory as MEMORY_CUDA); every buffer is
    read and written as host memory. A buffer object that says it is device memory (a CUDA
    tensor: is_cuda / device, __cuda_array_interface__, __dlpack_device__) is never read or
    written as host memory: the call fails (FAILED, the reason in outcome.error and logged).
"""

from __future__ import annotations

import ctypes
import enum
import functools
import logging
import mmap
import os
import threading
from typing import Any, List, Optional, Sequence, Tuple

import kvport
from kvport import _core

__all__ = [
    "Client", "DelOption", "ExistOption", "GetOption", "IOBuffers", "InitOption", "LogLevel",
    "MemoryInfo", "MemoryType", "Outcome", "SetOption", "StatusCode", "StringVector",
    "TransportType",
]

_log = logging.getLogger("eic")


class StatusCode(enum.IntEnum):
    """Overall and per-key outcomes. The first four are the members LMCache and SGLang compare
    with; overall statuses are always one of them. The rest are kvport's per-key detail (each
    is a failure: callers that test `!= SUCCESS` or `== KEY_NOT_EXIST` read them correctly)."""
    SUCCESS = 0
    KEY_NOT_EXIST = 1
    PARTIAL_FAILED = 2
    FAILED = 3
    NO_SPACE = 10          # mset: the node has no room now
    TOO_LARGE = 11         # mset: over the node's capacity or a limit
    BUFFER_TOO_SMALL = 12  # mget: the value is larger than the buffer (left untouched)
    INVALID_ARGUMENT = 13  # a malformed or over-long key, namespace or meta
    UNAVAILABLE = 14       # the node could not be reached or the connection was lost
    TIMEOUT = 15           # the call's deadline passed
    DEVICE_ERROR = 16
    PERMISSION_DENIED = 17  # the token (KVPORT_TOKEN) does not grant the namespace
    SIZE_MISMATCH = 18     # mget: the value is smaller than the buffer (another layout)


class TransportType(enum.IntEnum):
    """eic_trans_type. AUTO (kvport's own value, the InitOption default): shared memory with a
    node on this host that offers it, UCX where it finds RDMA hardware, TCP otherwise. TCP: TCP
    even to a node on this host. RDMA: shared memory with a node on this host, else UCX
    (node-checked messages) with a node that offers it, else TCP (logged at init). GDR: fails at init
    without a usable CUDA runtime, naming it; with one, as RDMA with device buffers staged
    through pinned host memory. An endpoint "unix:/PATH" asks for shared memory whatever the
    type."""
    TRANSPORT_AUTO = 0
    TRANSPORT_TCP = 1
    TRANSPORT_RDMA = 2
    TRANSPORT_GDR = 3


class LogLevel(enum.IntEnum):
    """eic_log_level (kvport logs to stderr; the level is process-wide)."""
    DEBUG = 0
    INFO = 1
    WARNING = 2
    ERROR = 3
    CRITICAL = 4
    OFF = 5


class MemoryType(enum.IntEnum):
    """MemoryInfo.type; recorded, not trusted (see register_memory)."""
    MEMORY_DEFAULT = 0
    MEMORY_CUDA = 1
    MEMORY_NPU = 2


# kvport::KeyCode (kvport.KeyCode) -> StatusCode
_FROM_KEY_CODE = (
    StatusCode.SUCCESS, StatusCode.KEY_NOT_EXIST, StatusCode.NO_SPACE, StatusCode.TOO_LARGE,
    StatusCode.BUFFER_TOO_SMALL, StatusCode.INVALID_ARGUMENT, StatusCode.UNAVAILABLE,
    StatusCode.TIMEOUT, StatusCode.DEVICE_ERROR, StatusCode.FAILED, StatusCode.PERMISSION_DENIED,
)
# A call that failed as a whole (kvport.Error.code) -> every key's StatusCode
_FROM_ERROR = {"Unavailable": StatusCode.UNAVAILABLE, "Timeout": StatusCode.TIMEOUT,
               "InvalidArgument": StatusCode.INVALID_ARGUMENT}

_INVALID_ARGUMENT = 1  # kvport::StatusCode::kInvalidArgument, what init returns for misuse

_META_SUFFIX = "_meta"
# Largest K_meta value folded into K's metadata blob (LMCache's are 28 to 68 bytes; a node's
# max_meta_bytes is at least this by default, 4096).
_META_FOLD_MAX = 1024
# Largest value mget(keys, option, None) allocates for (the CLI's `get --max-bytes` default).
_NEW_VALUE_MAX = 1 << 30

# The namespace an unassigned `ns` means, when set (read at each init).
_NS_ENV = "KVPORT_EIC_NS"


# --- kvport's C++ log lines, through Python's logging -----------------------------------------

# Lines kept between two forwards; more are counted as dropped (a bound on what a burst of
# lines from the node's or client's threads can hold).
_CPP_LOG_LINES = 4096
# kvport::log::Level (debug, info, warn, error) -> logging levels
_CPP_LEVELS = (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR)
# LogLevel -> logging levels (OFF: above CRITICAL)
_LOG_LEVELS = (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL,
               logging.CRITICAL + 1)
def _lmcache_config() -> Optional[dict]:
    """kvport's config check of the engine's LMCache config (LMCACHE_CONFIG_FILE), or None when
    there is none or the check refuses it (LMCache reads the file itself: that is its
    business)."""
    path = os.environ.get("LMCACHE_CONFIG_FILE")
    if not path:
        return None
    try:
        return kvport.config_check(path)
    except (kvport.Error, OSError, ValueError, KeyError):
        return None


def _warn_per_process_chunk_hash(config: Optional[dict]) -> None:
    """Logs, at WARNING, kvport's config check's warning about the engine's LMCache config
    when it points at a node but keys chunks with Python's per-process hash: engines sharing
    the node would never reuse each other's chunks, silently."""
    for warning in (config or {}).get("warnings", []):
        if "pre_caching_hash_algorithm" in warning:
            _log.warning("eic: LMCACHE_CONFIG_FILE %s: %s", config.get("file"), warning)


def _lmcache_eic_namespace(config: Optional[dict]) -> Optional[str]:
    """The namespace LMCache's EIC connector names on its puts and gets (its config file's
    eic_kv_ns, "" when the file does not set it: the connector reads the file, not the
    environment), when the config sends LMCache's remote tier to eic://; else None."""
    values = (config or {}).get("values", {})
    if not str(values.get("remote_url", {}).get("value", "")).startswith("eic://"):
        return None
    ns = values.get("eic_kv_ns", {})
    return str(ns.get("value", "")) if str(ns.get("source", "")).startswith("file:") else ""


_log_files: dict = {}  # (pid, path) -> FileHandler on _log
_log_files_lock = threading.Lock()


def _forward_cpp_log() -> None:
    """Hands the C++ lines kept since the last forward to the "eic" logger."""
    lines, dropped = _core.take_log()
    for level, message in lines:
        _log.log(_CPP_LEVELS[level], "kvport: %s", message)
    if dropped:
        _log.warning("eic: %d kvport log lines dropped (more than %d between two calls)",
                     dropped, _CPP_LOG_LINES)


def _forwarding_log(method):
    """A public call that forwards kvport's log lines once it returns (or raises)."""

    @functools.wraps(method)
    def call(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        finally:
            _forward_cpp_log()

    return call


def _route_log(option: "InitOption") -> None:
    """Captures kvport's C++ lines for the "eic" logger and honours log_level and log_dir."""
    _core.capture_log(_CPP_LOG_LINES)
    level = int(option.log_level)
    if 0 <= level < len(_LOG_LEVELS):
        _log.setLevel(_LOG_LEVELS[level])
    if not option.log_dir:
        return
    path = os.path.join(option.log_dir, f"eic-{os.getpid()}.log")
    with _log_files_lock:
        if (os.getpid(), path) in _log_files:
            return
        try:
            os.makedirs(option.log_dir, exist_ok=True)
            handler = logging.FileHandler(path)
        except OSError as e:
            _log.warning("eic: log_dir %r is not writable (%s): records stay with the logging "
                         "configuration", option.log_dir, e)
            return
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        _log.addHandler(handler)
        _log_files[(os.getpid(), path)] = handler


# --- Options: plain attribute bags, as the vendor's are ----------------------------------------

class _NsOption:
    """`ns` reads "" until assigned; whether it was assigned decides the namespace rule."""
    __slots__ = ("_ns",)

    def __init__(self) -> None:
        self._ns: Optional[str] = None

    @property
    def ns(self) -> str:
        return "" if self._ns is None else self._ns

    @ns.setter
    def ns(self, value: Optional[str]) -> None:
        if value is not None and not isinstance(value, str):
            raise TypeError(f"ns must be a str, not {type(value).__name__}")
        self._ns = value

    def __repr__(self) -> str:
        return f"{type(self).__name__}(ns={self._ns!r})"


class SetOption(_NsOption):
    """ns (unassigned: the namespace rule of the module doc; for a client with no namespace
    named, no token's and no KVPORT_EIC_NS, the default namespace ""), ttl_second (-1 or 0:
    never expires)."""
    __slots__ = ("ttl_second",)

    def __init__(self) -> None:
        super().__init__()
        self.ttl_second: int = -1


class GetOption(_NsOption):
    __slots__ = ()


class ExistOption(_NsOption):
    __slots__ = ()


class DelOption(_NsOption):
    __slots__ = ()


class InitOption:
    __slots__ = ("log_dir", "log_level", "transport_type", "flag_file",
                 "multi_net_local_interface_names")

    def __init__(self) -> None:
        self.log_dir: Optional[str] = ""
        self.log_level: int = LogLevel.INFO
        # LMCache and SGLang always assign it (from eic_trans_type); kvport's own default is AUTO.
        self.transport_type: int = TransportType.TRANSPORT_AUTO
        self.flag_file: Optional[str] = None
        self.multi_net_local_interface_names: Optional[str] = ""


class MemoryInfo:
    __slots__ = ("type", "cuda_id")

    def __init__(self) -> None:
        self.type: int = MemoryType.MEMORY_DEFAULT
        self.cuda_id: int = 0


class StringVector(list):
    """A list of str keys."""

    def append(self, key: str) -> None:
        if not isinstance(key, str):
            raise TypeError(f"StringVector holds str, not {type(key).__name__}")
        super().append(key)

    def extend(self, keys) -> None:
        for key in keys:
            self.append(key)


class IOBuffers(list):
    """Caller memory, one (pointer, size, registered) entry per key."""

    def append(self, ptr: int, size: int, registered: bool = False) -> None:  # type: ignore[override]
        if not isinstance(ptr, int) or not isinstance(size, int) or ptr < 0 or size < 0:
            raise TypeError("IOBuffers.append(ptr: int >= 0, size: int >= 0, registered: bool)")
        super().append((ptr, size, bool(registered)))


class Outcome:
    """status_codes: one StatusCode per key, in key order (the authority); error: the first
    failure's reason, for logs ("" when none)."""
    __slots__ = ("status_codes", "error")

    def __init__(self, status_codes: List[StatusCode], error: str = "") -> None:
        self.status_codes = status_codes
        self.error = error

    def __repr__(self) -> str:
        return f"Outcome({[c.name for c in self.status_codes]})"


# --- Overall status rules (what LMCache and SGLang depend on) ----------------------------------

def _overall_all_or_some(codes: Sequence[StatusCode]) -> StatusCode:
    """mset / mget: SUCCESS only when every key succeeded; FAILED when none did."""
    hits = sum(1 for c in codes if c == StatusCode.SUCCESS)
    if hits == len(codes):
        return StatusCode.SUCCESS
    return StatusCode.FAILED if hits == 0 else StatusCode.PARTIAL_FAILED


def _overall_probe(codes: Sequence[StatusCode]) -> StatusCode:
    """mexist / mdel: absence is an answer, not a failure: SUCCESS unless a key failed."""
    failed = sum(1 for c in codes if c not in (StatusCode.SUCCESS, StatusCode.KEY_NOT_EXIST))
    if failed == 0:
        return StatusCode.SUCCESS
    return StatusCode.FAILED if failed == len(codes) else StatusCode.PARTIAL_FAILED


def _codes(raw_codes: Sequence[int]) -> List[StatusCode]:
    return [_FROM_KEY_CODE[c] for c in raw_codes]


# --- Reading and writing small values in caller buffers (K_meta folding) -----------------------

def _raw(item: Any) -> Optional[Tuple[int, int]]:
    """(address, size) of a (pointer, size[, registered]) tuple or a tensor; None otherwise."""
    if isinstance(item, tuple):
        return int(item[0]), int(item[1])
    if hasattr(item, "data_ptr"):
        size = item.nbytes if hasattr(item, "nbytes") else item.numel() * item.element_size()
        return int(item.data_ptr()), int(size)
    return None


def _host(item: Any) -> bool:
    """Whether the object's memory is host memory (a device tensor's is not: never read or
    written here; the bindings refuse it)."""
    return _core.device_of(item) is None


def _read_bytes(item: Any) -> bytes:
    raw = _raw(item)
    if raw is None:
        return bytes(memoryview(item))
    return ctypes.string_at(raw[0], raw[1]) if raw[1] else b""


def _write_bytes(item: Any, data: bytes) -> None:
    raw = _raw(item)
    if raw is None:
        memoryview(item).cast("B")[:len(data)] = data
    else:
        ctypes.memmove(raw[0], data, len(data))


def _capacity(item: Any) -> int:
    raw = _raw(item)
    return memoryview(item).nbytes if raw is None else raw[1]


def _region(item: Any) -> Tuple[int, int]:
    raw = _raw(item)
    if raw is not None:
        return raw
    view = memoryview(item)
    if view.readonly or view.nbytes == 0:
        return 0, view.nbytes
    return ctypes.addressof(ctypes.c_char.from_buffer(view)), view.nbytes


def _unassigned_ns(core, lmcache_config: Optional[dict]) -> Tuple[Optional[str], str]:
    """(namespace, where it came from) that an unassigned ns means while the client has named
    none: the token's, else KVPORT_EIC_NS, else an LMCache engine's eic_kv_ns, else (None, "")
    for any namespace the token may read."""
    env = os.environ.get(_NS_ENV)
    token_ns = core.default_namespace
    if token_ns is not None:
        if env is not None and env != token_ns:
            _log.warning("eic: %s=%r is ignored: the token names namespace %r", _NS_ENV, env,
                         token_ns)
        return token_ns, "the token's namespace"
    if env is not None:
        return env, _NS_ENV
    lmcache_ns = _lmcache_eic_namespace(lmcache_config)
    if lmcache_ns is not None:
        return lmcache_ns, "eic_kv_ns of LMCACHE_CONFIG_FILE"
    return None, ""


def _meta_base(key: str) -> Optional[str]:
    return key[:-len(_META_SUFFIX)] if key.endswith(_META_SUFFIX) and len(key) > 5 else None


class Client:
    """An EIC client over one kvport node. Thread-safe after init; no close is needed (the
    connections close when the object is collected, and none keeps the interpreter alive)."""

    def __init__(self) -> None:
        self._core: Optional[_core.Client] = None
        self._default_ns: Optional[str] = None  # the token's namespace, or KVPORT_EIC_NS
        self._default_source = ""  # which of the two _default_ns is
        # The first namespace an option of this client's calls named (see _namespace), and
        # whether naming a different one later was logged.
        self._named_ns: Optional[str] = None
        self._named_another = False
        self._lock = threading.Lock()
        self._regions: List[Tuple[int, int, int, int]] = []  # (ptr, size, type, cuda_id)
        self._managed: dict = {}  # ptr -> (mmap, exported c_char)

    # --- init ----------------------------------------------------------------------------------

    @_forwarding_log
    def init(self, instance_id: Optional[str], endpoint: str, init_option: InitOption) -> int:
        """0 on success; otherwise kvport's status number (InvalidArgument 1, Unavailable 5,
        NotSupported 9, ...) with the reason logged at ERROR on the "eic" logger."""
        option = init_option if init_option is not None else InitOption()
        _route_log(option)
        core = _core.Client()
        try:
            # log_dir is the eic logger's (_route_log), not the C++ client's.
            # SGLang's NIC affinity names the local interfaces: each becomes a UCX lane.
            lanes = [name.strip() for name in (option.multi_net_local_interface_names or "")
                     .split(",") if name.strip()]
            core.init(instance_id or "", endpoint or "",
                      transport_type=int(option.transport_type), log_dir="",
                      log_level=int(option.log_level), flag_file=option.flag_file or "",
                      ucx_devices=lanes)
        except kvport.Error as e:
            _log.error("eic init(%r, %r) failed: %s", instance_id, endpoint, e)
            return e.number
        lmcache_config = _lmcache_config()
        with self._lock:
            if self._core is not None:
                _log.error("eic init called twice on one Client")
                return _INVALID_ARGUMENT
            self._core = core
            self._default_ns, self._default_source = _unassigned_ns(core, lmcache_config)
            named = self._named_ns
        if named is not None:
            rule = f"; an unassigned ns means {named!r} (the namespace this client named)"
        elif self._default_ns is not None:
            rule = (f"; an unassigned ns means {self._default_ns!r} ({self._default_source}) "
                    f"until a call names one")
        else:
            rule = "; an unassigned ns matches any namespace until a call names one"
        _log.info("eic: connected to %s over %s (%s)%s", core.endpoint, core.transport,
                  core.transport_reason, rule)
        _warn_per_process_chunk_hash(lmcache_config)
        return 0

    def _option(self, option: Optional[_NsOption], kind: type) -> _NsOption:
        """The call's option (a fresh, unassigned one for None). An assigned ns names a
        namespace for this client: the first one named is what its unassigned options mean
        from then on (_namespace), because an engine configured with one namespace assigns it
        on some calls (puts, gets) and not on others (probes, deletes), and those must stay in
        it without any setting beside the engine's own."""
        if option is None:
            return kind()
        ns = option._ns
        if ns is not None and ns != self._named_ns and not self._named_another:
            self._note_named(ns)
        return option

    def _note_named(self, ns: str) -> None:
        with self._lock:
            first = self._named_ns is None
            if first:
                self._named_ns = ns
            elif self._named_another or ns == self._named_ns:
                return  # logged already, or another thread named the same one first
            else:
                self._named_another = True
            named, default, source = self._named_ns, self._default_ns, self._default_source
        if not first:
            # Following the latest name would let calls that name none move between
            # namespaces with the order of other threads' calls; the first one is kept.
            _log.warning("eic: this client named namespace %r after %r: an unassigned ns "
                         "still means %r", ns, named, named)
        elif default is not None and default != ns:
            _log.warning("eic: this client named namespace %r: an unassigned ns now means it, "
                         "not %r (%s)", ns, default, source)
        else:
            _log.info("eic: this client named namespace %r: an unassigned ns now means it", ns)

    def _namespace(self, option: _NsOption) -> Tuple[str, bool]:
        """(namespace, any namespace?) of an option: see the module doc."""
        if option._ns is not None:
            return option._ns, False
        named = self._named_ns
        if named is not None:
            return named, False
        if self._default_ns is not None:
            return self._default_ns, False
        return "", True

    def _ready(self, op: str) -> Optional[_core.Client]:
        if self._core is None:
            _log.error("eic %s called before a successful init", op)
        return self._core

    # --- mset ----------------------------------------------------------------------------------

    @_forwarding_log
    def mset(self, keys, vals, set_option: Optional[SetOption] = None):
        """(status, outcome). Each value is replaced atomically; see the module doc for the
        K / K_meta pair."""
        keys = list(keys)
        vals = list(vals)
        if len(keys) != len(vals):
            raise ValueError(f"mset: {len(keys)} keys but {len(vals)} values")
        option = self._option(set_option, SetOption)
        core = self._ready("mset")
        if core is None or not keys:
            return self._failed_or_empty(core, len(keys), _overall_all_or_some)

        # Fold each K_meta whose K is in the same call into K's meta blob.
        position = {key: i for i, key in enumerate(keys)}
        folded = {}  # meta position -> data position
        for i, key in enumerate(keys):
            base = _meta_base(key)
            j = position.get(base) if base is not None else None
            if j is not None and _host(vals[i]) and _capacity(vals[i]) <= _META_FOLD_MAX:
                folded[i] = j
        sent = [i for i in range(len(keys)) if i not in folded]
        metas = None
        if folded:
            blob = {j: _read_bytes(vals[i]) for i, j in folded.items()}
            metas = [blob.get(i, b"") for i in sent]
        try:
            status, raw, error = core.mset([keys[i] for i in sent], [vals[i] for i in sent],
                                           self._namespace(option)[0], int(option.ttl_second),
                                           metas, 0)
        except kvport.Error as e:
            return self._call_failed("mset", e, len(keys), _overall_all_or_some)
        codes: List[StatusCode] = [StatusCode.FAILED] * len(keys)
        for n, i in enumerate(sent):
            codes[i] = _FROM_KEY_CODE[raw[n]]
        for i, j in folded.items():
            codes[i] = codes[j]
        if error:
            _log.debug("eic mset: %s", error)
        return _overall_all_or_some(codes), Outcome(codes, error)

    # --- mget ----------------------------------------------------------------------------------

    @_forwarding_log
    def mget(self, keys, get_option: Optional[GetOption] = None, vals=None):
        """(status, vals, outcome): value i is read into vals[i]. With vals None the values
        come back as a list of bytes (None per miss)."""
        keys = list(keys)
        option = self._option(get_option, GetOption)
        core = self._ready("mget")
        new_values = vals is None
        if core is not None and new_values and keys:
            try:  # sizes first, then buffers of those sizes
                sizes = core.mget_meta(keys, *self._namespace(option), 0)[2]
            except kvport.Error as e:
                status, outcome = self._call_failed("mget", e, len(keys), _overall_all_or_some)
                return status, [None] * len(keys), outcome
            # Sizes come from the node: one past _NEW_VALUE_MAX gets no buffer (and so reads
            # as BUFFER_TOO_SMALL) instead of an allocation a node could make arbitrarily big.
            sizes = [n if n <= _NEW_VALUE_MAX else 0 for n in sizes]
            vals = [bytearray(max(n, _META_FOLD_MAX) if _meta_base(k) else n)
                    for k, n in zip(keys, sizes)]
        buffers = list(vals) if vals is not None else []
        if len(keys) != len(buffers):
            raise ValueError(f"mget: {len(keys)} keys but {len(buffers)} buffers")
        if core is None or not keys:
            status, outcome = self._failed_or_empty(core, len(keys), _overall_all_or_some)
            return status, vals, outcome
        try:
            codes, sizes, error = self._mget_into(core, keys, buffers, option,
                                                  exact=not new_values)
        except kvport.Error as e:
            status, outcome = self._call_failed("mget", e, len(keys), _overall_all_or_some)
            return status, vals, outcome
        if new_values:
            vals = [bytes(b[:n]) if c == StatusCode.SUCCESS else None
                    for b, n, c in zip(buffers, sizes, codes)]
        return _overall_all_or_some(codes), vals, Outcome(codes, error)

    def _mget_into(self, core, keys: List[str], buffers: List[Any], option: GetOption,
                   exact: bool):
        """(codes, stored sizes, error) of reading keys into buffers; exact: a value smaller
        than its buffer is SIZE_MISMATCH (caller buffers; not those sized from the node)."""
        ns, anywhere = self._namespace(option)
        codes: List[Optional[StatusCode]] = [None] * len(keys)
        sizes = [0] * len(keys)
        for i, meta in self._folded_metas(core, keys, ns, anywhere).items():
            if not _host(buffers[i]):
                continue  # left to the bindings, which refuse device memory they cannot stage
            sizes[i] = len(meta)
            if len(meta) > _capacity(buffers[i]):
                codes[i] = StatusCode.BUFFER_TOO_SMALL
            elif exact and len(meta) < _capacity(buffers[i]):
                codes[i] = StatusCode.SIZE_MISMATCH
            else:
                _write_bytes(buffers[i], meta)
                codes[i] = StatusCode.SUCCESS
        rest = [i for i, c in enumerate(codes) if c is None]
        error = ""
        if rest:
            _, raw, raw_sizes, _, error = core.mget([keys[i] for i in rest],
                                                    [buffers[i] for i in rest], ns, anywhere, 0)
            for n, i in enumerate(rest):
                codes[i] = _FROM_KEY_CODE[raw[n]]
                sizes[i] = raw_sizes[n]
                if (exact and codes[i] == StatusCode.SUCCESS
                        and raw_sizes[n] < _capacity(buffers[i])):
                    codes[i] = StatusCode.SIZE_MISMATCH
        return codes, sizes, error

    def _folded_metas(self, core, keys: List[str], ns: str, anywhere: bool) -> dict:
        """{position: meta blob} for the K_meta keys whose K carries a meta blob."""
        positions = [i for i, k in enumerate(keys) if _meta_base(k) is not None]
        if not positions:
            return {}
        _, raw, _, metas, _ = core.mget_meta([_meta_base(keys[i]) for i in positions], ns,
                                             anywhere, 0)
        return {i: metas[n] for n, i in enumerate(positions) if raw[n] == 0 and metas[n]}

    # --- mexist / mdel -------------------------------------------------------------------------

    @_forwarding_log
    def mexist(self, keys, exist_option: Optional[ExistOption] = None):
        """(status, outcome): overall SUCCESS whenever the probe worked, per key SUCCESS or
        KEY_NOT_EXIST."""
        keys = list(keys)
        option = self._option(exist_option, ExistOption)
        core = self._ready("mexist")
        if core is None or not keys:
            return self._failed_or_empty(core, len(keys), _overall_probe)
        ns, anywhere = self._namespace(option)
        codes: List[Optional[StatusCode]] = [None] * len(keys)
        error = ""
        try:
            for i in self._folded_metas(core, keys, ns, anywhere):
                codes[i] = StatusCode.SUCCESS
            rest = [i for i, c in enumerate(codes) if c is None]
            if rest:
                _, raw, error = core.mexist([keys[i] for i in rest], ns, anywhere, 0)
                for n, i in enumerate(rest):
                    codes[i] = _FROM_KEY_CODE[raw[n]]
        except kvport.Error as e:
            return self._call_failed("mexist", e, len(keys), _overall_probe)
        return _overall_probe(codes), Outcome(codes, error)

    @_forwarding_log
    def mdel(self, keys, del_option: Optional[DelOption] = None):
        """(status, outcome): per key SUCCESS (deleted) or KEY_NOT_EXIST; overall SUCCESS
        unless a key failed. Deleting K_meta whose meta is folded into K deletes K (the pair
        is one object)."""
        keys = list(keys)
        option = self._option(del_option, DelOption)
        core = self._ready("mdel")
        if core is None or not keys:
            return self._failed_or_empty(core, len(keys), _overall_probe)
        ns, anywhere = self._namespace(option)
        try:
            pair_bases = {}  # meta position -> position of its K in the sent list
            sent = list(keys)
            in_call = {k: i for i, k in enumerate(keys)}
            for i in self._folded_metas(core, keys, ns, anywhere):
                base = _meta_base(keys[i])
                if base not in in_call:
                    in_call[base] = len(sent)
                    sent.append(base)
                pair_bases[i] = in_call[base]
            _, raw, error = core.mdel(sent, ns, anywhere, 0)
        except kvport.Error as e:
            return self._call_failed("mdel", e, len(keys), _overall_probe)
        codes = _codes(raw[:len(keys)])
        for i, j in pair_bases.items():
            if codes[i] == StatusCode.KEY_NOT_EXIST:
                codes[i] = _FROM_KEY_CODE[raw[j]]
        return _overall_probe(codes), Outcome(codes, error)

    # --- memory --------------------------------------------------------------------------------

    def register_memory(self, vals, meminfo: Optional[MemoryInfo] = None) -> bool:
        """Records the regions (True), never touching, pinning or copying them; False for a
        null or empty region. The declared type is kept for the record only."""
        kind = int(meminfo.type) if meminfo is not None else 0
        device = int(meminfo.cuda_id) if meminfo is not None else 0
        regions = []
        for entry in vals:
            pointer, size = _region(entry)
            if pointer == 0 or size == 0:
                _log.error("eic register_memory: region (%#x, %d) is null or empty", pointer, size)
                return False
            regions.append((pointer, size, kind, device))
        with self._lock:
            self._regions.extend(regions)
        _log.debug("eic register_memory: %d region(s), %d bytes", len(regions),
                   sum(r[1] for r in regions))
        return True

    def registered_regions(self) -> List[Tuple[int, int, int, int]]:
        """kvport extension: (pointer, size, type, cuda_id) of every registered region."""
        with self._lock:
            return list(self._regions)

    def allocate_managed_buffer(self, size: int) -> int:
        """Page-aligned, zeroed host memory owned by this client (0 on failure)."""
        try:
            region = mmap.mmap(-1, size)
        except (OSError, ValueError) as e:
            _log.error("eic allocate_managed_buffer(%d): %s", size, e)
            return 0
        exported = ctypes.c_char.from_buffer(region)
        pointer = ctypes.addressof(exported)
        with self._lock:
            self._managed[pointer] = (region, exported)
        return pointer

    def free_managed_buffer(self, ptr: int, size: int = 0) -> None:
        with self._lock:
            entry = self._managed.pop(ptr, None)
        if entry is None:
            _log.error("eic free_managed_buffer: %#x was not allocated by this client", ptr)
            return
        region = entry[0]
        entry = None  # drops the ctypes export, which would keep the mapping open
        region.close()

    # --- failures ------------------------------------------------------------------------------

    @staticmethod
    def _failed_or_empty(core, n: int, overall):
        if core is None:
            return StatusCode.FAILED, Outcome([StatusCode.FAILED] * n, "not initialized")
        return overall([]), Outcome([])

    @staticmethod
    def _call_failed(op: str, e: "kvport.Error", n: int, overall):
        _log.error("eic %s failed: %s", op, e)
        code = _FROM_ERROR.get(e.code, StatusCode.FAILED)
        codes = [code] * n
        return (overall(codes) if n else StatusCode.FAILED), Outcome(codes, str(e))
