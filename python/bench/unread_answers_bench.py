# SPDX-License-Identifier: Apache-2.0
"""What a client that does not read its answers costs the node's other clients, in one run.

    make build && python3 python/bench/unread_answers_bench.py

Starts `kvport serve --resp` (build/bin/kvport, or $KVPORT_BIN; 256 MiB, so its queued-answer cap
is 16 MiB), stores --keys values of --value-size, then measures the round trip of --pings PINGs
on one connection and of --connects new connections' first PING:
  - quiet: nobody else is connected;
  - attacked: --attackers connections have each sent --pipelined MGETs of every key (each answer
    ~keys x value-size of reply text, more than the cap) and read nothing.
It prints p50 / p99 / max of each and the ratio attacked / quiet, and the node's
paused_connections (the attackers alone should be paused). RESP over raw sockets: the same
connection layer and backpressure serve both of the node's protocols."""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time


def command(*args: bytes) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def read_reply(sock: socket.socket, buf: bytearray) -> bytes:
    """One simple, error, integer or bulk reply (enough for PING, SET, INFO)."""
    while True:
        end = buf.find(b"\r\n")
        if end >= 0:
            if buf[:1] == b"$":
                n = int(buf[1:end])
                total = end + 2 + n + 2
                if n >= 0 and len(buf) >= total:
                    reply = bytes(buf[end + 2:end + 2 + n])
                    del buf[:total]
                    return reply
            else:
                reply = bytes(buf[:end])
                del buf[:end + 2]
                return reply
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("node closed the connection")
        buf += chunk


def connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def pings(port: int, count: int) -> list[float]:
    s = connect(port)
    buf = bytearray()
    out = []
    for _ in range(count):
        t = time.perf_counter()
        s.sendall(command(b"PING"))
        assert read_reply(s, buf) == b"+PONG"
        out.append(time.perf_counter() - t)
    s.close()
    return out


def first_pings(port: int, count: int) -> list[float]:
    out = []
    for _ in range(count):
        t = time.perf_counter()
        s = connect(port)
        s.sendall(command(b"PING"))
        assert read_reply(s, bytearray()) == b"+PONG"
        out.append(time.perf_counter() - t)
        s.close()
    return out


def summary(samples: list[float]) -> tuple[float, float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) * 1e6, p99 * 1e6, ordered[-1] * 1e6


def stats(binary: str, address: str) -> dict:
    """The node's STATS through `kvport stat --json` (its binary port)."""
    out = subprocess.run([binary, "stat", "--url", address, "--json"], capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)["counters"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=4000)
    parser.add_argument("--value-size", type=int, default=4096)
    parser.add_argument("--attackers", type=int, default=4)
    parser.add_argument("--pipelined", type=int, default=8)
    parser.add_argument("--pings", type=int, default=5000)
    parser.add_argument("--connects", type=int, default=500)
    args = parser.parse_args()

    binary = os.environ.get("KVPORT_BIN", "build/bin/kvport")
    node = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--unix-socket", "", "--capacity", "256MiB",
         "--threads", "2", "--resp", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        port = None
        address = None
        for line in node.stdout:
            m = re.search(r"serving on ([^ ;\s]+)", line)
            if m:
                address = m.group(1)
            m = re.search(r"redis protocol on [^ ]*:(\d+)", line)
            if m:
                port = int(m.group(1))
                break
        if port is None or address is None:
            print("kvport serve did not start", file=sys.stderr)
            return 1
        writer = connect(port)
        buf = bytearray()
        value = b"v" * args.value_size
        for i in range(args.keys):
            writer.sendall(command(b"SET", b"k%d" % i, value))
        for i in range(args.keys):
            assert read_reply(writer, buf) == b"+OK"
        writer.close()

        quiet = (pings(port, args.pings), first_pings(port, args.connects))

        mget = command(b"MGET", *[b"k%d" % i for i in range(args.keys)])
        attackers = []
        for _ in range(args.attackers):
            s = connect(port)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.setblocking(False)
            try:
                s.send(mget * args.pipelined)
            except BlockingIOError:
                pass
            attackers.append(s)
        time.sleep(1.0)  # the node answers what it read and pauses the attackers
        before = stats(binary, address)
        attacked = (pings(port, args.pings), first_pings(port, args.connects))
        after = stats(binary, address)
        paused, queued = before.get("paused_connections"), before.get("queued_response_bytes")
        paused_after = after.get("paused_connections")
        for s in attackers:
            s.close()

        print(f"node: 256 MiB, queued-answer cap 16 MiB; {args.attackers} attackers x "
              f"{args.pipelined} MGETs of {args.keys} x {args.value_size} B, never read; "
              f"paused_connections {paused} (after the pings: {paused_after}), "
              f"queued_response_bytes {queued}")
        for name, q, a in (("PING on a connected client", quiet[0], attacked[0]),
                           ("a new connection's first PING", quiet[1], attacked[1])):
            qs, as_ = summary(q), summary(a)
            print(f"{name}: quiet p50 {qs[0]:.0f} us p99 {qs[1]:.0f} us max {qs[2]:.0f} us; "
                  f"attacked p50 {as_[0]:.0f} us p99 {as_[1]:.0f} us max {as_[2]:.0f} us; "
                  f"p99 attacked/quiet {as_[1] / qs[1]:.2f}x")
        return 0
    finally:
        node.terminate()
        node.wait()


if __name__ == "__main__":
    sys.exit(main())
