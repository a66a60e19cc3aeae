# SPDX-License-Identifier: Apache-2.0
"""Tests of kvport.lmcache.patch(), the guarded-ctypes patch of LMCache's EIC connector.

No LMCache, torch or vendor ``eic`` is needed: every test builds throwaway stand-ins of
LMCache's package tree (bound both in ``sys.modules`` and as attributes of their parent
packages, because ``import a.b.c`` resolves through the bound parent attribute) with
function-scoped ``monkeypatch``, and an autouse fixture checks that no ``lmcache*`` module
and no change to the process-global ``ctypes`` survives a test.

A host without libcudart is simulated by giving the dummy connector module a stand-in
"real ctypes" (``CtypesWithoutCudart``) whose ``CDLL`` raises ``OSError`` for libcudart names.
It is a separate object: the real ``ctypes`` module is never modified, which is what lets
the tests assert that ``ctypes.CDLL`` stays the original object throughout.

How kvport.lmcache is loaded: ``kvport/__init__.py`` imports the compiled extension, which
may not be built (or not be on sys.path) when these tests run, while kvport/lmcache.py
imports nothing from the rest of kvport. So ``import kvport.lmcache`` is tried first and, if
it raises ImportError, the file is loaded by path (next to this test in the source tree,
../kvport/lmcache.py, or under any sys.path entry such as build/python).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib
import importlib.util
import os
import subprocess
import sys
import textwrap
import threading
import types
from pathlib import Path

import pytest

ORIGINAL_CDLL = ctypes.CDLL
CONNECTOR = "lmcache.v1.storage_backend.connector.eic_connector"
BARRIER_TIMEOUT_S = 20.0
THREADS = 8


def _load_kvport_lmcache():
    try:
        import kvport.lmcache as module  # the installed or PYTHONPATH package

        return module
    except ImportError:
        pass
    here = Path(__file__).resolve().parent
    candidates = [here.parent / "kvport" / "lmcache.py"]
    candidates += [Path(entry) / "kvport" / "lmcache.py" for entry in sys.path if entry]
    for path in candidates:
        if path.is_file():
            spec = importlib.util.spec_from_file_location("_kvport_lmcache_under_test", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    pytest.skip(
        "kvport/lmcache.py not found (import kvport.lmcache failed and no "
        f"kvport/lmcache.py next to {here} or on sys.path)",
        allow_module_level=True,
    )


kl = _load_kvport_lmcache()


def _libc_name() -> str:
    return ctypes.util.find_library("c") or "libc.so.6"


def _is_lmcache(name: str) -> bool:
    return name == "lmcache" or name.startswith("lmcache.")


@pytest.fixture(autouse=True)
def _no_leakage():
    """Hide any real lmcache modules during a test, drop every lmcache* module a test
    created, restore the hidden ones, and check the global ctypes was never replaced."""
    saved = {name: sys.modules[name] for name in list(sys.modules) if _is_lmcache(name)}
    for name in saved:
        del sys.modules[name]
    ctypes_module = sys.modules["ctypes"]
    yield
    for name in [name for name in list(sys.modules) if _is_lmcache(name)]:
        del sys.modules[name]
    sys.modules.update(saved)
    assert sys.modules["ctypes"] is ctypes_module
    assert ctypes.CDLL is ORIGINAL_CDLL


class CtypesWithoutCudart:
    """ctypes as a connector module sees it on a host without libcudart: ``CDLL`` of any
    name containing "cudart" raises OSError; every other attribute and library is the real
    ctypes. ``inside_lookup`` runs inside each failing lookup (used to hold threads there)."""

    def __init__(self, inside_lookup=None):
        self.cudart_lookups = 0
        self._inside_lookup = inside_lookup
        self._count_lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(ctypes, name)

    def __dir__(self):
        return dir(ctypes)

    def CDLL(self, name, *args, **kwargs):  # noqa: N802
        if isinstance(name, str) and "cudart" in name:
            with self._count_lock:
                self.cudart_lookups += 1
            if self._inside_lookup is not None:
                self._inside_lookup()
            raise OSError(f"{name}: cannot open shared object file: No such file or directory")
        return ctypes.CDLL(name, *args, **kwargs)


# The v0.4.4-era constructor, reduced to what matters here: it reads the module-global
# name `ctypes` (the name the patch redirects) and binds cudaMemcpy. bytes_get_ptr is the
# connector's other use of ctypes.
LEGACY_CONNECTOR = """
import ctypes

