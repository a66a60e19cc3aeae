# SPDX-License-Identifier: Apache-2.0
"""kvport as an L2 backend of LMCache's multiprocess (MP) mode.

LMCache's ``native_plugin`` L2 adapter imports ``module_path``, takes ``class_name`` from it and
constructs it with ``adapter_params`` as keyword arguments; its NativeConnectorL2Adapter then
drives the object through ``event_fd``, ``submit_batch_get/set/exists/delete`` and
``drain_completions``. The adapter JSON (docs/python.md, "LMCache multiprocess mode")::

    {"type": "native_plugin", "module_path": "kvport.lmcache_mp", "class_name": "L2Connector",
     "adapter_params": {"endpoint": "127.0.0.1:7700", "namespace": "lmcache"}}

The connector is C++ (kvport._core.LMCacheL2Connector, over kvport's asynchronous client):
this module only gives it the name LMCache is told to import. Nothing of LMCache is imported
here.
"""

from __future__ import annotations

from . import _core

__all__ = ["L2Connector"]


class L2Connector(_core.LMCacheL2Connector):
    """One kvport client serving LMCache's L2 calls; see kvport._core.LMCacheL2Connector.

    Keyword arguments (LMCache's ``adapter_params``): endpoint (required: "HOST:PORT",
    "eic://HOST:PORT/NS", "unix:/PATH", "a:1;b:2", "etcd:HOST:PORT/CLUSTER"), namespace (default
    the endpoint's /NS, else the default namespace ""), token or token_file (else
    $KVPORT_TOKEN), transport_type (0 automatic: shared memory with a node on this host, else
    TCP; 1 TCP), connections, timeout and connect_timeout (seconds), ttl_seconds (-1: none),
    instance_id, tls_ca_file / tls_cert_file / tls_key_file, replicas, write_quorum, checksums.

    Every finished call comes back from drain_completions() as (future_id, ok, error, results):
    results has one bool per key (stored / read whole into its buffer / exists / deleted);
    drain_completions(codes=True) gives each key's kvport.KeyCode number instead."""
