# SPDX-License-Identifier: Apache-2.0
"""Writes, or checks, docs/python.md's engine table from an engine test run.

    table.py --write RESULTS DOC    replace the table between the markers with the run's rows
    table.py --check RESULTS DOC    exit 1 (with a diff) when the doc's table is not the run's

RESULTS is the JSON that python/engines/tests/conftest.py writes at the end of a run
(KVPORT_ENGINE_RESULTS): one row per engine and call, recorded once that call's assertions
passed. `make test-engines` checks; `make engine-table` writes."""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

BEGIN = "<!-- engine-table: written by python/engines/table.py from `make engine-table` -->"
END = "<!-- engine-table end -->"


def render(results: dict) -> str:
    rows = sorted(results["rows"], key=lambda r: (r["engine"], r["call"]))
    lines = [BEGIN, "", "| engine | version | call | result |", "|---|---|---|---|"]
    lines += [f"| {r['engine']} | {r['version']} | {r['call']} | {r['result']} |" for r in rows]
    lines += ["", END]
    return "\n".join(lines)


def split(doc: str):
    start, end = doc.find(BEGIN), doc.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"table.py: the markers {BEGIN!r} ... {END!r} are not in the doc")
    return doc[:start], doc[start:end + len(END)], doc[end + len(END):]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    parser.add_argument("results", type=Path)
    parser.add_argument("doc", type=Path)
    args = parser.parse_args()

    results = json.loads(args.results.read_text())
    if results["exitstatus"] != 0:
        print(f"table.py: the run in {args.results} failed; no table from it", file=sys.stderr)
        return 1
    before, table, after = split(args.doc.read_text())
    fresh = render(results)
    if args.write:
        args.doc.write_text(before + fresh + after)
        print(f"table.py: {len(results['rows'])} rows written to {args.doc}")
        return 0
    if table != fresh:
        diff = difflib.unified_diff(table.splitlines(), fresh.splitlines(), str(args.doc),
                                    "this run", lineterm="")
        print("\n".join(diff))
        print(f"table.py: {args.doc}'s engine table is not this run's: make engine-table",
              file=sys.stderr)
        return 1
    print(f"table.py: {args.doc}'s engine table matches this run ({len(results['rows'])} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