class EICConnector:
    def __init__(self):
        self.cudaError_t = ctypes.c_int
        self.cudaMemcpyDeviceToHost = 2
        self.cuda_lib = ctypes.CDLL("libcudart.so")
        self.cuda_lib.cudaMemcpy.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
        ]
        self.cuda_lib.cudaMemcpy.restype = self.cudaError_t

    def bytes_get_ptr(self, buf):
        if isinstance(buf, bytes):
            pointer = ctypes.cast(ctypes.c_char_p(buf), ctypes.POINTER(ctypes.c_char))
            return ctypes.addressof(pointer.contents)
        return ctypes.addressof(ctypes.c_char.from_buffer(buf))
"""

# A core carrying LMCache #5141's marker: it loads libcudart defensively itself.
MARKER_CONNECTOR = """
import ctypes

_LMCACHE_EIC_CUDART_OPTIONAL = True

class EICConnector:
    def __init__(self):
        try:
            self.cuda_lib = ctypes.CDLL("libcudart.so")
        except OSError:
            self.cuda_lib = None
"""


def _module(name: str, source: str = "", package: bool = False) -> types.ModuleType:
    module = types.ModuleType(name)
    if package:
        module.__path__ = []
    exec(compile(textwrap.dedent(source), f"<dummy {name}>", "exec"), module.__dict__)
    return module


@pytest.fixture
def install(monkeypatch):
    """install(module, name=CONNECTOR): bind throwaway parent packages lmcache, lmcache.v1,
    ... and `module` under `name`, in sys.modules and as parent attributes."""

    def _install(module, name=CONNECTOR):
        parts = name.split(".")
        parent = None
        for i in range(1, len(parts) + 1):
            dotted = ".".join(parts[:i])
            if i == len(parts):
                child = module
            elif dotted in sys.modules and isinstance(sys.modules[dotted], types.ModuleType):
                child = sys.modules[dotted]
            else:
                child = _module(dotted, package=True)
            monkeypatch.setitem(sys.modules, dotted, child)
            if parent is not None:
                monkeypatch.setattr(parent, parts[i - 1], child, raising=False)
            parent = child
        return module

    return _install


@pytest.fixture
def legacy(install):
    """A legacy connector module on a host without libcudart."""
    module = install(_module(CONNECTOR, LEGACY_CONNECTOR))
    module.ctypes = CtypesWithoutCudart()
    return module


def test_unpatched_legacy_core_fails_without_libcudart(legacy):
    # The dummy reproduces the upstream failure the patch exists for.
    with pytest.raises(OSError, match="libcudart.so"):
        legacy.EICConnector()
    assert not kl.is_patched()


def test_legacy_core_is_patched(legacy):
    without_cudart = legacy.ctypes
    assert kl.patch() == "patched"

    assert isinstance(legacy.ctypes, kl.GuardedCtypes)
    assert legacy.ctypes._kvport_real_ctypes is without_cudart
    assert legacy._kvport_lmcache_patched is True
    assert kl.is_patched()

    connector = legacy.EICConnector()
    assert without_cudart.cudart_lookups == 1
    assert "stand-in" in repr(connector.cuda_lib)
    # The constructor's ctypes bindings stuck on the stand-in function.
    assert connector.cuda_lib.cudaMemcpy.argtypes[2] is ctypes.c_size_t
    assert connector.cuda_lib.cudaMemcpy.restype is ctypes.c_int
    # Entering the GPUDirect copy path fails loudly, naming the cause.
    with pytest.raises(kl.CudaRuntimeUnavailableError, match="GPUDirect needs the CUDA runtime"):
        connector.cuda_lib.cudaMemcpy(0, 0, 16, connector.cudaMemcpyDeviceToHost)
    with pytest.raises(RuntimeError, match=r"libcudart\.so could not be loaded.*eic_trans_type: 2"):
        connector.cuda_lib.cudaMemcpyAsync()
    # Non-CUDA symbols do not exist on the stand-in, as on a real CDLL.
    with pytest.raises(AttributeError):
        connector.cuda_lib.strlen  # noqa: B018
    # The rest of the connector's ctypes use is the real ctypes.
    buf = bytearray(b"kvport")
    assert connector.bytes_get_ptr(buf) == ctypes.addressof(ctypes.c_char.from_buffer(buf))
    data = b"meta"
    assert ctypes.string_at(connector.bytes_get_ptr(data), 4) == data
    assert ctypes.CDLL is ORIGINAL_CDLL


def test_marker_core_is_left_untouched(install):
    module = install(_module(CONNECTOR, MARKER_CONNECTOR))
    without_cudart = CtypesWithoutCudart()
    module.ctypes = without_cudart
    before = dict(module.__dict__)

    assert kl.patch() == "not needed: core has _LMCACHE_EIC_CUDART_OPTIONAL"
    assert kl.patch() == "not needed: core has _LMCACHE_EIC_CUDART_OPTIONAL"

    assert module.ctypes is without_cudart
    assert module.__dict__ == before
    assert not kl.is_patched()
    # Core's own guard still sees a missing library as None, so its GDR check works.
    assert module.EICConnector().cuda_lib is None


def test_patch_is_idempotent(legacy):
    assert kl.patch() == "patched"
    proxy = legacy.ctypes
    assert kl.patch() == "already patched"
    assert kl.patch() == "already patched"
    assert legacy.ctypes is proxy
    assert not isinstance(proxy._kvport_real_ctypes, kl.GuardedCtypes)  # never nested


def test_concurrent_patch_calls_patch_once(legacy):
    barrier = threading.Barrier(THREADS, timeout=BARRIER_TIMEOUT_S)
    results, errors = [], []

    def worker():
        try:
            barrier.wait()
            results.append(kl.patch())
        except BaseException as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    threads = [threading.Thread(target=worker) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(BARRIER_TIMEOUT_S * 2)
    assert not any(t.is_alive() for t in threads)
    assert not errors
    assert sorted(results) == ["already patched"] * (THREADS - 1) + ["patched"]
    assert not isinstance(legacy.ctypes._kvport_real_ctypes, kl.GuardedCtypes)


def test_lmcache_ascend_patch_is_not_stacked(legacy):
    legacy._lmcache_ascend_eic_patched = True
    without_cudart = legacy.ctypes
    assert kl.patch() == "not needed: already patched by lmcache_ascend"
    assert legacy.ctypes is without_cudart
    assert not hasattr(legacy, "_kvport_lmcache_patched")


def test_shim_is_confined_to_the_libcudart_lookup(legacy):
    assert kl.patch() == "patched"
    proxy = legacy.ctypes

    for name in ("libcudart.so", "libcudart.so.12", "libcudart.so.12.4"):
        assert "stand-in" in repr(proxy.CDLL(name)), name
    # Other names, even ones about libcudart, keep their OSError.
    for name in (
        "libcudart",
        "libcudart.so.x",
        "libcudart_static.so",
        "/usr/local/cuda/lib64/libcudart.so",
        "libkvport-no-such-library.so.0",
    ):
        with pytest.raises(OSError):
            proxy.CDLL(name)
    # Only OSError is turned into a stand-in; anything else propagates.
    class Broken(CtypesWithoutCudart):
        def CDLL(self, name, *args, **kwargs):  # noqa: N802
            raise ValueError("not an OSError")

    with pytest.raises(ValueError):
        kl.GuardedCtypes(Broken()).CDLL("libcudart.so")
    assert ctypes.CDLL is ORIGINAL_CDLL


def test_other_libraries_load_normally_through_the_proxy(legacy):
    assert kl.patch() == "patched"
    proxy = legacy.ctypes

    libc = proxy.CDLL(_libc_name())
    assert isinstance(libc, ORIGINAL_CDLL)
    libc.strlen.argtypes = [ctypes.c_char_p]
    libc.strlen.restype = ctypes.c_size_t
    assert libc.strlen(b"kvport") == 6
    libc_with_mode = proxy.CDLL(_libc_name(), mode=ctypes.RTLD_LOCAL)
    assert isinstance(libc_with_mode, ORIGINAL_CDLL)
    # Everything else is read from the wrapped module at the time of access.
    for name in ("c_int", "c_void_p", "c_size_t", "cast", "addressof", "POINTER", "RTLD_LOCAL"):
        assert getattr(proxy, name) is getattr(ctypes, name), name
    assert "c_char" in dir(proxy)


def test_proxy_over_the_real_ctypes_module():
    # Without a stand-in: on this host libcudart either loads (then the proxy returns the
    # real library) or not (then the stand-in); other libraries are real CDLLs either way.
    proxy = kl.GuardedCtypes(ctypes)
    assert isinstance(proxy.CDLL(_libc_name()), ORIGINAL_CDLL)
    try:
        ORIGINAL_CDLL("libcudart.so")
        loads = True
    except OSError:
        loads = False
    lib = proxy.CDLL("libcudart.so")
    assert isinstance(lib, ORIGINAL_CDLL) is loads
    assert ("stand-in" in repr(lib)) is (not loads)
    assert ctypes.CDLL is ORIGINAL_CDLL


def test_concurrent_construction_never_touches_global_ctypes(legacy):
    """The regression of the original design (swapping the process-global ctypes.CDLL
    during construction): 8 constructors released at once, all of them held *inside* the
    failing libcudart lookup together, each checking the global ctypes there and while
    loading another library through the global ctypes.CDLL."""
    start = threading.Barrier(THREADS, timeout=BARRIER_TIMEOUT_S)
    inside = threading.Barrier(THREADS, timeout=BARRIER_TIMEOUT_S)
    observations = []
    observations_lock = threading.Lock()

    def observe(where):
        ok = ctypes.CDLL is ORIGINAL_CDLL and sys.modules["ctypes"].CDLL is ORIGINAL_CDLL
        with observations_lock:
            observations.append((where, ok))

    def inside_lookup():
        observe("inside lookup, before barrier")
        inside.wait()
        observe("inside lookup, after barrier")

    legacy.ctypes = CtypesWithoutCudart(inside_lookup=inside_lookup)
    assert kl.patch() == "patched"

    connectors, errors = [], []

    def worker():
        try:
            observe("before start")
            start.wait()
            connector = legacy.EICConnector()
            observe("after construction")
            libc = ctypes.CDLL(_libc_name())  # the global CDLL still works for others
            assert isinstance(libc, ORIGINAL_CDLL)
            observe("after global CDLL")
            connectors.append(connector)
        except BaseException as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    threads = [threading.Thread(target=worker, name=f"ctor-{i}") for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(BARRIER_TIMEOUT_S * 3)
    assert not any(t.is_alive() for t in threads), "a constructor did not finish"
    assert not errors, errors
    assert len(connectors) == THREADS
    assert legacy.ctypes._kvport_real_ctypes.cudart_lookups == THREADS
    for connector in connectors:
        assert "stand-in" in repr(connector.cuda_lib)
        with pytest.raises(kl.CudaRuntimeUnavailableError):
            connector.cuda_lib.cudaMemcpy(0, 0, 1, 2)
    assert len(observations) == THREADS * 5
    assert all(ok for _, ok in observations), [o for o in observations if not o[1]]
    assert ctypes.CDLL is ORIGINAL_CDLL


def test_absent_lmcache_is_a_no_op(monkeypatch):
    monkeypatch.setitem(sys.modules, "lmcache", None)  # import lmcache -> ModuleNotFoundError
    assert kl.patch() == "skipped: lmcache not installed"
    assert not kl.is_patched()


def test_absent_connector_module_is_a_no_op(install, monkeypatch):
    install(_module("lmcache.v1.storage_backend.connector", package=True),
            "lmcache.v1.storage_backend.connector")
    monkeypatch.setitem(sys.modules, CONNECTOR, None)
    result = kl.patch()
    assert result.startswith("skipped: this LMCache has no EIC connector"), result
    assert not kl.is_patched()


def test_connector_without_module_level_ctypes_is_skipped(install):
    module = install(_module(CONNECTOR, "class EICConnector:\n    pass\n"))
    assert kl.patch() == f"skipped: {CONNECTOR} has no module-level ctypes"
    assert "ctypes" not in module.__dict__


def test_package_layout_of_pr_1930_is_patched_on_the_defining_module(install):
    # L0: lmcache/.../connector/eic_connector/{__init__.py, eic_connector.py}, the package
    # re-exporting EICConnector from the submodule whose globals __init__ reads.
    inner_name = CONNECTOR + ".eic_connector"
    inner = _module(inner_name, LEGACY_CONNECTOR)
    inner.ctypes = CtypesWithoutCudart()
    package = install(_module(CONNECTOR, package=True))
    install(inner, inner_name)
    package.EICConnector = inner.EICConnector

    assert kl.patch() == "patched"
    assert isinstance(inner.ctypes, kl.GuardedCtypes)
    assert "ctypes" not in package.__dict__
    assert kl.is_patched()
    assert "stand-in" in repr(package.EICConnector().cuda_lib)


def _write_tree(root: Path, connector_source: str) -> None:
    directory = root / "lmcache" / "v1" / "storage_backend" / "connector"
    directory.mkdir(parents=True)
    for level in (root / "lmcache", root / "lmcache" / "v1", directory.parent, directory):
        (level / "__init__.py").write_text("")
    (directory / "eic_connector.py").write_text(textwrap.dedent(connector_source))


def test_real_import_of_an_on_disk_legacy_core(tmp_path, monkeypatch):
    # The connector is imported by the import system from files, as in a real install.
    _write_tree(tmp_path, LEGACY_CONNECTOR)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert kl.patch() == "patched"
    module = sys.modules[CONNECTOR]
    assert module.__file__.startswith(str(tmp_path))
    assert isinstance(module.ctypes, kl.GuardedCtypes)
    assert module.ctypes._kvport_real_ctypes is ctypes
    import lmcache.v1.storage_backend.connector.eic_connector as via_import_statement

    assert via_import_statement is module
    assert kl.patch() == "already patched"


def test_connector_that_cannot_import_eic_is_skipped(tmp_path, monkeypatch, caplog):
    _write_tree(tmp_path, "import eic\n" + LEGACY_CONNECTOR)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "eic", None)  # no vendor/kvport eic importable
    with caplog.at_level("DEBUG", logger="kvport.lmcache"):
        result = kl.patch()
    assert result.startswith("skipped: LMCache's EIC connector cannot be imported"), result
    assert "eic" in result
    assert not kl.is_patched()
    assert CONNECTOR not in sys.modules  # the failed import left nothing behind
    assert [r.levelname for r in caplog.records if r.name == "kvport.lmcache"] == ["WARNING"]


@pytest.mark.skipif(os.environ.get("KVPORT_NO_CHILD_EXEC") == "1",
                    reason="starts a child interpreter, which qemu-user cannot without "
                           "binfmt_misc; covered by the native run")
def test_importing_kvport_lmcache_imports_no_lmcache_or_torch():
    path = getattr(kl, "__file__", None)
    assert path, "kvport.lmcache has no __file__"
    code = textwrap.dedent(
        f"""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("kvport_lmcache_probe", {path!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        heavy = sorted(n for n in sys.modules
                       if n.split(".")[0] in ("lmcache", "torch", "eic", "kvport", "numpy"))
        print(heavy)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
