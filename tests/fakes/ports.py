"""Ports for tests, without the free-port race.

A port probed free (bind port 0, read it, close the socket) and handed to another process
can be taken by anything in between: on a loaded machine, another test's server, which then
answers in place of the one meant (or a "nothing listens there" address that answers). So:
a server a test starts binds port 0 itself and says where (`steelframe serve` and `dev`
print `url: ...`, Chromium writes DevToolsActivePort), or runs in the test's own process
and is read where it bound; an address where nothing listens is `refused_port()`, held for
the process's life; and the few servers that must come back on the same port after a stop
take `restartable_port()` and check, once started, that what answers is theirs
(`tests/fakes/own_redis.py`).
"""

from __future__ import annotations

import functools
import random
import socket
from pathlib import Path

LOOPBACK = "127.0.0.1"
# Below this the kernel never hands out a port for a port-0 bind or an outgoing connection.
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
FIXED_PORTS_FROM = 20000


@functools.cache
def _refusing() -> socket.socket:
    sock = socket.socket()
    sock.bind((LOOPBACK, 0))  # bound, never listening: a connect is refused
    return sock


def refused_port() -> int:
    """A loopback port where nothing listens, for as long as this process runs: a socket of
    its own is bound there and never listens, so a connect is refused at once, and no other
    process can bind the port meanwhile (it is not inherited by child processes)."""
    return int(_refusing().getsockname()[1])


def _ephemeral_low() -> int:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def restartable_port() -> int:
    """A free loopback port for a server that is stopped and started again on the same port
    (its clients keep the address), or one that cannot bind port 0 and say where
    (redis-server). It comes from below the ephemeral range, where the kernel puts no port-0
    bind and no outgoing connection, so other tests' probes and servers do not land on it;
    a server started on it must still check that what answers there is its own."""
    low = _ephemeral_low()
    candidates = random.sample(range(FIXED_PORTS_FROM, low), 200)
    for port in candidates:
        with socket.socket() as probe:
            try:
                probe.bind((LOOPBACK, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port among 200 tried in {FIXED_PORTS_FROM}-{low - 1}")
