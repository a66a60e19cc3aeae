#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The layering test: every #include and every CMake link follows the layer table.

  tests/layers/check_layers.py [--root DIR] [--spdx]

The table is the one in DIR/docs/architecture.md (section "Layer rules"): one row per layer,
lowest first, with its folder, its CMake targets, the layers it may use and its interface
headers. It is the only copy of the rules; this script reads it and checks that

  - the table itself is sound: a layer may use only layers in rows above it (so arrows point
    down and there are no cycles), every interface header exists, every include/kvport/ header
    belongs to exactly one layer;
  - every file under src/<layer>/, tools/, python/src/ and include/kvport/ belongs to a layer,
    and each of its #include "..." (and <...> that names a file of this tree) is of its own
    layer, or of a layer it may use and then one of that layer's interface headers; a public
    header (include/kvport/) includes only public headers;
  - each layer's CMakeLists.txt defines the targets the table lists for it and no others, links
    only targets of its own layer or of layers it may use, and links (directly or through
    them) every layer whose headers its files include;
  - with --spdx: every source file scripts/add-spdx covers starts with its SPDX line.

The exceptions table right after the layer table lists includes that break a rule but are
allowed until the owning layer changes: each row names the file and the include, and a row
that no longer matches anything is itself a problem (so fixed exceptions get removed).

