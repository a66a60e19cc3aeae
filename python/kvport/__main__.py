# SPDX-License-Identifier: Apache-2.0
"""`python -m kvport ...` and the `kvport` console script: run the kvport CLI.

The wheel carries the CLI as kvport/bin/kvport; in a build tree (PYTHONPATH=build/python) it
is build/bin/kvport. Arguments pass through unchanged (`kvport serve --capacity 8GiB`)."""

import os
import sys


def cli_path() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, "bin", "kvport"),
                      os.path.join(here, os.pardir, os.pardir, "bin", "kvport")):
        if os.access(candidate, os.X_OK):
            return os.path.normpath(candidate)
    raise SystemExit("kvport: the kvport CLI is not next to this package "
                     f"({os.path.join(here, 'bin', 'kvport')}); reinstall the wheel")


def main() -> None:
    path = cli_path()
    # `kvport doctor` asks this interpreter which engines it has (unless told another).
    os.environ.setdefault("KVPORT_PYTHON", sys.executable)
    os.execv(path, [path] + sys.argv[1:])


if __name__ == "__main__":
    main()
