#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Tests of the layering test (check_layers.py) and of scripts/add-spdx.

fixtures/clean/ keeps every rule and must pass; fixtures/violations/ breaks each rule once and
must fail with exactly the expected problems, each at its file and line. Standard library only:
/usr/bin/python3 tests/layers/check_layers_test.py
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CHECKER = os.path.join(HERE, "check_layers.py")
ADD_SPDX = os.path.join(ROOT, "scripts", "add-spdx")
FIXTURES = os.path.join(HERE, "fixtures")

C_SPDX = "// SPDX-License-Identifier: Apache-2.0"
HASH_SPDX = "# SPDX-License-Identifier: Apache-2.0"

# (file, rule, the text on the line the problem is reported at; None: line 1)
EXPECTED_VIOLATIONS = [
    ("docs/architecture.md", "table", "| base |"),  # may use 'mid', a layer below it
    ("docs/architecture.md", "table", "| base |"),  # interface header base/gone.h is missing
    ("docs/architecture.md", "table", "| app |"),  # may use 'ghost', no layer
    ("include/kvport/orphan.h", "table", None),  # a public header of no layer
    ("src/base/base.cc", "layer", '#include "kvport/top.h"'),  # includes a layer above
    ("src/orphan/orphan.cc", "layer", None),  # a folder of no layer
    ("src/top/top.cc", "private", '#include "base/detail.h"'),
    ("src/top/top.cc", "unresolved", '#include "missing.h"'),
    ("include/kvport/top.h", "public-header", '#include "base/shared.h"'),
    ("docs/architecture.md", "exception", "base/removed.h"),  # a stale exception
    ("src/mid/CMakeLists.txt", "cmake-link", "kvport_top"),  # links a layer it may not use
    ("src/top/CMakeLists.txt", "cmake-target", "kvport_top_extra"),  # defines an unlisted one
    ("docs/architecture.md", "cmake-target", "| top |"),  # lists one nobody defines
    ("tools/app/CMakeLists.txt", "cmake-link", "kvport_nowhere"),  # a kvport target of no layer
    ("tools/app/main.cc", "cmake-link", '#include "kvport/top.h"'),  # includes what it never links
    ("scripts/run.sh", "spdx", None),  # the line is there, but not right after #!
    ("src/base/base.cc", "spdx", None),
]

_PROBLEM = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): \[(?P<rule>[a-z-]+)\] (?P<message>.+)$")


def run_checker(root, *flags):
    proc = subprocess.run([sys.executable, CHECKER, "--root", root, *flags],
                          capture_output=True, text=True, env=dict(os.environ,
                                                                   PYTHONDONTWRITEBYTECODE="1"))
    return proc.returncode, proc.stdout, proc.stderr


