# SPDX-License-Identifier: Apache-2.0
# Type stubs for kvport.lmcache_mp (docs/python.md, "LMCache multiprocess mode").
# The class is kvport._core.LMCacheL2Connector (python/src/lmcache_l2_connector.cc).

from typing import Any, List, Optional, Sequence, Tuple, Union

_Key = Union[str, bytes]

class L2Connector:
    def __init__(
        self,
        *,
        endpoint: str,
        namespace: Optional[str] = ...,
        token: str = ...,
        token_file: str = ...,
        transport_type: int = ...,
        connections: int = ...,
        timeout: float = ...,
        connect_timeout: float = ...,
        ttl_seconds: int = ...,
        instance_id: str = ...,
        tls_ca_file: str = ...,
        tls_cert_file: str = ...,
        tls_key_file: str = ...,
        replicas: int = ...,
        write_quorum: int = ...,
        checksums: bool = ...,
    ) -> None: ...
    def event_fd(self) -> int: ...
    def submit_batch_get(self, keys: Sequence[_Key], buffers: Sequence[Any]) -> int: ...
    def submit_batch_set(self, keys: Sequence[_Key], buffers: Sequence[Any]) -> int: ...
    def submit_batch_exists(self, keys: Sequence[_Key]) -> int: ...
    def submit_batch_delete(self, keys: Sequence[_Key]) -> int: ...
    def drain_completions(
        self, codes: bool = ...
    ) -> List[Tuple[int, bool, str, List[Any]]]: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def namespace(self) -> str: ...
    @property
    def transport(self) -> str: ...
    @property
    def endpoint(self) -> str: ...
