# SPDX-License-Identifier: Apache-2.0
"""A second LMCache worker process (test_lmcache.py): builds LMCache's remote tier from the
YAML in argv[1], reads the chunk whose hash is argv[2] and prints the SHA-256 of its bytes.
Exit status 1 when LMCache finds no chunk."""

import asyncio
import hashlib
import os
import sys
import threading

import torch

from lmcache.v1.config import LMCacheEngineConfig
from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend
from lmcache.v1.storage_backend.remote_backend import RemoteBackend

from test_lmcache import key, metadata


def main() -> int:
    os.environ["LMCACHE_CONFIG_FILE"] = sys.argv[1]
    config = LMCacheEngineConfig.from_file(sys.argv[1])
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    remote = RemoteBackend(config, metadata(), loop, LocalCPUBackend(config, metadata()))
    obj = remote.get_blocking(key(int(sys.argv[2])))
    if obj is None:
        return 1
    print(hashlib.sha256(obj.tensor.view(torch.uint8).numpy().tobytes()).hexdigest())
    return 0


if __name__ == "__main__":
    sys.exit(main())
