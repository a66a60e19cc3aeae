#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks deploy/: every YAML and JSON file parses; the manifests and the Grafana dashboard
name only metrics the node serves (read from a real `kvport serve --http` /metrics page) and
only `kvport serve` flags that exist (from `kvport serve --help`); and `kvport config check`
accepts the ConfigMap's node.yaml. Usage: check_deploy.py KVPORT_BINARY SOURCE_DIR"""
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request

import yaml

failures = []


def fail(message):
    failures.append(message)
    print("FAIL:", message)


def served_metrics(kvport):
    node = subprocess.Popen([kvport, "--log-level", "warn", "serve", "--listen", "127.0.0.1:0",
                             "--unix-socket", "", "--capacity", "16MiB", "--threads", "1",
                             "--http", "0"], stdout=subprocess.PIPE, text=True)
    try:
        http = None
        for line in node.stdout:
            m = re.match(r"kvport: http on (\S+)", line)
            if m:
                http = m.group(1)
                break
        if http is None:
            sys.exit("kvport serve --http did not start")
        with urllib.request.urlopen(f"http://{http}/metrics", timeout=10) as r:
            page = r.read().decode()
    finally:
        node.terminate()
        node.wait(timeout=30)
    names = set()
    for line in page.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            names.add(m.group(1))
            if m.group(2) == "histogram":
                names.update(m.group(1) + s for s in ("_bucket", "_sum", "_count"))
    return names


def main():
    kvport, root = sys.argv[1], sys.argv[2]
    deploy = os.path.join(root, "deploy")
    documents = {}
    for folder, _, files in os.walk(deploy):
        for name in sorted(files):
            path = os.path.join(folder, name)
            text = open(path, encoding="utf-8").read()
            try:
                if name.endswith((".yaml", ".yml")):
                    documents[path] = list(yaml.safe_load_all(text))
                elif name.endswith(".json"):
                    documents[path] = [json.loads(text)]
                else:
                    continue
            except Exception as e:  # noqa: BLE001 - any parse error is the finding
                fail(f"{path} does not parse: {e}")
    if not documents:
        fail("no YAML or JSON under deploy/")

    metrics = served_metrics(kvport)
    help_text = subprocess.run([kvport, "serve", "--help"], capture_output=True, text=True).stdout
    flags = set(re.findall(r"(--[a-z][a-z-]*)", help_text))
    for path, docs in documents.items():
        text = json.dumps(docs)
        for name in set(re.findall(r"\bkvport_[a-z_]+", text)):
            if name not in metrics:
                fail(f"{path} names metric {name}, which the node does not serve")
        for doc in docs:
            if not isinstance(doc, dict) or doc.get("kind") not in ("DaemonSet", "Deployment"):
                continue
            for c in doc["spec"]["template"]["spec"]["containers"]:
                args = c.get("args", [])
                if args[:1] != ["serve"]:
                    fail(f"{path}: container {c['name']} does not run `kvport serve`")
                for a in args[1:]:
                    if a.startswith("--") and a.split("=")[0] not in flags:
                        fail(f"{path}: `kvport serve` has no flag {a}")

    configmaps = [d for docs in documents.values() for d in docs
                  if isinstance(d, dict) and d.get("kind") == "ConfigMap"]
    if not configmaps:
        fail("no ConfigMap with the node config")
    for cm in configmaps:
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write(cm["data"]["node.yaml"])
        env = dict(os.environ)
        # The ConfigMap is for a cache host; this machine may have less memory than its capacity.
        env["KVPORT_ALLOW_CAPACITY_OVER_HOST_MEMORY"] = "true"
        r = subprocess.run([kvport, "config", "check", f.name], capture_output=True, text=True,
                           env=env)
        os.unlink(f.name)
        if r.returncode != 0:
            fail(f"kvport config check refuses the ConfigMap's node.yaml: {r.stdout}{r.stderr}")
    print(f"check_deploy: {len(documents)} files, {len(metrics)} metric names served, "
          f"{len(flags)} serve flags; {'FAILED' if failures else 'OK'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
