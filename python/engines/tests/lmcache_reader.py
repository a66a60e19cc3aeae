# SPDX-License-Identifier: Apache-2.0
"""A second LMCache worker process (test_lmcache.py): builds LMCache's remote tier from the
YAML in argv[1], reads the chunk whose hash is argv[2] and prints the SHA-256 of its bytes.
Exit status 1 when LMCache finds no chunk."""

import hashlib
import sys
from pathlib import Path

import pytest
import torch

from test_lmcache import LMCache, key


def main() -> int:
    lmcache = LMCache(Path(sys.argv[1]), pytest.MonkeyPatch())
    try:
        obj = lmcache.remote.get_blocking(key(int(sys.argv[2])))
        if obj is None:
            return 1
        print(hashlib.sha256(obj.tensor.view(torch.uint8).numpy().tobytes()).hexdigest())
        return 0
    finally:
        lmcache.close()


if __name__ == "__main__":
    sys.exit(main())
