# SPDX-License-Identifier: Apache-2.0
"""Released LMCache's Redis-protocol connectors against `kvport serve --resp` (docs/resp.md).

LMCache ships two: `redis://` (RedisConnector, redis-py's asyncio client: a chunk is two keys,
`<key>kv_bytes` then `<key>metadata`, probed and read by the metadata) and `resp://`
(RESPConnector over LMCache's own C++ client, lmcache.lmcache_redis: a chunk is one key, read
into a buffer of the full chunk's size). Each is built by LMCache's connector factory from
`remote_url`, inside LMCache's RemoteBackend, exactly as for `eic://` in test_lmcache.py, and
stores and retrieves LMCache's chunks through kvport's Redis port bytes-equal. The redis://
pair is folded into one object on the node, so under eviction a chunk whose metadata is found
always has its data (against Redis, or as two objects, LRU evicts the data first and LMCache
logs "Key exists but KV cache does not exist").
"""

from __future__ import annotations

import pytest

from test_lmcache import LMCache, key, lmcache_yaml, same

ENGINE = "lmcache"
PAIR_MISS = "Key exists but KV cache does not exist"


@pytest.fixture(scope="module")
def resp_node(node_factory):
    return node_factory(shared_memory=False, resp=True)


@pytest.fixture(scope="module", params=["redis", "resp"])
def lmcache(request, resp_node, tmp_path_factory):
    monkeypatch = pytest.MonkeyPatch()
    url = f"{request.param}://127.0.0.1:{resp_node.resp_port}"
    instance = LMCache(lmcache_yaml(tmp_path_factory.mktemp("lmc") / "lmcache.yaml", url),
                       monkeypatch)
    instance.scheme = request.param
    yield instance
    instance.close()
    monkeypatch.undo()


def objects_of(node) -> int:
    return sum(n["objects"] for n in node.stats()["namespaces"] if n["name"] == "")


def test_put_contains_get(resp_node, lmcache, engine_log, record):
    mark = engine_log.mark()
    before = objects_of(resp_node)
    expected = lmcache.put(101, seed=1)
    # One object a chunk: redis:// writes two keys, folded into one.
    assert objects_of(resp_node) - before == 1
    assert lmcache.remote.contains(key(101))
    assert lmcache.run(lmcache.remote.connection.exists(key(101)))
    assert same(lmcache.remote.get_blocking(key(101)), expected)
    assert not lmcache.remote.contains(key(109))
    # A get of a missing chunk: None. Not asked of resp://, whose client (LMCache's C++
    # lmcache_redis) waits out blocking_timeout_secs on it, against redis-server as here;
    # LMCache probes before it gets.
    if lmcache.scheme == "redis":
        assert lmcache.remote.get_blocking(key(109)) is None
    assert engine_log.errors(mark) == []
    record(ENGINE, f"{lmcache.scheme}:// submit_put_task, contains, exists, get_blocking",
           "bytes equal; one object a chunk")


def test_batched_calls(resp_node, lmcache, engine_log, record):
    mark = engine_log.mark()
    keys = [key(h) for h in (201, 202, 203)]
    objs = [lmcache.chunk(seed) for seed in (21, 22, 23)]
    expected = [o.tensor.clone() for o in objs]
    # The connector's own batched put; it takes the objects' references, as RemoteBackend
    # hands them over.
    lmcache.run(lmcache.remote.connection.batched_put(keys, objs))
    probe = [keys[0], keys[1], key(299), keys[2]]
    assert lmcache.run(lmcache.remote.batched_async_contains("lookup-1", probe)) == 2
    got = lmcache.remote.batched_get_blocking([keys[0], keys[2]])
    assert len(got) == 2
    assert same(got[0], expected[0]) and same(got[1], expected[2])
    assert engine_log.errors(mark) == []
    record(ENGINE, f"{lmcache.scheme}:// batched_put, batched_async_contains, "
                   f"batched_get_blocking", "bytes equal; hits counted to the first miss")


def test_redis_pairs_are_evicted_together(node_factory, tmp_path, monkeypatch, engine_log,
                                          record):
    """60 chunks of 4 MiB through a 64 MiB node with redis://: every chunk LMCache still finds
    reads back bytes-equal, and LMCache never meets a metadata without its data."""
    node = node_factory(shared_memory=False, resp=True, capacity="64MiB")
    lmc = LMCache(lmcache_yaml(tmp_path / "lmcache.yaml",
                               f"redis://127.0.0.1:{node.resp_port}"), monkeypatch)
    try:
        mark = engine_log.mark()
        expected = {h: lmc.put(h, seed=h) for h in range(1000, 1060)}
        found = 0
        for h, tensor in expected.items():
            if lmc.remote.contains(key(h)):
                found += 1
                assert same(lmc.remote.get_blocking(key(h)), tensor), h
        assert 0 < found < len(expected)  # some evicted, some kept
        assert not any(PAIR_MISS in m for m in engine_log.messages(mark)), "half a pair found"
        assert engine_log.errors(mark) == []
    finally:
        lmc.close()
    record(ENGINE, "redis:// under eviction (60 chunks of 4 MiB, 64 MiB node)",
           "a chunk found is read whole; never metadata without its data")
