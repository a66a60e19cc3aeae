# SPDX-License-Identifier: Apache-2.0
# Type stubs for kvport.lmcache (docs/python.md, "The LMCache patch"). python/tests/test_stubs.py
# checks that they name every public name, class member and instance attribute of the module.

import logging
import types
from typing import Any, Tuple

logger: logging.Logger
CONNECTOR_MODULES: Tuple[str, ...]

class CudaRuntimeUnavailableError(RuntimeError): ...

class GuardedCtypes(types.ModuleType):
    def __init__(self, real: Any) -> None: ...
    def __getattr__(self, name: str) -> Any: ...
    def CDLL(self, name: Any, *args: Any, **kwargs: Any) -> Any: ...

def patch() -> str: ...
def is_patched() -> bool: ...
