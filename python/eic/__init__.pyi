# SPDX-License-Identifier: Apache-2.0
# Type stubs for kvport's eic drop-in (docs/python.md, "The eic drop-in", is the reference).
# python/tests/test_stubs.py checks that they name every public name, class member and instance
# attribute of the module.

import enum
from typing import Any, Iterable, List, Optional, Sequence, Tuple, TypeVar, Union

_Buffers = TypeVar("_Buffers")

class StatusCode(enum.IntEnum):
    SUCCESS = 0
    KEY_NOT_EXIST = 1
    PARTIAL_FAILED = 2
    FAILED = 3
    NO_SPACE = 10
    TOO_LARGE = 11
    BUFFER_TOO_SMALL = 12
    INVALID_ARGUMENT = 13
    UNAVAILABLE = 14
    TIMEOUT = 15
    DEVICE_ERROR = 16
    PERMISSION_DENIED = 17
    SIZE_MISMATCH = 18

class TransportType(enum.IntEnum):
    TRANSPORT_AUTO = 0
    TRANSPORT_TCP = 1
    TRANSPORT_RDMA = 2
    TRANSPORT_GDR = 3

class LogLevel(enum.IntEnum):
    DEBUG = 0
    INFO = 1
    WARNING = 2
    ERROR = 3
    CRITICAL = 4
    OFF = 5

class MemoryType(enum.IntEnum):
    MEMORY_DEFAULT = 0
    MEMORY_CUDA = 1
    MEMORY_NPU = 2

class _NsOption:
    def __init__(self) -> None: ...
    @property
    def ns(self) -> str: ...
    @ns.setter
    def ns(self, value: Optional[str]) -> None: ...

class SetOption(_NsOption):
    ttl_second: int

class GetOption(_NsOption): ...
class ExistOption(_NsOption): ...
class DelOption(_NsOption): ...

class InitOption:
    log_dir: Optional[str]
    log_level: Union[LogLevel, int]
    transport_type: Union[TransportType, int]
    flag_file: Optional[str]
    multi_net_local_interface_names: Optional[str]
    def __init__(self) -> None: ...

class MemoryInfo:
    type: Union[MemoryType, int]
    cuda_id: int
    def __init__(self) -> None: ...

class StringVector(List[str]):
    def append(self, key: str) -> None: ...
    def extend(self, keys: Iterable[str]) -> None: ...

class IOBuffers(List[Tuple[int, int, bool]]):
    def append(  # type: ignore[override]
        self, ptr: int, size: int, registered: bool = ...
    ) -> None: ...

class Outcome:
    status_codes: List[StatusCode]
    error: str
    def __init__(self, status_codes: List[StatusCode], error: str = ...) -> None: ...

class Client:
    def __init__(self) -> None: ...
    def init(self, instance_id: Optional[str], endpoint: str, init_option: InitOption) -> int: ...
    def mset(
        self, keys: Iterable[str], vals: Sequence[Any], set_option: Optional[SetOption] = ...
    ) -> Tuple[StatusCode, Outcome]: ...
    def mget(
        self, keys: Iterable[str], get_option: Optional[GetOption] = ..., vals: _Buffers = ...
    ) -> Tuple[StatusCode, Union[_Buffers, List[Optional[bytes]]], Outcome]: ...
    def mexist(
        self, keys: Iterable[str], exist_option: Optional[ExistOption] = ...
    ) -> Tuple[StatusCode, Outcome]: ...
    def mdel(
        self, keys: Iterable[str], del_option: Optional[DelOption] = ...
    ) -> Tuple[StatusCode, Outcome]: ...
    def register_memory(
        self, vals: Sequence[Any], meminfo: Optional[MemoryInfo] = ...
    ) -> bool: ...
    def registered_regions(self) -> List[Tuple[int, int, int, int]]: ...
    def allocate_managed_buffer(self, size: int) -> int: ...
    def free_managed_buffer(self, ptr: int, size: int = ...) -> None: ...