def line_of(root, path, text):
    if text is None:
        return 1
    with open(os.path.join(root, path), encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if text in line:
                return number
    raise AssertionError(f"{path}: no line with {text!r}")


class CheckLayersTest(unittest.TestCase):
    def test_clean_tree_passes(self):
        rc, out, err = run_checker(os.path.join(FIXTURES, "clean"), "--spdx")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("check_layers: OK", out)

    def test_every_rule_fails_at_its_line(self):
        root = os.path.join(FIXTURES, "violations")
        rc, out, err = run_checker(root, "--spdx")
        self.assertEqual(rc, 1, out + err)
        got = []
        for line in out.splitlines():
            m = _PROBLEM.match(line)
            self.assertIsNotNone(m, f"not 'path:line: [rule] message': {line!r}")
            got.append((m["path"], int(m["line"]), m["rule"]))
        expected = [(path, line_of(root, path, text), rule)
                    for path, rule, text in EXPECTED_VIOLATIONS]
        self.assertEqual(sorted(got), sorted(expected), out)
        self.assertIn(f"{len(expected)} problem(s)", err)

    def test_spdx_is_checked_only_when_asked(self):
        rc, out, _ = run_checker(os.path.join(FIXTURES, "violations"))
        self.assertEqual(rc, 1)
        self.assertNotIn("[spdx]", out)
        self.assertIn("[layer]", out)


class AddSpdxTest(unittest.TestCase):
    FILES = {
        "src/a/a.cc": '#include "a/a.h"\n',
        "src/a/a.h": C_SPDX + "\n#pragma once\n",  # already has it
        "include/kvport/x.h": "// A header comment.\n#pragma once\n",
        "bench/b.cpp": "int main() {}\r\n",  # CRLF line endings stay CRLF
        "tests/t/t_test.cc": "",  # empty
        "tests/t/run.sh": "#!/bin/sh\necho hi\n",
        "tests/t/data.txt": "not a source file\n",
        "tests/layers/fixtures/f/f.cc": "int f();\n",  # the fixtures are left alone
        "python/pkg/__init__.py": '"""Docstring."""\n',
        "python/pkg/coded.py": "# -*- coding: utf-8 -*-\nx = 1\n",
        "python/src/mod.cc": "int m;\n",
        "scripts/tool": "#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\nprint(1)\n",
        "scripts/notes": "plain text, no #! line\n",
        ".ci/run": "#!/usr/bin/env bash\nmake test\n",
        "docs/x.cc": "int outside_the_covered_folders;\n",
    }
    EXPECTED = {
        "src/a/a.cc": C_SPDX + '\n#include "a/a.h"\n',
        "src/a/a.h": C_SPDX + "\n#pragma once\n",
        "include/kvport/x.h": C_SPDX + "\n// A header comment.\n#pragma once\n",
        "bench/b.cpp": C_SPDX + "\r\nint main() {}\r\n",
        "tests/t/t_test.cc": C_SPDX + "\n",
        "tests/t/run.sh": "#!/bin/sh\n" + HASH_SPDX + "\necho hi\n",
        "tests/t/data.txt": "not a source file\n",
        "tests/layers/fixtures/f/f.cc": "int f();\n",
        "python/pkg/__init__.py": HASH_SPDX + '\n"""Docstring."""\n',
        "python/pkg/coded.py": "# -*- coding: utf-8 -*-\n" + HASH_SPDX + "\nx = 1\n",
        "python/src/mod.cc": C_SPDX + "\nint m;\n",
        "scripts/tool": ("#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n" + HASH_SPDX
                         + "\nprint(1)\n"),
        "scripts/notes": "plain text, no #! line\n",
        ".ci/run": "#!/usr/bin/env bash\n" + HASH_SPDX + "\nmake test\n",
        "docs/x.cc": "int outside_the_covered_folders;\n",
    }

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="add-spdx-test-")
        for rel, text in self.FILES.items():
            path = os.path.join(self.root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(text)
        os.chmod(os.path.join(self.root, "scripts/tool"), 0o755)

    def tearDown(self):
        shutil.rmtree(self.root)

    def add_spdx(self, *flags):
        return subprocess.run([sys.executable, ADD_SPDX, "--root", self.root, *flags],
                              capture_output=True, text=True,
                              env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))

    def read(self, rel):
        with open(os.path.join(self.root, rel), encoding="utf-8", newline="") as f:
            return f.read()

    def test_adds_the_line_once(self):
        check = self.add_spdx("--check")
        self.assertEqual(check.returncode, 1)
        self.assertNotIn("src/a/a.h", check.stdout)
        first = self.add_spdx()
        self.assertEqual(first.returncode, 0, first.stderr)
        for rel, text in self.EXPECTED.items():
            self.assertEqual(self.read(rel), text, rel)
        self.assertTrue(os.access(os.path.join(self.root, "scripts/tool"), os.X_OK))
        self.assertIn("add-spdx: 10 of 11 files changed", first.stderr)

        second = self.add_spdx()  # idempotent
        self.assertEqual(second.stdout, "")
        self.assertIn("add-spdx: 0 of 11 files changed", second.stderr)
        for rel, text in self.EXPECTED.items():
            self.assertEqual(self.read(rel), text, rel)
        self.assertEqual(self.add_spdx("--check").returncode, 0)
        rc, out, err = run_checker(self.root, "--spdx")
        self.assertNotIn("[spdx]", out + err)

    def test_covers_the_tree_but_not_the_fixtures(self):
        listed = subprocess.run([sys.executable, ADD_SPDX, "--list"], capture_output=True,
                                text=True, check=True).stdout.splitlines()
        self.assertIn("src/common/status.cc", listed)
        self.assertIn("include/kvport/status.h", listed)
        self.assertIn("scripts/add-spdx", listed)
        self.assertIn("tests/layers/check_layers.py", listed)
        self.assertFalse([p for p in listed if p.startswith("tests/layers/fixtures/")])


if __name__ == "__main__":
    unittest.main()
