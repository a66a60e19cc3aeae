# SPDX-License-Identifier: Apache-2.0
"""Builds kvport's wheel from a build tree, with the standard library only (no network, no
build backend): the kvport and eic packages from --tree (sources, type stubs and their py.typed
markers), the kvport CLI as kvport/bin/kvport, debug info stripped from the binaries. The tag
names the interpreter and platform the extension was built for (cp311-cp311-linux_x86_64)."""

import argparse
import base64
import hashlib
import os
import stat
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

SUMMARY = "kvport: an open remote KV cache for LLM inference, with a drop-in eic module"


def wheel_tag(python_tag: str, platform: str) -> str:
    """cp311-cp311-linux_x86_64: the extension's interpreter and platform (this interpreter's
    when not given: a cross build names the target's)."""
    python_tag = python_tag or f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = platform or sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{python_tag}-{python_tag}-{platform}"


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def stripped(path: str, strip: str, scratch: str) -> bytes:
    if not strip:
        with open(path, "rb") as f:
            return f.read()
    out = os.path.join(scratch, os.path.basename(path))
    subprocess.run([strip, "--strip-debug", "-o", out, path], check=True)
    with open(out, "rb") as f:
        return f.read()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--version", required=True)
    parser.add_argument("--tree", required=True, help="build/python")
    parser.add_argument("--cli", required=True, help="the kvport binary")
    parser.add_argument("--strip", default="")
    parser.add_argument("--python-tag", default="", help="e.g. cp311")
    parser.add_argument("--platform", default="", help="e.g. linux_aarch64")
    parser.add_argument("--out", required=True)
    parser.add_argument("--stamp", required=True)
    args = parser.parse_args()

    dist_info = f"kvport-{args.version}.dist-info"
    tag = wheel_tag(args.python_tag, args.platform)
    files = []  # (name in the wheel, bytes, executable)
    with tempfile.TemporaryDirectory() as scratch:
        for package in ("kvport", "eic"):
            root = os.path.join(args.tree, package)
            for folder, _, names in sorted(os.walk(root)):
                for name in sorted(names):
                    if not name.endswith((".py", ".pyi", ".so")) and name != "py.typed":
                        continue
                    path = os.path.join(folder, name)
                    arcname = os.path.relpath(path, args.tree).replace(os.sep, "/")
                    data = stripped(path, args.strip, scratch) if name.endswith(".so") else \
                        open(path, "rb").read()
                    files.append((arcname, data, False))
        files.append(("kvport/bin/kvport", stripped(args.cli, args.strip, scratch), True))

    metadata = "\n".join([
        "Metadata-Version: 2.1", "Name: kvport", f"Version: {args.version}",
        f"Summary: {SUMMARY}", "License: Apache-2.0", "Requires-Python: >=3.9", "", ""])
    wheel = "\n".join(["Wheel-Version: 1.0", "Generator: kvport make_wheel.py",
                       "Root-Is-Purelib: false", f"Tag: {tag}", "", ""])
    files += [(f"{dist_info}/METADATA", metadata.encode(), False),
              (f"{dist_info}/WHEEL", wheel.encode(), False),
              (f"{dist_info}/top_level.txt", b"eic\nkvport\n", False),
              (f"{dist_info}/entry_points.txt",
               b"[console_scripts]\nkvport = kvport.__main__:main\n", False)]
    record = [record_line(name, data) for name, data, _ in files]
    record.append(f"{dist_info}/RECORD,,")

    os.makedirs(args.out, exist_ok=True)
    for old in os.listdir(args.out):
        if old.endswith(".whl"):
            os.remove(os.path.join(args.out, old))
    target = os.path.join(args.out, f"kvport-{args.version}-{tag}.whl")
    partial = target + ".partial"
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as whl:
        for name, data, executable in files:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (stat.S_IFREG | (0o755 if executable else 0o644)) << 16
            whl.writestr(info, data)
        whl.writestr(zipfile.ZipInfo(f"{dist_info}/RECORD", date_time=(2026, 1, 1, 0, 0, 0)),
                     "\n".join(record) + "\n")
    os.replace(partial, target)
    with open(args.stamp, "w") as f:
        f.write(target + "\n")
    print(f"make_wheel: {target}")


if __name__ == "__main__":
    main()
