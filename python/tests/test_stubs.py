# SPDX-License-Identifier: Apache-2.0
"""The type stubs (.pyi) name every public name of kvport, kvport.lmcache and eic, every public
member and instance attribute of their classes, and nothing the modules lack; they and the
py.typed markers are installed next to the modules (the build tree and the wheel), so editors
and type checkers read them (PEP 561).

Public: a name without a leading underscore that the module defines (not one it imports), or
one in its __all__; for a class, the names its body and its in-module bases define (methods,
properties, enum members, class attributes, __slots__, dataclass fields), the attributes its
__init__ assigns to self, and the context-manager and __len__ dunders."""

from __future__ import annotations

import ast
import dataclasses
import glob
import importlib
import inspect
import os
import types
import zipfile

import pytest

MODULES = ["kvport", "kvport.lmcache", "eic"]
DUNDERS = {"__enter__", "__exit__", "__len__"}


def _public(name: str) -> bool:
    return not name.startswith("_")


def _stub_path(module: types.ModuleType) -> str:
    path = os.path.splitext(module.__file__)[0] + ".pyi"
    assert os.path.isfile(path), f"{module.__name__} has no stub next to it ({path})"
    return path


def _bound_names(body) -> set:
    """Names a module's or class's body binds (imports excluded)."""
    names = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _imported_names(tree: ast.Module) -> set:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
    return names


def _classes(tree: ast.Module) -> dict:
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def _self_attributes(class_node: ast.ClassDef) -> set:
    """Attributes that __init__ assigns to self."""
    names = set()
    for node in class_node.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            for stmt in ast.walk(node):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else \
                    [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
                for target in targets:
                    if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                            and target.value.id == "self"):
                        names.add(target.attr)
    return names


def _runtime_public(module: types.ModuleType) -> set:
    source = ast.parse(inspect.getsource(module))
    imported = _imported_names(source)
    names = {name for name in dir(module) if _public(name) and name not in imported
             and not isinstance(getattr(module, name), types.ModuleType)}
    return names | set(getattr(module, "__all__", ()))


def _runtime_members(module: types.ModuleType, cls: type, sources: dict) -> set:
    names = set()
    for klass in cls.__mro__:
        if klass.__module__ != module.__name__:
            continue  # enum.IntEnum's name/value, list's methods, Exception's args ...
        names.update(n for n in vars(klass) if _public(n) or n in DUNDERS)
        names.update(n for n in getattr(klass, "__slots__", ()) if _public(n))
        if klass.__name__ in sources:
            names.update(n for n in _self_attributes(sources[klass.__name__]) if _public(n))
    if dataclasses.is_dataclass(cls):
        names.update(f.name for f in dataclasses.fields(cls))
    return names


def _stub_members(stub_classes: dict, name: str) -> set:
    """A stub class's members, with those of its bases defined in the same stub."""
    node = stub_classes[name]
    names = {n for n in _bound_names(node.body) if _public(n) or n in DUNDERS}
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in stub_classes:
            names |= _stub_members(stub_classes, base.id)
    return names


@pytest.mark.parametrize("name", MODULES)
def test_stubs_name_every_public_name_and_member(name):
    module = importlib.import_module(name)
    with open(_stub_path(module)) as f:
        stub = ast.parse(f.read())
    stub_names = {n for n in _bound_names(stub.body) if _public(n) or n == "__version__"}
    public = _runtime_public(module)
    assert not public - stub_names, f"{name}: missing from the stub: {sorted(public - stub_names)}"
    assert not stub_names - public, f"{name}: not in the module: {sorted(stub_names - public)}"

    stub_classes = _classes(stub)
    sources = _classes(ast.parse(inspect.getsource(module)))
    for class_name in sorted(public):
        cls = getattr(module, class_name)
        if not isinstance(cls, type):
            continue
        assert class_name in stub_classes, f"{name}.{class_name} is not a class in the stub"
        runtime = _runtime_members(module, cls, sources)
        stubbed = _stub_members(stub_classes, class_name)
        assert not runtime - stubbed, \
            f"{name}.{class_name}: missing from the stub: {sorted(runtime - stubbed)}"
        assert not stubbed - runtime, \
            f"{name}.{class_name}: not in the class: {sorted(stubbed - runtime)}"


def test_stub_enum_values_match():
    for name in MODULES:
        module = importlib.import_module(name)
        with open(_stub_path(module)) as f:
            stub = ast.parse(f.read())
        for class_name, node in _classes(stub).items():
            cls = getattr(module, class_name, None)
            if not (isinstance(cls, type) and issubclass(cls, int) and hasattr(cls, "__members__")):
                continue
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant):
                    member = stmt.targets[0].id
                    assert cls[member] == stmt.value.value, f"{name}.{class_name}.{member}"


def test_stubs_and_markers_are_installed():
    for package in ("kvport", "eic"):
        folder = os.path.dirname(importlib.import_module(package).__file__)
        assert os.path.isfile(os.path.join(folder, "py.typed")), f"{package}: no py.typed"
        assert os.path.isfile(os.path.join(folder, "__init__.pyi")), f"{package}: no stub"
    wheel_dir = os.environ.get("KVPORT_WHEEL_DIR", "")
    wheels = glob.glob(os.path.join(wheel_dir, "kvport-*.whl"))
    assert len(wheels) == 1, f"expected one wheel in {wheel_dir!r}, found {wheels}"
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = set(wheel.namelist())
    for member in ("kvport/py.typed", "kvport/__init__.pyi", "kvport/lmcache.pyi",
                   "eic/py.typed", "eic/__init__.pyi"):
        assert member in names, f"the wheel lacks {member}"
