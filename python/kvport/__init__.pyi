# SPDX-License-Identifier: Apache-2.0
# Type stubs for kvport (docs/python.md is the reference). python/tests/test_stubs.py checks that
# they name every public name, class member and instance attribute of the module.

import enum
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Type, Union

__version__: str

# A buffer: any C-contiguous buffer-protocol object (bytes for puts only, bytearray, memoryview,
# array.array, numpy arrays), a (pointer, size) or (pointer, size, registered) tuple, or a tensor
# (data_ptr() and nbytes). Device tensors must lie in memory passed to Client.register_memory.
_Buffer = Any

class Error(Exception):
    code: str
    message: str
    number: int
    def __init__(self, code: str, message: str, number: int = ...) -> None: ...

class BatchCode(enum.IntEnum):
    SUCCESS = 0
    PARTIAL_FAILED = 1
    FAILED = 2

class KeyCode(enum.IntEnum):
    SUCCESS = 0
    KEY_NOT_EXIST = 1
    NO_SPACE = 2
    TOO_LARGE = 3
    BUFFER_TOO_SMALL = 4
    INVALID_ARGUMENT = 5
    UNAVAILABLE = 6
    TIMEOUT = 7
    DEVICE_ERROR = 8
    FAILED = 9
    PERMISSION_DENIED = 10

class TransportType(enum.IntEnum):
    AUTO = 0
    TCP = 1
    RDMA = 2
    GDR = 3

class MemoryKind(enum.IntEnum):
    HOST = 0
    CUDA = 1
    ASCEND = 2

@dataclass
class BatchResult:
    status: BatchCode
    codes: List[KeyCode]
    error: str = ...
    @property
    def ok(self) -> bool: ...

@dataclass
class GetResult(BatchResult):
    value_sizes: List[int] = ...
    metas: List[bytes] = ...

class Client:
    def __init__(
        self,
        endpoint: str,
        *,
        instance_id: str = ...,
        transport_type: Union[TransportType, int] = ...,
        connections: int = ...,
        timeout: float = ...,
        connect_timeout: float = ...,
        staging_cache_bytes: int = ...,
        cuda_runtime_library: str = ...,
        ascend_runtime_library: str = ...,
        log_dir: str = ...,
        log_level: int = ...,
        flag_file: str = ...,
        token: str = ...,
        token_file: str = ...,
        replicas: int = ...,
        write_quorum: int = ...,
        busy_poll_us: int = ...,
        tls_ca_file: str = ...,
        tls_cert_file: str = ...,
        tls_key_file: str = ...,
        tls_verify_hostname: bool = ...,
        ucx_devices: Sequence[str] = ...,
        checksums: bool = ...,
        unchecked_namespaces: Sequence[str] = ...,
    ) -> None: ...
    def mset(
        self,
        keys: Iterable[Union[str, bytes]],
        values: Sequence[_Buffer],
        *,
        ns: str = ...,
        ttl: int = ...,
        metas: Optional[Sequence[bytes]] = ...,
        timeout: float = ...,
    ) -> BatchResult: ...
    def mget(
        self,
        keys: Iterable[Union[str, bytes]],
        buffers: Sequence[_Buffer],
        *,
        ns: Optional[str] = ...,
        timeout: float = ...,
    ) -> GetResult: ...
    def mget_in_place(
        self, keys: Iterable[Union[str, bytes]], *, ns: Optional[str] = ..., timeout: float = ...
    ) -> Lent: ...
    def mget_meta(
        self, keys: Iterable[Union[str, bytes]], *, ns: Optional[str] = ..., timeout: float = ...
    ) -> GetResult: ...
    def mexist(
        self, keys: Iterable[Union[str, bytes]], *, ns: Optional[str] = ..., timeout: float = ...
    ) -> BatchResult: ...
    def mdel(
        self, keys: Iterable[Union[str, bytes]], *, ns: Optional[str] = ..., timeout: float = ...
    ) -> BatchResult: ...
    def list(
        self, ns: str = ..., cursor: int = ..., max_keys: int = ...
    ) -> Tuple[List[str], int]: ...
    def stats(self) -> dict[str, Any]: ...
    def stats_per_node(self) -> List[dict[str, Any]]: ...
    @property
    def is_cluster(self) -> bool: ...
    def ping(self) -> None: ...
    def register_memory(
        self, buffers: Sequence[_Buffer], kind: Union[MemoryKind, int] = ..., device_id: int = ...
    ) -> None: ...
    def unregister_memory(self, buffers: Sequence[_Buffer]) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> Client: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None: ...
    @property
    def transport(self) -> str: ...
    @property
    def transport_reason(self) -> str: ...
    @property
    def checksum_mismatches(self) -> int: ...
    @property
    def default_namespace(self) -> Optional[str]: ...
    @property
    def endpoint(self) -> str: ...

class Lent:
    result: GetResult
    def __init__(self, core: Any) -> None: ...
    def __len__(self) -> int: ...
    def value(self, index: int) -> Optional[memoryview]: ...
    @property
    def valid(self) -> bool: ...
    def release(self) -> None: ...
    def __enter__(self) -> Lent: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None: ...

def parse_size(size: Union[int, str]) -> int: ...

class Server:
    def __init__(
        self,
        capacity: Union[int, str] = ...,
        *,
        threads: int = ...,
        listen: str = ...,
        unix_socket: str = ...,
        shared_memory: bool = ...,
        max_leases_per_session: int = ...,
        max_reservations_per_session: int = ...,
        max_value_bytes: Union[int, str] = ...,
        max_key_bytes: int = ...,
        max_meta_bytes: int = ...,
        max_batch_keys: int = ...,
        tokens_file: str = ...,
        insecure: bool = ...,
        cluster: str = ...,
        etcd: Union[str, Sequence[str]] = ...,
        advertise: str = ...,
        node_id: str = ...,
        lease_ttl_secs: int = ...,
        tls_cert_file: str = ...,
        tls_key_file: str = ...,
        tls_ca_file: str = ...,
        busy_poll_us: int = ...,
        ucx: bool = ...,
    ) -> None: ...
    def reload_tokens(self) -> None: ...
    @property
    def address(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def url(self) -> str: ...
    @property
    def unix_socket_path(self) -> str: ...
    @property
    def epoch(self) -> int: ...
    @property
    def running(self) -> bool: ...
    def stats(self) -> dict[str, Any]: ...
    def stop(self) -> None: ...
    def __enter__(self) -> Server: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None: ...

def config_check(path: Optional[str] = ...) -> dict[str, Any]: ...
def doctor(
    cuda_runtime_library: str = ..., ascend_runtime_library: str = ..., ucx_library: str = ...
) -> dict[str, Any]: ...
