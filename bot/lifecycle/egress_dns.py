"""Name resolution for one run's egress proxy, on threads of that run's own.

`getaddrinfo` blocks a thread for as long as the name server takes (glibc: `timeout` times
`attempts` per server in resolv.conf, 5 s x 2 by default, and longer with several servers).
Through `loop.getaddrinfo` it ran on the event loop's default executor, a handful of threads
the whole worker shares (`asyncio.to_thread`, every other run's proxy): a run whose
allowlisted host resolves slowly, with a client opening a connection after each timeout,
could hold all of them. Here each run's proxy asks on at most `threads` threads of its own;
the proxy bounds each answer's wait (`ProxyLimits.resolve_seconds`) and answers `504`, so
slow DNS ties up that run's lookups and nothing else. A thread already asking cannot be
interrupted: it finishes when its lookup does, and a lookup still queued behind it is
dropped when its wait ends.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bot.lifecycle.egress_policy import IPAddress

DEFAULT_RESOLVE_THREADS = 2
# `socket.getaddrinfo`'s shape: (host, port, family, type) -> (family, type, proto,
# canonname, sockaddr) rows. Tests hand a stand-in with the same shape (one that stalls).
Lookup = Callable[..., Sequence[tuple[Any, ...]]]


class RunResolver:
    """`await resolver(host, port)`: every IPv4/IPv6 address `lookup` gives, asked on this
    run's own threads. `close()` lets them go (one still asking ends with its lookup)."""

    def __init__(
        self, *, threads: int = DEFAULT_RESOLVE_THREADS, lookup: Lookup = socket.getaddrinfo
    ) -> None:
        self._lookup = lookup
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="egress-dns")

    async def __call__(self, host: str, port: int) -> list[IPAddress]:
        # A cancelled wait (the proxy's deadline) cancels the pool's future too: a lookup
        # still queued is dropped instead of running for nobody.
        infos = await asyncio.wrap_future(
            self._pool.submit(self._lookup, host, port, 0, socket.SOCK_STREAM)
        )
        return addresses_of(infos)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def addresses_of(infos: Sequence[tuple[Any, ...]]) -> list[IPAddress]:
    """The distinct IPv4/IPv6 addresses of `getaddrinfo` rows, in order (no scope id)."""
    found: list[IPAddress] = []
    for family, _, _, _, sockaddr in infos:
        if family in (socket.AF_INET, socket.AF_INET6):
            address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
            if address not in found:
                found.append(address)
    return found