Each problem is one line, "path:line: [rule] what is wrong"; the exit status is 1 when there
is any. Standard library only (run by /usr/bin/python3).
"""

import argparse
import importlib.machinery
import importlib.util
import os
import re
import sys
from dataclasses import dataclass, field

sys.dont_write_bytecode = True

DOC = "docs/architecture.md"
LAYER_HEADER = ["Layer", "Folder", "Targets", "May use", "Interface headers"]
EXCEPTION_HEADER = ["File", "Include", "Why it is allowed for now"]
# Where files that must belong to a layer live (relative to the root).
SCANNED = ("src", "tools", "python/src", "include")
SOURCE_EXTENSIONS = (".h", ".cc", ".cpp")
CMAKE_DEFINES = ("kvport_library", "add_library", "add_executable", "pybind11_add_module")
CMAKE_LINK_KEYWORDS = {"PUBLIC", "PRIVATE", "INTERFACE", "LINK_PUBLIC", "LINK_PRIVATE",
                       "LINK_INTERFACE_LIBRARIES", "debug", "optimized", "general"}

_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


@dataclass
class Layer:
    name: str
    folder: str
    targets: list
    may_use: list
    interface: list  # include paths as written: "kvport/status.h", "common/escape_text.h"
    line: int
    files: set = field(default_factory=set)  # the interface as paths relative to the root


@dataclass
class Exception_:
    file: str
    include: str
    line: int
    used: bool = False


class Checker:
    def __init__(self, root):
        self.root = os.path.abspath(root)
        self.problems = []
        self.layers = []
        self.by_name = {}
        self.exceptions = []
        self.public_owner = {}  # "include/kvport/x.h" -> Layer
        self.included = {}  # layer name -> {used layer name: (path, line)}
        self.counts = {"files": 0, "includes": 0, "links": 0}

    # --- reporting ---------------------------------------------------------------------------

    def problem(self, path, line, rule, message):
        self.problems.append(f"{path}:{line}: [{rule}] {message}")

    def exists(self, rel):
        return os.path.isfile(os.path.join(self.root, rel))

    # --- the tables --------------------------------------------------------------------------

    @staticmethod
    def _cells(line):
        return [c.strip().replace("`", "") for c in line.strip().strip("|").split("|")]

    @staticmethod
    def _items(cell):
        return [x for x in re.split(r"[,\s]+", cell) if x and x not in ("-", "—")]

    def _table(self, lines, header):
        """(line number, cells) for each row of the table whose header is `header`."""
        for i, text in enumerate(lines):
            if text.lstrip().startswith("|") and self._cells(text) == header:
                rows = []
                for j in range(i + 2, len(lines)):  # skip the |---| line
                    if not lines[j].lstrip().startswith("|"):
                        break
                    rows.append((j + 1, self._cells(lines[j])))
                return rows
        return None

    def read_tables(self):
        path = os.path.join(self.root, DOC)
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except OSError as e:
            self.problem(DOC, 1, "table", f"cannot read the layer table: {e}")
            return False
        rows = self._table(lines, LAYER_HEADER)
        if not rows:
            self.problem(DOC, 1, "table", "no layer table (a row '| " + " | ".join(LAYER_HEADER)
                         + " |' followed by one row per layer)")
            return False
        for line, cells in rows:
            if len(cells) != len(LAYER_HEADER):
                self.problem(DOC, line, "table", f"expected {len(LAYER_HEADER)} cells")
                continue
            name, folder = cells[0], cells[1].rstrip("/")
            layer = Layer(name, folder, self._items(cells[2]), self._items(cells[3]),
                          self._items(cells[4]), line)
            if name in self.by_name:
                self.problem(DOC, line, "table", f"layer '{name}' is listed twice")
                continue
            for used in layer.may_use:
                if used not in self.by_name:
                    where = ("listed below it" if any(c[0] == used for _, c in rows)
                             else "not a layer")
                    self.problem(DOC, line, "table",
                                 f"layer '{name}' may use '{used}', which is {where}: a layer "
                                 "may use only layers in rows above it")
            if not os.path.isdir(os.path.join(self.root, folder)):
                self.problem(DOC, line, "table", f"layer '{name}': no folder {folder}/")
            self.layers.append(layer)
            self.by_name[name] = layer
        for layer in self.layers:
            for header in layer.interface:
                rel = self._interface_path(header)
                if rel is None:
                    self.problem(DOC, layer.line, "table",
                                 f"layer '{layer.name}': interface header '{header}' does not "
                                 "exist (a kvport/ header in include/, or <layer>/x.h in src/)")
                    continue
                if rel.startswith("include/"):
                    if rel in self.public_owner:
                        self.problem(DOC, layer.line, "table",
                                     f"'{header}' is listed for '{self.public_owner[rel].name}' "
                                     f"and '{layer.name}'")
                        continue
                    self.public_owner[rel] = layer
                elif self.layer_of(rel) is not layer:
                    self.problem(DOC, layer.line, "table",
                                 f"layer '{layer.name}': '{header}' is not in {layer.folder}/")
                    continue
                layer.files.add(rel)
        for rel in self._walk("include"):
            if rel.endswith(SOURCE_EXTENSIONS) and rel not in self.public_owner:
                self.problem(rel, 1, "table", "public header of no layer: list it in the "
                             f"'Interface headers' of its layer ({DOC})")
        for line, cells in self._table(lines, EXCEPTION_HEADER) or []:
            if len(cells) != len(EXCEPTION_HEADER):
                self.problem(DOC, line, "table", f"expected {len(EXCEPTION_HEADER)} cells")
                continue
            self.exceptions.append(Exception_(cells[0], cells[1], line))
        return True

    def _interface_path(self, header):
        for rel in (f"include/{header}", f"src/{header}"):
            if self.exists(rel):
                return rel
        return None

    # --- which layer a file is in ------------------------------------------------------------

    def layer_of(self, rel):
        if rel.startswith("include/"):
            return self.public_owner.get(rel)
        best = None
        for layer in self.layers:
            if rel.startswith(layer.folder + "/") and (best is None
                                                      or len(layer.folder) > len(best.folder)):
                best = layer
        return best

    def _walk(self, top):
        out = []
        base = os.path.join(self.root, top)
        for folder, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
            for name in sorted(files):
                out.append(os.path.relpath(os.path.join(folder, name), self.root)
                           .replace(os.sep, "/"))
        return out

    # --- includes ----------------------------------------------------------------------------

    def resolve(self, rel, include, quoted, layer):
        """The file (relative to the root) `include` in `rel` names, or None (not ours)."""
        candidates = []
        if quoted:
            candidates.append(os.path.join(os.path.dirname(rel), include))
        candidates += [f"include/{include}", f"src/{include}"]
        if quoted and layer is not None:
            candidates.append(f"{layer.folder}/{include}")
        for c in candidates:
            c = os.path.normpath(c).replace(os.sep, "/")
            if not c.startswith("..") and self.exists(c):
                return c
        return None

    def check_includes(self):
        for top in SCANNED:
            for rel in self._walk(top):
                if not rel.endswith(SOURCE_EXTENSIONS):
                    continue
                layer = self.layer_of(rel)
                if layer is None:
                    if rel.startswith("include/"):
                        continue  # reported by read_tables
                    self.problem(rel, 1, "layer", f"file of no layer: its folder has no row in "
                                 f"the layer table ({DOC})")
                    continue
                self.counts["files"] += 1
                self._check_file(rel, layer)
        for e in self.exceptions:
            if not e.used:
                self.problem(DOC, e.line, "exception",
                             f"'{e.file}' no longer includes '{e.include}' against the rules: "
                             "remove this exception")

    def _check_file(self, rel, layer):
        try:
            with open(os.path.join(self.root, rel), encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError as e:
            self.problem(rel, 1, "layer", f"cannot read: {e}")
            return
        public = rel.startswith("include/")
        for number, text in enumerate(lines, 1):
            m = _INCLUDE.match(text)
            if not m:
                continue
            quoted, include = m.group(1) == '"', m.group(2)
            target = self.resolve(rel, include, quoted, layer)
            if target is None:
                if quoted:
                    self.problem(rel, number, "unresolved",
                                 f'"{include}" is no file of this tree (looked next to the '
                                 f"file, in include/, src/ and {layer.folder}/)")
                continue
            self.counts["includes"] += 1
            owner = self.layer_of(target)
            message = None
            if owner is None:
                message = ("unresolved", f'"{include}" ({target}) is in no layer')
            elif public and not target.startswith("include/"):
                message = ("public-header",
                           f'public header includes "{include}", which is not in include/: '
                           "a public header may include only public headers")
            elif owner is not layer:
                self.included.setdefault(layer.name, {}).setdefault(owner.name, (rel, number))
                if owner.name not in layer.may_use:
                    above = self.layers.index(owner) > self.layers.index(layer)
                    message = ("layer",
                               f'{layer.name} includes "{include}" of {owner.name}'
                               f"{', a layer above it' if above else ''}; {layer.name} may use "
                               f"{', '.join(layer.may_use) or 'no other layer'}")
                elif target not in owner.files:
                    message = ("private",
                               f'"{include}" is private to {owner.name}; its interface: '
                               f"{', '.join(owner.interface) or 'none'}")
            if message is None:
                continue
            waived = [e for e in self.exceptions if e.file == rel and e.include == include]
            if waived:
                for e in waived:
                    e.used = True
                continue
            self.problem(rel, number, *message)

    # --- CMake -------------------------------------------------------------------------------

    @staticmethod
    def _strip_comments(text):
        out = []
        for line in text.splitlines():
            quoted, cut = False, len(line)
            for i, ch in enumerate(line):
                if ch == '"' and (i == 0 or line[i - 1] != "\\"):
                    quoted = not quoted
                elif ch == "#" and not quoted:
                    cut = i
                    break
            out.append(line[:cut])
        return "\n".join(out)

    @staticmethod
    def _commands(text):
        """(name, [args], line) for each command call in CMake `text` (comments stripped)."""
        for m in re.finditer(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(", text):
            depth, i = 1, m.end()
            while i < len(text) and depth:
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
            args = [a.strip('"') for a in text[m.end():i - 1].split()]
            yield m.group(1), args, text.count("\n", 0, m.start()) + 1

    def cmake_file(self, layer):
        folder = layer.folder
        while folder and folder != ".":
            rel = f"{folder}/CMakeLists.txt"
            if self.exists(rel):
                return rel
            folder = os.path.dirname(folder)
        return None

    def check_cmake(self):
        target_layer = {t: layer for layer in self.layers for t in layer.targets}
        links = {}  # target -> [linked targets of ours]
        for layer in self.layers:
            rel = self.cmake_file(layer)
            if rel is None:
                self.problem(DOC, layer.line, "cmake-target",
                             f"layer '{layer.name}' has no CMakeLists.txt in {layer.folder}/ or "
                             "above it")
                continue
            with open(os.path.join(self.root, rel), encoding="utf-8") as f:
                text = self._strip_comments(f.read())
            defined = set()
            for name, args, line in self._commands(text):
                if not args:
                    continue
                if name in CMAKE_DEFINES:
                    target = args[0]
                    if target not in layer.targets:
                        self.problem(rel, line, "cmake-target",
                                     f"target '{target}' is not one of layer {layer.name}'s "
                                     f"targets in the table ({', '.join(layer.targets)})")
                    defined.add(target)
                    if name == "kvport_library" and "DEPS" in args:
                        deps = args[args.index("DEPS") + 1:]
                        self._link(rel, line, layer, target, deps, target_layer, links)
                elif name == "target_link_libraries":
                    target = args[0]
                    if target not in layer.targets:
                        self.problem(rel, line, "cmake-target",
                                     f"links '{target}', which is not one of layer "
                                     f"{layer.name}'s targets ({', '.join(layer.targets)})")
                        continue
                    self._link(rel, line, layer, target, args[1:], target_layer, links)
            for target in layer.targets:
                if target not in defined:
                    self.problem(DOC, layer.line, "cmake-target",
                                 f"layer '{layer.name}' lists target '{target}', which {rel} "
                                 "does not define")
        # Every layer whose headers a layer includes must be linked, directly or through others.
        for layer in self.layers:
            reach, todo = set(), list(layer.targets)
            while todo:
                t = todo.pop()
                for d in links.get(t, []):
                    if d not in reach:
                        reach.add(d)
                        todo.append(d)
            linked = {target_layer[t].name for t in reach}
            for used, (rel, line) in sorted(self.included.get(layer.name, {}).items()):
                if used not in linked and used in layer.may_use:
                    self.problem(rel, line, "cmake-link",
                                 f"{layer.name} includes headers of {used} but none of its "
                                 f"targets ({', '.join(layer.targets)}) links "
                                 f"{', '.join(self.by_name[used].targets)}, even indirectly")

    def _link(self, rel, line, layer, target, items, target_layer, links):
        for item in items:
            if item in CMAKE_LINK_KEYWORDS or "$<" in item or "${" in item:
                continue
            owner = target_layer.get(item)
            if owner is None:
                if item.startswith("kvport_"):
                    self.problem(rel, line, "cmake-link",
                                 f"'{target}' links '{item}', a kvport target of no layer")
                continue
            self.counts["links"] += 1
            links.setdefault(target, []).append(item)
            if owner is not layer and owner.name not in layer.may_use:
                self.problem(rel, line, "cmake-link",
                             f"'{target}' ({layer.name}) links '{item}' ({owner.name}); "
                             f"{layer.name} may use "
                             f"{', '.join(layer.may_use) or 'no other layer'}")

    # --- SPDX --------------------------------------------------------------------------------

    def check_spdx(self):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                              "scripts", "add-spdx")
        loader = importlib.machinery.SourceFileLoader("add_spdx", script)
        spec = importlib.util.spec_from_loader("add_spdx", loader)
        add_spdx = importlib.util.module_from_spec(spec)
        loader.exec_module(add_spdx)
        for rel, line in add_spdx.spdx_files(self.root).items():
            if not add_spdx.has_spdx(os.path.join(self.root, rel), line):
                self.problem(rel, 1, "spdx", f"does not start with '{line}' (scripts/add-spdx)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--root", default=here, help="the source tree (default: %(default)s)")
    parser.add_argument("--spdx", action="store_true",
                        help="also check that every source file starts with its SPDX line")
    args = parser.parse_args(argv)

    checker = Checker(args.root)
    if checker.read_tables():
        checker.check_includes()
        checker.check_cmake()
    if args.spdx:
        checker.check_spdx()
    for p in checker.problems:
        print(p)
    c = checker.counts
    if checker.problems:
        print(f"check_layers: {len(checker.problems)} problem(s); the rules are the layer table "
              f"in {DOC}", file=sys.stderr)
        return 1
    print(f"check_layers: OK: {len(checker.layers)} layers, {c['files']} files, "
          f"{c['includes']} includes, {c['links']} CMake links"
          f"{', SPDX lines' if args.spdx else ''} checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
