# SPDX-License-Identifier: Apache-2.0
"""Make LMCache's EIC connector constructible on hosts without the CUDA runtime.

LMCache cores of the v0.4.4 era construct ``EICConnector`` like this::

    self.cuda_lib = ctypes.CDLL("libcudart.so")
    self.cuda_lib.cudaMemcpy.argtypes = [...]
    self.cuda_lib.cudaMemcpy.restype = self.cudaError_t

On a host without libcudart (an Ascend CANN image, a CPU-only machine) that raises
``OSError`` before any ``eic`` call, so ``remote_url: eic://...`` cannot be used even with
``eic_trans_type: 2`` (RDMA) or 1 (TCP), which never call ``cudaMemcpy``.

:func:`patch` replaces the *connector module's* ``ctypes`` name with a guarded proxy. The
proxy delegates every attribute to the module it replaces; only its ``CDLL`` is wrapped, and
only a lookup of the CUDA runtime by its bare soname (``libcudart.so``, ``libcudart.so.12``,
...) that raises ``OSError`` is answered with a stand-in whose ``cudaMemcpy`` (and any other
``cuda*`` function) raises :class:`CudaRuntimeUnavailableError` when called. Everything else,
including a libcudart that does load, goes to the real ``ctypes``. The process-global
``ctypes`` module is never modified, so other threads and other libraries are unaffected.

Cores that define ``_LMCACHE_EIC_CUDART_OPTIONAL`` (LMCache #5141) load libcudart defensively
themselves and reject GPUDirect when it is missing (``cuda_lib is None``). A truthy stand-in
would defeat that check, so :func:`patch` leaves those cores alone.

Use::

    import kvport.lmcache
    kvport.lmcache.patch()      # before LMCache constructs its EICConnector

This module imports nothing from the rest of kvport and nothing outside the standard
library at import time; :func:`patch` imports the LMCache connector module (and with it
LMCache, torch and ``eic``) when it is called.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import re
import sys
import threading
import types
from typing import Any, Optional, Tuple

__all__ = [
    "CONNECTOR_MODULES",
    "CudaRuntimeUnavailableError",
    "GuardedCtypes",
    "is_patched",
    "patch",
]

logger = logging.getLogger("kvport.lmcache")

#: Where LMCache keeps its EIC connector. The first is the module of the v0.4.4-era cores
#: and later (#5141); the second is the package form of the original PR (#1930),
#: whose ``__init__`` re-exports ``EICConnector`` from the submodule. :func:`patch` imports
#: the first and follows ``EICConnector.__module__`` to the module that defines the class,
#: so both layouts are handled.
CONNECTOR_MODULES: Tuple[str, ...] = (
    "lmcache.v1.storage_backend.connector.eic_connector",
    "lmcache.v1.storage_backend.connector.eic_connector.eic_connector",
)

_CONNECTOR = CONNECTOR_MODULES[0]

# Name of the capability marker of cores that load libcudart defensively (LMCache #5141).
_CORE_MARKER = "_LMCACHE_EIC_CUDART_OPTIONAL"
# Idempotency marker set on the patched connector module.
_PATCHED_MARKER = "_kvport_lmcache_patched"
# Marker LMCache-Ascend's own EIC patch sets on the connector module.
_ASCEND_MARKER = "_lmcache_ascend_eic_patched"

# The CUDA runtime by its bare soname, optionally versioned: libcudart.so, libcudart.so.12,
# libcudart.so.12.4. Paths and other libraries are not matched.
_CUDART_NAME = re.compile(r"libcudart\.so(\.[0-9]+)*")

_lock = threading.RLock()  # re-entrant: a module imported by the connector may call patch()


class CudaRuntimeUnavailableError(RuntimeError):
    """A CUDA runtime function was called, but libcudart could not be loaded."""


def _is_cudart_name(name: Any) -> bool:
    if isinstance(name, os.PathLike):
        name = os.fspath(name)
    return isinstance(name, str) and _CUDART_NAME.fullmatch(name) is not None


class _MissingCudaFunction:
    """Stands in for one libcudart function. Accepts ``argtypes``/``restype``/``errcheck``
    assignments as a ctypes function does; calling it raises."""

    def __init__(self, symbol: str, libname: str, reason: str) -> None:
        self.__name__ = symbol
        self._libname = libname
        self._reason = reason
        self.argtypes = None
        self.restype = None
        self.errcheck = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise CudaRuntimeUnavailableError(
            f"GPUDirect needs the CUDA runtime: {self.__name__} was called, but "
            f"{self._libname} could not be loaded on this host ({self._reason}). "
            "Use eic_trans_type: 2 (RDMA) or 1 (TCP) in the LMCache config, or install "
            "the CUDA runtime. (Stand-in installed by kvport.lmcache.patch().)"
        )

    def __repr__(self) -> str:
        return f"<kvport.lmcache stand-in for {self._libname}:{self.__name__} (not loaded)>"


class _CudaRuntimeShim:
    """Returned for ``CDLL("libcudart.so")`` when that raises ``OSError``. Every ``cuda*``
    attribute is a :class:`_MissingCudaFunction` (the same object on each access, so the
    connector's ``argtypes``/``restype`` assignments stick); other attributes raise
    ``AttributeError`` as a real ``CDLL`` does for an unknown symbol."""

    def __init__(self, libname: str, error: OSError) -> None:
        self._name = libname
        self._reason = f"{type(error).__name__}: {error}"
        self._functions: dict = {}
        self._functions_lock = threading.Lock()

    def __getattr__(self, symbol: str) -> Any:
        state = self.__dict__
        if not symbol.startswith("cuda") or "_functions" not in state:
            raise AttributeError(
                f"{state.get('_name', 'libcudart')} is not loaded (kvport.lmcache stand-in); "
                f"no symbol {symbol!r}"
            )
        with state["_functions_lock"]:
            fn = state["_functions"].get(symbol)
            if fn is None:
                fn = _MissingCudaFunction(symbol, state["_name"], state["_reason"])
                state["_functions"][symbol] = fn
            return fn

    def __getitem__(self, symbol: str) -> Any:
        return self.__getattr__(symbol)

    def __repr__(self) -> str:
        return f"<kvport.lmcache stand-in for {self._name} (not loaded: {self._reason})>"


class GuardedCtypes(types.ModuleType):
    """A ``ctypes`` look-alike installed as one module's ``ctypes`` name.

    Every attribute not defined here is read from ``real`` at the time of the access (the
    proxy keeps no copies). ``CDLL(name, ...)`` calls ``real.CDLL(name, ...)``; when that
    raises ``OSError`` and ``name`` is the bare soname of the CUDA runtime, the result is a
    stand-in whose ``cuda*`` functions raise :class:`CudaRuntimeUnavailableError` when
    called. Any other failure is re-raised unchanged. ``CDLL`` here is a function, not the
    class: ``isinstance(x, proxy.CDLL)`` does not work (the connector never does that).
    """

    def __init__(self, real: Any) -> None:
        super().__init__(getattr(real, "__name__", "ctypes"), getattr(real, "__doc__", None))
        # ModuleType attributes are stored in the instance __dict__ and shadow __getattr__.
        object.__setattr__(self, "_kvport_real_ctypes", real)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_kvport_real_ctypes"), name)

    def __dir__(self) -> list:
        return sorted(set(dir(self._kvport_real_ctypes)) | set(self.__dict__))

    def __repr__(self) -> str:
        return f"<kvport.lmcache guarded proxy of {self._kvport_real_ctypes!r}>"

    def CDLL(self, name: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 (ctypes name)
        try:
            return self._kvport_real_ctypes.CDLL(name, *args, **kwargs)
        except OSError as error:
            if not _is_cudart_name(name):
                raise
            libname = os.fspath(name)
            logger.warning(
                "%s could not be loaded (%s); LMCache's EICConnector gets a stand-in whose "
                "CUDA functions raise if called. RDMA/TCP (eic_trans_type 2/1) work; "
                "GPUDirect (eic_trans_type 3) does not.",
                libname,
                error,
            )
            return _CudaRuntimeShim(libname, error)


def _find_connector() -> Tuple[Optional[types.ModuleType], str]:
    """Import LMCache's EIC connector; return (module defining EICConnector, "") or
    (None, reason for skipping)."""
    try:
        present = importlib.util.find_spec("lmcache") is not None
    except ValueError:  # in sys.modules without a __spec__: present
        present = True
    if not present:
        return None, "skipped: lmcache not installed"
    try:
        imported = importlib.import_module(_CONNECTOR)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if missing == "lmcache":
            return None, "skipped: lmcache not installed"
        if missing and (_CONNECTOR == missing or _CONNECTOR.startswith(missing + ".")):
            return None, f"skipped: this LMCache has no EIC connector ({error})"
        return None, f"skipped: LMCache's EIC connector cannot be imported ({error})"
    except ImportError as error:
        return None, f"skipped: LMCache's EIC connector cannot be imported ({error})"

    # Follow the class to the module whose globals its __init__ reads (the submodule in
    # the package layout of PR #1930).
    cls = getattr(imported, "EICConnector", None)
    target = imported
    if cls is not None:
        defining = sys.modules.get(getattr(cls, "__module__", "") or "")
        if defining is not None:
            target = defining
    return target, ""


def patch() -> str:
    """Install the guarded ``ctypes`` proxy on LMCache's EIC connector module if it needs it.

    Returns what was done, and logs it (logger ``kvport.lmcache``):

    * ``"patched"``: the proxy was installed on the module that defines ``EICConnector``.
    * ``"already patched"``: an earlier call installed it.
    * ``"not needed: core has _LMCACHE_EIC_CUDART_OPTIONAL"``: the core loads libcudart
      defensively itself; nothing is touched.
    * ``"not needed: already patched by lmcache_ascend"``: LMCache-Ascend's own EIC patch
      is in place; nothing is touched.
    * ``"skipped: lmcache not installed"``, ``"skipped: this LMCache has no EIC connector
      (...)"``, ``"skipped: <module> has no module-level ctypes"``: nothing to patch.
    * ``"skipped: LMCache's EIC connector cannot be imported (<ImportError>)"``: LMCache is
      installed but importing the connector failed (e.g. no ``eic`` module); logged as a
      warning. Nothing is touched.

    Thread safe and idempotent. Only the connector module's ``ctypes`` attribute and the
    ``_kvport_lmcache_patched`` marker on it are changed. Exceptions other than
    ``ImportError`` raised while importing the connector propagate.
    """
    with _lock:
        result = _patch_locked()
    if result == "patched":
        logger.info("kvport.lmcache: %s", result)
    elif result.startswith("skipped: LMCache's EIC connector cannot be imported"):
        # LMCache is there but its connector did not import: the patch could not be applied.
        logger.warning("kvport.lmcache: %s", result)
    else:
        logger.debug("kvport.lmcache: %s", result)
    return result


def _patch_locked() -> str:
    module, reason = _find_connector()
    if module is None:
        return reason
    if getattr(module, _CORE_MARKER, False):
        return f"not needed: core has {_CORE_MARKER}"
    current = module.__dict__.get("ctypes")
    if isinstance(current, GuardedCtypes) or getattr(module, _PATCHED_MARKER, False):
        return "already patched"
    if getattr(module, _ASCEND_MARKER, False):
        return "not needed: already patched by lmcache_ascend"
    if current is None:
        return f"skipped: {module.__name__} has no module-level ctypes"
    module.ctypes = GuardedCtypes(current)
    setattr(module, _PATCHED_MARKER, True)
    return "patched"


def is_patched() -> bool:
    """Whether the EIC connector module already imported in this process carries the proxy.
    Imports nothing."""
    for name in CONNECTOR_MODULES:
        module = sys.modules.get(name)
        if module is not None and isinstance(module.__dict__.get("ctypes"), GuardedCtypes):
            return True
    return False
