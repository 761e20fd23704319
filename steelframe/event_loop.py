"""The event loop `serve` runs on: uvloop when it is installed (a dependency everywhere
but Windows, where it does not exist), asyncio's own otherwise; `serve --loop asyncio`
chooses asyncio's.

uvloop (libuv) does the loop's and its transports' work in C: on the webhook benchmark
(bench/webhooks_probot.py) ~10% less CPU per delivery than asyncio's loop, once the
webhook path itself was trimmed (before that the difference was within the noise).
`serve` runs it as `ServeLoop`, which connects to IP addresses without looking them up again.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

try:
    import uvloop
except ImportError:  # not installed, or a platform it does not support (Windows)
    uvloop = None  # type: ignore[assignment]

CHOICES = ("auto", "uvloop", "asyncio")


class LoopUnavailable(RuntimeError):
    pass


def loop_factory(choice: str = "auto") -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory for `asyncio.Runner`; None means asyncio's default loop."""
    if choice == "asyncio" or (choice == "auto" and uvloop is None):
        return None
    if uvloop is None:
        raise LoopUnavailable("uvloop is not installed: pip install uvloop (not on Windows)")
    return ServeLoop


def numeric_address(sock: socket.socket, address: Any) -> bool:
    """Is `address` an IP address and port of the socket's family (nothing to resolve)?"""
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple):
        return False
    try:
        socket.inet_pton(sock.family, address[0])
    except (OSError, TypeError, ValueError, IndexError):
        return False
    return True


if uvloop is not None:

    class ServeLoop(uvloop.Loop):
        """uvloop, connecting to addresses already resolved without resolving them again.

        uvloop's `sock_connect` sends every address through getaddrinfo on libuv's thread
        pool, an IP address too, because it asks for no socket type (uvloop's fast path
        needs one). aiohttp connects every outgoing connection that way (aiohappyeyeballs),
        with addresses its resolver has already resolved: each model call on a new
        connection paid a thread-pool round trip, and 1.33x the CPU it costs now
        (bench/connects.py); 1,000 operators opening streams at once make 1,000 of them."""

        async def sock_connect(self, sock: socket.socket, address: Any) -> None:
            if not numeric_address(sock, address):
                return await super().sock_connect(sock, address)
            try:
                sock.connect(address)
                return None
            except (BlockingIOError, InterruptedError):
                pass  # in progress: writable once it completes or fails
            connected = self.create_future()
            fd = sock.fileno()
            self.add_writer(fd, _settle, connected)
            try:
                await connected
            finally:
                self.remove_writer(fd)
            error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if error:
                raise OSError(error, f"Connect call failed {address}")
            return None


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
