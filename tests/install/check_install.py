#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What `make install` and the Debian package put on a host (docs/operations.md, "Installing").

  check_install.py exports --library libkvport.so --include DIR --archive A.a ...
      libkvport.so exports exactly the public API: every symbol it exports belongs to a name
      declared in include/kvport/, and every function the static libraries define for such a
      name (strong, not inline) is exported (a KVPORT_API forgotten in a header).
  check_install.py prefix --build DIR --source DIR --cmake CMAKE --cxx CXX --libdir D --soversion V
      cmake --install into a temporary prefix, from the tree already built (nothing is
      rebuilt); checks the layout, the soname, the headers (each compiles alone against the
      prefix), the systemd unit and config (kvport config check accepts them), then builds
      tests/install/consumer against the prefix with find_package and with pkg-config and runs
      it (an embedded node, a put and a get through libkvport.so).
  check_install.py deb --build DIR --cpack CPACK
      cpack -G DEB, the package's fields and files; then, as root on a host with dpkg,
      dpkg -i, the installed files, dpkg -r and dpkg -P (skipped, with the reason, otherwise).

Exit status 0 passed, 1 failed, 77 skipped (ctest SKIP_RETURN_CODE).
"""

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
GiB = 1 << 30


class Failed(Exception):
    pass


def run(cmd, env=None, cwd=None, check=True):
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    if check and proc.returncode != 0:
        raise Failed(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-4000:]}")
    return proc


def expect(condition, message):
    if not condition:
        raise Failed(message)


# ---- exports ---------------------------------------------------------------------------------

def public_names(include_dir):
    """Names declared at namespace scope in the public headers: classes and structs that are
    defined there (not only forward-declared), functions, and namespaces below kvport::."""
    names = set()
    for header in sorted(os.listdir(include_dir)):
        if not header.endswith(".h"):
            continue
        with open(os.path.join(include_dir, header), encoding="utf-8") as f:
            text = f.read()
        text = re.sub(r"//[^\n]*", "", text)
        for m in re.finditer(r"^namespace kvport::(\w+)", text, re.M):
            names.add(m.group(1))
        for m in re.finditer(r"^(?:class|struct)\s+(?:\[\[\w+\]\]\s+)?(?:KVPORT_API\s+)?(\w+)[^;{]*\{",
                             text, re.M):
            names.add(m.group(1))
        for m in re.finditer(r"^(?!\s)(?!template|inline|constexpr|using|enum|namespace|#)"
                             r"[^\n;{}]*?\b(\w+)\(", text, re.M):
            names.add(m.group(1))
    names.discard("KVPORT_API")
    return names


SPECIAL = re.compile(r"^(typeinfo name for |typeinfo for |vtable for |VTT for |guard variable for |"
                     r"non-virtual thunk to |virtual thunk to |construction vtable for .*-in-)")


def kvport_name(symbol):
    """The name right below kvport:: that a demangled symbol belongs to, or None."""
    symbol = SPECIAL.sub("", symbol)
    # The entity's qualified name ends at the parameter list (the first '(' outside template
    # arguments) and starts after the last space before it outside template arguments (a
    # function template's return type comes first).
    depth, end = 0, len(symbol)
    for i, c in enumerate(symbol):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0:
            end = i
            break
    depth, start = 0, 0
    for i in range(end):
        c = symbol[i]
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == " " and depth == 0:
            start = i + 1
    m = re.match(r"kvport::(\w+)", symbol[start:end])
    return m.group(1) if m else None


def nm_symbols(path, dynamic):
    cmd = ["nm", "-C", "--defined-only"] + (["-D"] if dynamic else []) + [path]
    out = run(cmd).stdout
    symbols = []
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and len(parts[1]) == 1:
            symbols.append((parts[1], parts[2]))
    return symbols


def check_exports(args):
    names = public_names(args.include)
    dynamic = nm_symbols(args.library, dynamic=True)
    exported = {s for _, s in dynamic}
    leaked = []
    weak_outside = 0
    for kind, s in sorted(dynamic, key=lambda e: e[1]):
        if s.startswith("_") and "::" not in s:  # _init, _fini, linker symbols
            continue
        owner = kvport_name(s)
        if owner is not None:
            if owner not in names:
                leaked.append(s)
        elif kind in "WVu":
            # Instantiations of templates of other libraries (std::) that have default
            # visibility, which -fvisibility cannot hide: weak, merged with any other copy.
            weak_outside += 1
        else:
            leaked.append(s)
    missing = []
    for archive in args.archive:
        for kind, s in nm_symbols(archive, dynamic=False):
            if kind not in "TDRB":  # strong definitions only: inline and template code is weak
                continue
            owner = kvport_name(s)
            if owner in names and s not in exported:
                missing.append(f"{s}  ({os.path.basename(archive)})")
    problems = []
    if leaked:
        problems.append(f"{len(leaked)} exported symbols are not kvport's public API "
                        "(include/kvport/) nor weak instantiations of another library's "
                        "templates; the first ones:\n  " + "\n  ".join(leaked[:40]))
    if missing:
        problems.append(f"{len(missing)} functions of the public API are not exported (a "
                        "KVPORT_API missing in include/kvport/?); the first ones:\n  " +
                        "\n  ".join(sorted(missing)[:40]))
    if problems:
        raise Failed("\n".join(problems))
    print(f"exports: {os.path.basename(args.library)} exports {len(exported) - weak_outside} "
          f"symbols of kvport's public API ({len(names)} names in include/kvport/) and "
          f"{weak_outside} weak template instantiations of other libraries; no internal symbol, "
          f"no public function hidden")


# ---- prefix install ----------------------------------------------------------------------------

def systemd_size(text):
    m = re.fullmatch(r"(\d+)([KMGT]?)", text.strip())
    expect(m, f"cannot read the size {text!r}")
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[m.group(2)]


def read_unit(path):
    values = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith(("#", ";", "[")):
                continue
            key, _, value = line.partition("=")
            values.setdefault(key.strip(), []).append(value.strip())
    return values


def environment_file(path):
    """KEY=VALUE lines of an EnvironmentFile, and the commented-out examples (#KEY=VALUE)."""
    active, examples = {}, {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            m = re.fullmatch(r"(#?)(KVPORT_[A-Z0-9_]+)=(.*)", line)
            if m:
                (examples if m.group(1) else active)[m.group(2)] = m.group(3)
    return active, examples


def check_unit(unit_path, bindir, etc, kvport):
    unit = read_unit(unit_path)

    def one(key):
        expect(key in unit, f"{unit_path}: no {key}=")
        return unit[key][-1]

    exec_start = one("ExecStart").split()
    expect(exec_start[:2] == [os.path.join(bindir, "kvport"), "serve"],
           f"{unit_path}: ExecStart={' '.join(exec_start)} does not run {bindir}/kvport serve")
    config = exec_start[exec_start.index("--config") + 1]
    expect(config == os.path.join(etc, "kvport", "node.yaml") and os.path.isfile(config),
           f"{unit_path}: --config {config} is not the installed node config")
    env_file = one("EnvironmentFile").lstrip("-")
    expect(env_file == os.path.join(etc, "default", "kvport") and os.path.isfile(env_file),
           f"{unit_path}: EnvironmentFile={env_file} is not the installed environment file")
    for key, wanted in [("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"),
                        ("PrivateTmp", "yes"), ("Restart", "on-failure"),
                        ("ProtectHome", "yes")]:
        expect(one(key) == wanted, f"{unit_path}: {key}={one(key)}, expected {wanted}")
    expect(one("DynamicUser") == "yes" or "User" in unit, f"{unit_path}: runs as root")

    # kvport config check accepts the config as the unit runs it: with the environment file,
    # and with each example of the environment file switched on.
    active, examples = environment_file(env_file)
    env = dict(os.environ, **active)
    report = json.loads(run([kvport, "config", "check", "--json", config], env=env).stdout)
    capacity = report["values"]["capacity"]["value"]
    env_examples = dict(env, KVPORT_ALLOW_CAPACITY_OVER_HOST_MEMORY="true", **examples)
    run([kvport, "config", "check", config], env=env_examples)

    memory_max = systemd_size(one("MemoryMax"))
    memory_high = systemd_size(one("MemoryHigh"))
    expect(memory_max >= capacity + GiB and capacity < memory_high < memory_max,
           f"{unit_path}: MemoryHigh={one('MemoryHigh')} MemoryMax={one('MemoryMax')} leave less "
           f"than the documented margin above capacity ({capacity} bytes)")
    return config


def check_headers(include_root, cxx, cflags):
    """Every installed header compiles on its own, against the prefix alone."""
    headers = sorted(h for h in os.listdir(os.path.join(include_root, "kvport")) if h.endswith(".h"))
    for header in headers:
        with open(os.path.join(include_root, "kvport", header), encoding="utf-8") as f:
            for include in re.findall(r'^#include "([^"]+)"', f.read(), re.M):
                expect(include.startswith("kvport/") and
                       os.path.isfile(os.path.join(include_root, include)),
                       f"installed kvport/{header} includes \"{include}\", which is not installed")
    # One compiler run per header, each header first in its translation unit.
    def compile_alone(header):
        return header, subprocess.run(
            [cxx, "-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-x", "c++", "-"] +
            cflags, input=f"#include <kvport/{header}>\n", text=True, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT)

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for header, proc in pool.map(compile_alone, headers):
            expect(proc.returncode == 0,
                   f"installed kvport/{header} does not compile on its own:\n{proc.stdout[-3000:]}")
    return len(headers)


def check_prefix(args):
    tmp = tempfile.mkdtemp(prefix="kvport-install-")
    try:
        prefix = os.path.join(tmp, "prefix")
        run([args.cmake, "--install", args.build, "--prefix", prefix])
        libdir = os.path.join(prefix, args.libdir)
        bindir = os.path.join(prefix, "bin")
        etc = os.path.join(prefix, "etc")
        version = args.version
        expected = [
            "bin/kvport",
            f"{args.libdir}/libkvport.so", f"{args.libdir}/libkvport.so.{args.soversion}",
            f"{args.libdir}/libkvport.so.{version}",
            f"{args.libdir}/cmake/kvport/kvportConfig.cmake",
            f"{args.libdir}/cmake/kvport/kvportConfigVersion.cmake",
            f"{args.libdir}/cmake/kvport/kvportTargets.cmake",
            f"{args.libdir}/pkgconfig/kvport.pc",
            "etc/kvport/node.yaml", "etc/default/kvport", "lib/systemd/system/kvport.service",
        ]
        source_headers = sorted(h for h in os.listdir(os.path.join(args.source, "include", "kvport"))
                                if h.endswith(".h"))
        expected += [f"include/kvport/{h}" for h in source_headers]
        for rel in expected:
            expect(os.path.exists(os.path.join(prefix, rel)), f"the install has no {rel}")
        found = sorted(os.path.relpath(os.path.join(d, f), prefix)
                       for d, _, files in os.walk(prefix) for f in files)
        # kvportTargets-<config>.cmake: one per build type installed.
        unexpected = [f for f in found if f not in expected and
                      not re.fullmatch(re.escape(args.libdir) + r"/cmake/kvport/kvportTargets-\w+\.cmake", f)]
        expect(not unexpected, f"the install has files no rule was meant to install: {unexpected}")
        soname = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]",
                           run(["readelf", "-d", os.path.join(libdir, "libkvport.so")]).stdout)
        expect(soname and soname.group(1) == f"libkvport.so.{args.soversion}",
               f"libkvport.so's soname is {soname and soname.group(1)}, expected "
               f"libkvport.so.{args.soversion}")
        with open(os.path.join(prefix, "etc/kvport/node.yaml"), encoding="utf-8") as a, \
             open(os.path.join(args.source, "examples/node.yaml"), encoding="utf-8") as b:
            expect(a.read() == b.read(), "etc/kvport/node.yaml is not examples/node.yaml")

        kvport = os.path.join(bindir, "kvport")
        check_unit(os.path.join(prefix, "lib/systemd/system/kvport.service"), bindir, etc, kvport)
        verify = shutil.which("systemd-analyze")
        if verify:
            proc = run([verify, "verify", "--man=no",
                        os.path.join(prefix, "lib/systemd/system/kvport.service")], check=False)
            expect(proc.returncode == 0, f"systemd-analyze verify:\n{proc.stdout}")
            unit_note = "systemd-analyze verify passes"
        else:
            unit_note = "systemd-analyze not installed: unit checked by this script only"

        pc_env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
        cflags = run(["pkg-config", "--cflags", "kvport"], env=pc_env).stdout.split()
        libs = run(["pkg-config", "--libs", "kvport"], env=pc_env).stdout.split()
        expect(f"-I{prefix}/include" in [os.path.normpath(f) if not f.startswith("-I") else
                                         "-I" + os.path.normpath(f[2:]) for f in cflags],
               f"pkg-config --cflags kvport gives {cflags}, not the prefix's include/")
        headers = check_headers(os.path.join(prefix, "include"), args.cxx, cflags)

        # find_package(kvport): nothing but the prefix on CMAKE_PREFIX_PATH.
        consumer = os.path.join(args.source, "tests/install/consumer")
        cbuild = os.path.join(tmp, "consumer-cmake")
        run([args.cmake, "-S", consumer, "-B", cbuild, "-G", "Ninja", f"-DCMAKE_PREFIX_PATH={prefix}",
             f"-DCMAKE_CXX_COMPILER={args.cxx}", "-DCMAKE_BUILD_TYPE=Release"])
        run([args.cmake, "--build", cbuild])
        ran = run([os.path.join(cbuild, "consumer")]).stdout
        expect("OK" in ran, f"the find_package consumer: {ran}")
        needed = run(["readelf", "-d", os.path.join(cbuild, "consumer")]).stdout
        expect(f"libkvport.so.{args.soversion}" in needed,
               "the find_package consumer does not link libkvport.so")

        # pkg-config.
        exe = os.path.join(tmp, "consumer-pkgconfig")
        run([args.cxx, "-std=c++20", "-Wall", "-Wextra", "-Werror", "-O1",
             os.path.join(consumer, "main.cc"), "-o", exe] + cflags + libs +
            [f"-Wl,-rpath,{libdir}"])
        ran2 = run([exe]).stdout
        expect("OK" in ran2, f"the pkg-config consumer: {ran2}")
        print(f"prefix: installed {len(found)} files into a temporary prefix; soname "
              f"libkvport.so.{args.soversion}; {headers} headers compile alone; {unit_note}; "
              f"kvport config check accepts etc/kvport/node.yaml")
        print(f"prefix: find_package consumer: {ran.strip().splitlines()[-1]}")
        print(f"prefix: pkg-config consumer:   {ran2.strip().splitlines()[-1]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- Debian package ----------------------------------------------------------------------------

def check_deb(args):
    tmp = tempfile.mkdtemp(prefix="kvport-deb-")
    try:
        run([args.cpack, "-G", "DEB", "--config", os.path.join(args.build, "CPackConfig.cmake"),
             "-B", tmp], cwd=args.build)
        debs = [f for f in os.listdir(tmp) if f.endswith(".deb")]
        expect(len(debs) == 1, f"cpack wrote {debs}, expected one .deb")
        deb = os.path.join(tmp, debs[0])
        info = run(["dpkg-deb", "-f", deb]).stdout
        fields = dict(re.findall(r"^(\S+): (.*)$", info, re.M))
        expect(fields.get("Package") == "kvport" and fields.get("Version") == args.version,
               f"package fields: {fields}")
        expect("libfmt" in fields.get("Depends", ""),
               f"Depends: {fields.get('Depends')!r} does not name the shared libraries' packages")
        contents = run(["dpkg-deb", "-c", deb]).stdout
        files = sorted(line.split()[-1].lstrip(".") for line in contents.splitlines()
                       if not line.startswith("d") and not line.startswith("l"))
        links = sorted(line.split()[-3].lstrip(".") for line in contents.splitlines()
                       if line.startswith("l"))
        for path in ["/usr/bin/kvport", f"/usr/lib/libkvport.so.{args.version}",
                     "/usr/lib/systemd/system/kvport.service", "/etc/kvport/node.yaml",
                     "/etc/default/kvport", "/usr/include/kvport/client.h",
                     "/usr/lib/pkgconfig/kvport.pc", "/usr/lib/cmake/kvport/kvportConfig.cmake"]:
            expect(path in files, f"the package has no {path}")
        conffiles = run(["dpkg-deb", "-I", deb, "conffiles"]).stdout.split()
        expect(sorted(conffiles) == ["/etc/default/kvport", "/etc/kvport/node.yaml"],
               f"conffiles: {conffiles}")
        print(f"deb: {debs[0]}: {len(files)} files, {len(links)} links, Depends: {fields['Depends']}")

        if os.geteuid() != 0:
            print("deb: dpkg -i / -r / -P skipped: they change the host and need root (run the "
                  "test as root to include them)")
            return SKIP
        if not shutil.which("dpkg") or not os.path.isdir("/var/lib/dpkg"):
            print("deb: dpkg -i / -r / -P skipped: this host has no dpkg database")
            return SKIP
        status = run(["dpkg-query", "-W", "-f=${db:Status-Status}", "kvport"], check=False)
        if status.returncode == 0 and status.stdout.strip() not in ("", "not-installed"):
            print(f"deb: dpkg -i / -r / -P skipped: a kvport package is already on this host "
                  f"({status.stdout.strip()}); this test does not replace it")
            return SKIP
        try:
            run(["dpkg", "-i", deb])
            for path in files:
                expect(os.path.isfile(path), f"after dpkg -i, {path} is missing")
            run(["/usr/bin/kvport", "version"])
            run(["/usr/bin/kvport", "config", "check", "/etc/kvport/node.yaml"])
            check_unit("/usr/lib/systemd/system/kvport.service", "/usr/bin", "/etc",
                       "/usr/bin/kvport")
            run(["dpkg", "-r", "kvport"])
            left = [p for p in files if os.path.exists(p) and p not in conffiles]
            expect(not left, f"after dpkg -r, still there: {left}")
            expect(all(os.path.exists(p) for p in conffiles),
                   "dpkg -r removed the conffiles (only a purge should)")
            run(["dpkg", "-P", "kvport"])
            left = [p for p in files + links if os.path.lexists(p)]
            expect(not left, f"after dpkg -P, still there: {left}")
            expect(not os.path.exists("/etc/kvport"), "after dpkg -P, /etc/kvport is still there")
        finally:
            run(["dpkg", "-P", "kvport"], check=False)
        print("deb: dpkg -i installs every file (kvport version and config check run), dpkg -r "
              "leaves only the conffiles, dpkg -P leaves nothing")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("exports")
    p.add_argument("--library", required=True)
    p.add_argument("--include", required=True)
    p.add_argument("--archive", action="append", default=[])
    p = sub.add_parser("prefix")
    for flag in ("--build", "--source", "--cmake", "--cxx", "--libdir", "--soversion", "--version"):
        p.add_argument(flag, required=True)
    p = sub.add_parser("deb")
    for flag in ("--build", "--cpack", "--version"):
        p.add_argument(flag, required=True)
    args = parser.parse_args()
    try:
        if args.command == "exports":
            check_exports(args)
        elif args.command == "prefix":
            check_prefix(args)
        else:
            return check_deb(args)
    except Failed as e:
        print(f"{args.command}: FAILED: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
