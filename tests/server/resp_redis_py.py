# SPDX-License-Identifier: Apache-2.0
"""redis-py (Debian's python3-redis) against a kvport node's RESP port: the commands an
application and LMCache's Redis connector use, in RESP2 and (where the library has it) RESP3,
pipelined. Usage: resp_redis_py.py PORT [CA_FILE]: with CA_FILE, over TLS (ssl=True), the
node's certificate verified with that CA. Prints "redis-py: ok" when every check held."""
import sys

import redis


def check(client):
    client.flushdb()
    assert client.ping() is True
    assert client.set("k", b"v\x00\r\n") is True
    assert client.get("k") == b"v\x00\r\n"
    assert client.get("missing") is None
    assert client.set("k", "x", nx=True) is None
    assert client.set("k", "y", xx=True, ex=100) is True
    assert 99 <= client.ttl("k") <= 100
    assert client.persist("k") is True
    assert client.ttl("k") == -1
    assert client.expire("k", 30) is True
    assert client.pexpire("k", 40000) is True
    assert 39000 <= client.pttl("k") <= 40000
    assert client.mset({"a": "1", "b": "2"}) is True
    assert client.mget(["a", "b", "c"]) == [b"1", b"2", None]
    assert client.exists("a", "b", "c") == 2
    assert client.strlen("a") == 1
    assert client.getdel("a") == b"1"
    assert client.delete("b", "c") == 1
    big = bytes(range(256)) * 4096  # 1 MiB
    assert client.set("big", big) is True
    assert client.get("big") == big
    pipe = client.pipeline(transaction=False)
    for i in range(100):
        pipe.set(f"p{i}", str(i))
    for i in range(100):
        pipe.get(f"p{i}")
    results = pipe.execute()
    assert results[:100] == [True] * 100
    assert results[100:] == [str(i).encode() for i in range(100)]
    keys = set(client.scan_iter(match="p*", count=7))
    assert keys == {f"p{i}".encode() for i in range(100)}, keys
    assert client.dbsize() == 102
    info = client.info()
    assert "redis_version" in info and "used_memory" in info, info
    assert client.config_get("maxmemory") == {"maxmemory": "268435456"}
    # The command table, as cluster-aware clients read it.
    commands = client.command()
    assert commands["get"]["arity"] == 2, commands["get"]
    assert "readonly" in commands["get"]["flags"], commands["get"]
    assert (commands["mset"]["first_key_pos"], commands["mset"]["last_key_pos"],
            commands["mset"]["step_count"]) == (1, -1, 2), commands["mset"]
    assert client.command_count() == len(commands)
    assert [str(k, "utf-8") if isinstance(k, bytes) else k
            for k in client.command_getkeys("MSET", "a", "1", "b", "2")] == ["a", "b"]
    # Redis's keys: no LMCache fold for a client that did not ask for it.
    assert client.set("xkv_bytes", "chunk") is True
    assert client.set("xmetadata", "meta") is True
    assert client.delete("xmetadata") == 1
    assert client.get("xkv_bytes") == b"chunk"
    assert client.delete("xkv_bytes") == 1
    assert client.client_setname("py") is True
    assert client.client_getname() in ("py", b"py")
    try:
        client.execute_command("NOSUCH")
        raise AssertionError("unknown command accepted")
    except redis.ResponseError as error:
        assert "unknown command" in str(error)
    assert client.ping() is True


def main():
    port = int(sys.argv[1])
    tls = {}
    if len(sys.argv) > 2:
        tls = {"ssl": True, "ssl_ca_certs": sys.argv[2], "ssl_cert_reqs": "required"}
    check(redis.Redis(host="127.0.0.1", port=port, **tls))
    try:
        resp3 = redis.Redis(host="127.0.0.1", port=port, protocol=3, **tls)
    except TypeError:  # redis-py before 5.0 speaks RESP2 only
        resp3 = None
    if resp3 is not None:
        check(resp3)
    print("redis-py: ok")


if __name__ == "__main__":
    main()
