#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks deploy/: every YAML and JSON file parses; the manifests and the Grafana dashboard
name only metrics the node serves (read from a real `kvport serve --http` /metrics page) and
only `kvport serve` flags that exist (from `kvport serve --help`); and `kvport config check`
accepts the ConfigMap's node.yaml. The RDMA variants (docs/operations.md, "Running a node with
RDMA"): a DaemonSet whose config has `ucx: true` requests an RDMA device, IPC_LOCK and the host's
network and keeps the rest of the shipped DaemonSet's hardening; the systemd drop-in
(kvport-rdma.conf) changes only what RDMA needs, and with systemd-analyze installed, the unit
alone and with the drop-in pass `systemd-analyze verify` and `systemd-analyze security` finds
the drop-in weakens nothing else. Usage: check_deploy.py KVPORT_BINARY SOURCE_DIR"""
import json
import os
import re
import shutil
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


# ---- Kubernetes: the RDMA DaemonSet -----------------------------------------------------------

def node_config(configmaps, name):
    """The node.yaml of the ConfigMap `name`, parsed; None when there is no such ConfigMap."""
    for cm in configmaps:
        if cm["metadata"]["name"] == name:
            return yaml.safe_load(cm["data"]["node.yaml"])
    return None


def container_hardening(container):
    ctx = container.get("securityContext", {})
    return (ctx.get("allowPrivilegeEscalation"), ctx.get("readOnlyRootFilesystem"),
            ctx.get("privileged", False), ctx.get("capabilities", {}).get("drop"))


def check_daemonsets(documents):
    """Each folder is applied on its own (kubectl apply -f FOLDER): no folder holds two objects
    of one kind and name, and a DaemonSet mounts a ConfigMap of its own folder. A DaemonSet whose
    node config has `ucx: true` is an RDMA variant: it requests an RDMA device and IPC_LOCK, is
    on the host's network (or a secondary one) and is otherwise as hardened as the DaemonSet
    without UCX."""
    by_folder = {}
    for path, docs in documents.items():
        for doc in docs:
            if isinstance(doc, dict) and "kind" in doc and "metadata" in doc:
                by_folder.setdefault(os.path.dirname(path), []).append((path, doc))
    plain, rdma = [], []
    for folder, objects in by_folder.items():
        seen = {}
        for path, doc in objects:
            key = (doc["kind"], doc["metadata"]["name"])
            if key in seen:
                fail(f"{folder}: {key[0]} {key[1]} is in both {seen[key]} and {path}")
            seen[key] = path
        configmaps = [doc for _, doc in objects if doc["kind"] == "ConfigMap"]
        for path, doc in objects:
            if doc["kind"] != "DaemonSet":
                continue
            pod = doc["spec"]["template"]["spec"]
            names = [v["configMap"]["name"] for v in pod.get("volumes", []) if "configMap" in v]
            if len(names) != 1:
                fail(f"{path}: mounts {len(names)} ConfigMaps, expected the node config")
                continue
            config = node_config(configmaps, names[0])
            if config is None:
                fail(f"{path}: mounts ConfigMap {names[0]}, which is not in {folder}")
                continue
            (rdma if config.get("ucx") is True else plain).append((path, doc))
    if not rdma:
        fail("no DaemonSet with `ucx: true` in its config (the RDMA variant)")
    for path, doc in rdma:
        pod = doc["spec"]["template"]["spec"]
        annotations = doc["spec"]["template"]["metadata"].get("annotations", {})
        if pod.get("hostNetwork") is not True and "k8s.v1.cni.cncf.io/networks" not in annotations:
            fail(f"{path}: `ucx: true` without the host's network or a secondary network: the "
                 "pod has no RDMA interface")
        for c in pod["containers"]:
            limits = c.get("resources", {}).get("limits", {})
            devices = [r for r in limits if r.startswith("rdma/")]
            if not devices:
                fail(f"{path}: container {c['name']} has `ucx: true` but requests no RDMA device "
                     "(an rdma/ resource of the RDMA shared device plugin): UCX would find only "
                     "its software transports")
            caps = c.get("securityContext", {}).get("capabilities", {})
            if caps.get("add") != ["IPC_LOCK"]:
                fail(f"{path}: container {c['name']} adds {caps.get('add')}, expected exactly "
                     "IPC_LOCK (the memlock limit of memory registration)")
            ctx = c.get("securityContext", {})
            if "IPC_LOCK" in (caps.get("add") or []) and ctx.get("runAsUser") != 0:
                fail(f"{path}: container {c['name']} adds IPC_LOCK but does not run as UID 0, "
                     "the only user Kubernetes gives an added capability to")
            for base_path, base in plain:
                for b in base["spec"]["template"]["spec"]["containers"]:
                    if container_hardening(b) != container_hardening(c):
                        fail(f"{path}: container {c['name']}'s securityContext "
                             f"{container_hardening(c)} is not {base_path}'s "
                             f"{container_hardening(b)} (allowPrivilegeEscalation, "
                             "readOnlyRootFilesystem, privileged, capabilities.drop)")
    return len(rdma)


# ---- systemd: the RDMA drop-in -----------------------------------------------------------------

def read_unit(path):
    """KEY -> [values] of a unit file or drop-in, in order, whatever the section."""
    values = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith(("#", ";", "[")):
                continue
            key, _, value = line.partition("=")
            values.setdefault(key.strip(), []).append(value.strip())
    return values


# What the RDMA drop-in may set: anything else it sets is a change to the unit it does not need.
RDMA_DROP_IN_KEYS = {"Wants", "After", "PrivateDevices", "DevicePolicy", "DeviceAllow",
                     "SystemCallFilter", "LimitMEMLOCK", "RestrictAddressFamilies"}


def check_rdma_drop_in(unit_path, drop_in_path):
    unit, drop_in = read_unit(unit_path), read_unit(drop_in_path)
    name = os.path.basename(drop_in_path)
    for key in sorted(set(drop_in) - RDMA_DROP_IN_KEYS):
        fail(f"{name} sets {key}=, which RDMA does not need (the unit's value must stand)")
    wanted = {"LimitMEMLOCK": ["infinity"], "PrivateDevices": ["no"], "DevicePolicy": ["closed"]}
    for key, value in wanted.items():
        if drop_in.get(key) != value:
            fail(f"{name}: {key}={drop_in.get(key)}, expected {value[0]}")
    allowed = [v.split()[0] for v in drop_in.get("DeviceAllow", [])]
    if "char-infiniband_verbs" not in allowed:
        fail(f"{name}: DeviceAllow= does not name the verbs devices (char-infiniband_verbs)")
    for device in allowed:
        if not (device.startswith("/dev/infiniband/") or device == "char-infiniband_verbs"):
            fail(f"{name}: DeviceAllow={device} is not an RDMA device")
    for value in drop_in.get("SystemCallFilter", []):
        if not value.startswith("~"):
            fail(f"{name}: SystemCallFilter={value} would widen the unit's allow list")
    for value in drop_in.get("RestrictAddressFamilies", []):
        if value.startswith("~") or value.split() != ["AF_NETLINK"]:
            fail(f"{name}: RestrictAddressFamilies={value}, expected AF_NETLINK alone")
    if unit.get("PrivateDevices") != ["yes"] or "LimitMEMLOCK" in unit:
        fail("kvport.service: expected PrivateDevices=yes and no LimitMEMLOCK (the drop-in's "
             "comments say so)")


def systemd_security(analyze, unit_path):
    r = subprocess.run([analyze, "security", "--offline=true", "--json=short", unit_path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr
    return {e["json_field"]: e for e in json.loads(r.stdout)}, ""


def check_systemd(kvport, deploy):
    """The unit, alone and with each drop-in of deploy/systemd, through systemd-analyze (its
    ExecStart pointed at the binary under test, as an install rewrites it). Returns a note."""
    folder = os.path.join(deploy, "systemd")
    unit_path = os.path.join(folder, "kvport.service")
    drop_ins = sorted(f for f in os.listdir(folder) if f.endswith(".conf"))
    if "kvport-rdma.conf" not in drop_ins:
        fail("no deploy/systemd/kvport-rdma.conf (the RDMA drop-in)")
        return "no drop-in"
    check_rdma_drop_in(unit_path, os.path.join(folder, "kvport-rdma.conf"))
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        return "systemd-analyze not installed: the drop-in checked by this script only"
    with tempfile.TemporaryDirectory() as tmp:
        unit = os.path.join(tmp, "kvport.service")
        with open(unit_path, encoding="utf-8") as f:
            text = f.read().replace("/usr/bin/kvport", os.path.abspath(kvport))
        with open(unit, "w", encoding="utf-8") as f:
            f.write(text)
        reports, unavailable = {}, ""
        for drop_in in [None] + drop_ins:
            d = os.path.join(tmp, "kvport.service.d")
            shutil.rmtree(d, ignore_errors=True)
            if drop_in:
                os.mkdir(d)
                shutil.copy(os.path.join(folder, drop_in), d)
            label = f"kvport.service with {drop_in}" if drop_in else "kvport.service"
            # verify exits 0 on an unknown key or a value it cannot parse; it says so, though.
            r = subprocess.run([analyze, "verify", "--man=no", unit], capture_output=True,
                               text=True)
            if r.returncode != 0 or (r.stdout + r.stderr).strip():
                fail(f"systemd-analyze verify {label}: exit {r.returncode}\n{r.stdout}{r.stderr}")
            reports[drop_in], error = systemd_security(analyze, unit)
            if reports[drop_in] is None:
                unavailable = error.strip().splitlines()[-1] if error.strip() else "no reason"
    verified = f"systemd-analyze verify passes for the unit alone and with {', '.join(drop_ins)}"
    if unavailable:  # systemd older than 250
        return f"{verified}; systemd-analyze security --offline unavailable ({unavailable})"
    # What the RDMA drop-in gives up, by systemd's own exposure review: the private /dev and
    # the netlink sockets, nothing else.
    base, rdma = reports[None], reports["kvport-rdma.conf"]
    lost = sorted(k for k, e in base.items() if e["set"] and k in rdma and not rdma[k]["set"])
    if lost != ["PrivateDevices", "RestrictAddressFamilies_AF_NETLINK"]:
        fail(f"kvport-rdma.conf: systemd-analyze security finds it gives up {lost}, expected "
             "PrivateDevices and RestrictAddressFamilies_AF_NETLINK only")
    # "Service has a device ACL with some special devices: char-rtc:r char-infiniband_verbs:rw"
    acl = rdma.get("DeviceAllow", {}).get("description", "").partition("devices: ")[2]
    extra = [entry for entry in acl.split() if entry.rpartition(":")[0] not in
             ("char-rtc", "char-infiniband_verbs", "/dev/infiniband/rdma_cm")]
    if extra:
        fail(f"kvport-rdma.conf: the unit's device ACL has {extra} beyond the RDMA devices "
             "(and ProtectClock's char-rtc)")
    return f"{verified}; systemd-analyze security: the RDMA drop-in gives up {', '.join(lost)} only"


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
    rdma = check_daemonsets(documents)
    systemd_note = check_systemd(kvport, deploy)
    print(f"check_deploy: {len(documents)} files, {len(metrics)} metric names served, "
          f"{len(flags)} serve flags, {rdma} RDMA DaemonSet; {systemd_note}; "
          f"{'FAILED' if failures else 'OK'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
