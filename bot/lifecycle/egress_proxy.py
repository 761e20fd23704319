"""A coding run's way out: a forwarding proxy the worker runs for that run alone, on a Unix
socket only the run's sandbox is shown (docs/lifecycle.md, "Egress").

It speaks HTTP CONNECT (a tunnel, for HTTPS and anything else) and plain HTTP with an
absolute URI (one request, forwarded in origin-form with `Connection: close`). Request heads
are parsed by httptools (llhttp, Node's parser). A request is forwarded only when its host
and port are on the run's allowlist and every address the host resolves to may be reached
(`bot.lifecycle.egress_policy`); the proxy connects to exactly the addresses it checked, so a
second DNS answer cannot point it elsewhere. Names are resolved on the run's own threads
within a deadline (`bot.lifecycle.egress_dns`; past it, `504`). Anything else gets a
one-line `403` and is recorded (`bot.lifecycle.egress_blocked`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httptools

from bot.host_entries import BadTarget, normal_host
from bot.lifecycle.egress_blocked import BlockedLog
from bot.lifecycle.egress_dns import RunResolver
from bot.lifecycle.egress_policy import (
    Allowlist,
    EgressRefused,
    IPAddress,
    Target,
    check_addresses,
    is_own_address,
    parse_target,
)

log = logging.getLogger(__name__)

# The exact answer to an accepted CONNECT: the in-sandbox relay recognises it byte for byte.
ESTABLISHED = b"HTTP/1.1 200 Connection established\r\n\r\n"
# Hop-by-hop headers (RFC 9110 7.6.1) and the proxy's own: never forwarded.
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"proxy-authorization",
        b"proxy-authenticate",
        b"te",
        b"trailer",
        b"upgrade",
        b"host",
    }
)
# How long a refused client may take to stop sending before the connection is closed.
LINGER_SECONDS = 1.0
Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]


@dataclass(frozen=True)
class ProxyLimits:
    """What one run's proxy holds at most (rq/defaults.py style: documented defaults)."""

    max_head_bytes: int = 16 * 1024
    max_connections: int = 64
    # A connection with no bytes either way for this long is closed (a model's stream
    # sends its keep-alive events well within it).
    idle_seconds: float = 300.0
    head_seconds: float = 30.0
    connect_seconds: float = 15.0
    # A name's lookup (queued behind others included) waits this long, then `504`: glibc's
    # default is 5 s per try, so one retry fits.
    resolve_seconds: float = 12.0


class ResolveTimeout(Exception):
    """The name server did not answer within the proxy's deadline."""


class BadRequest(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


@dataclass
class RequestHead:
    """What httptools read of a request head, and the bytes that came after it."""

    method: bytes = b""
    url: bytes = b""
    version: str = "1.1"
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    complete: bool = False
    rest: bytes = b""

    # httptools callbacks
    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.complete = True


async def read_head(reader: asyncio.StreamReader, limits: ProxyLimits) -> RequestHead:
    """Read until the head is complete (BadRequest when it is malformed or too large)."""
    head = RequestHead()
    parser = httptools.HttpRequestParser(head)
    seen = bytearray()
    while not head.complete:
        chunk = await reader.read(4096)
        if not chunk:
            raise BadRequest(400, "the request ended before its head did")
        seen += chunk
        try:
            parser.feed_data(chunk)
        except httptools.HttpParserUpgrade:  # CONNECT: what follows is the tunnel's
            head.complete = True
        except httptools.HttpParserError as exc:
            # Bytes after a complete head (a body, a tunnel) are not the parser's to judge.
            if not head.complete:
                raise BadRequest(400, "malformed request head") from exc
        if not head.complete and len(seen) > limits.max_head_bytes:
            raise BadRequest(431, "request head too large")
    # llhttp accepts only CRLF line ends, so the head it completed ends at the first blank line.
    end = seen.index(b"\r\n\r\n") + 4
    if end > limits.max_head_bytes:
        raise BadRequest(431, "request head too large")
    head.method = parser.get_method()
    head.version = parser.get_http_version()
    head.rest = bytes(seen[end:])
    return head


def _plain_target(head: RequestHead) -> tuple[Target, bytes]:
    """An absolute `http://` URI's target and its origin-form (path and query)."""
    try:
        url = httptools.parse_url(head.url)
    except httptools.HttpParserInvalidURLError as exc:
        raise BadRequest(400, "the request's URL is malformed") from exc
    if url.schema is None or url.host is None:
        raise BadRequest(400, "send CONNECT, or a request with an absolute http:// URL")
    if url.schema.lower() != b"http":
        raise BadRequest(400, f"only http:// is forwarded ({url.schema.decode(errors='replace')})")
    try:
        target = Target(normal_host(url.host.decode("ascii")), url.port or 80)
    except (BadTarget, UnicodeDecodeError) as exc:
        raise BadRequest(400, "the request's host is malformed") from exc
    path = url.path or b"/"
    return target, path + (b"?" + url.query if url.query else b"")


def _forwarded_head(head: RequestHead, target: Target, origin_form: bytes) -> bytes:
    host = str(target) if target.port != 80 else target.host
    lines = [b"%s %s HTTP/%s" % (head.method, origin_form, head.version.encode())]
    lines.append(b"Host: " + host.encode())
    connection_named = {
        token.strip().lower()
        for name, value in head.headers
        if name.lower() == b"connection"
        for token in value.split(b",")
    }
    for name, value in head.headers:
        lowered = name.lower()
        if lowered in HOP_BY_HOP or lowered in connection_named:
            continue
        lines.append(name + b": " + value)
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"


def refusal(status: int, reason: str) -> bytes:
    phrase = {400: "Bad Request", 403: "Forbidden", 431: "Request Header Fields Too Large"}
    phrase |= {502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}
    body = f"steelframe egress: {reason}\n".encode()
    head = (
        f"HTTP/1.1 {status} {phrase.get(status, 'Error')}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


def bind_unix(path: Path) -> socket.socket:
    """A Unix socket bound at `path`, connectable by the sandbox's user. Any length of path:
    bound through the folder's descriptor (a socket's path is capped at 108 bytes)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    folder = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        listener.bind(f"/proc/self/fd/{folder}/{path.name}")
        # As root, the runtime is nobody; only the run's sandbox is shown this file.
        os.chmod(path, 0o666)
    except OSError:
        listener.close()
        raise
    finally:
        os.close(folder)
    return listener


class EgressProxy:
    """One run's proxy: `start(path)` listens on a Unix socket, `close()` ends every tunnel."""

    def __init__(
        self,
        allowlist: Allowlist,
        blocked: BlockedLog,
        *,
        limits: ProxyLimits | None = None,
        resolve: Resolver | None = None,
        is_own: Callable[[IPAddress], bool] = is_own_address,
        narrate: bool = True,
    ) -> None:
        """`resolve`: how a host name is looked up; by default on threads of this proxy's
        own (`RunResolver`), let go by `close()`. `narrate`: log each refusal (a run's is
        worth a line; the egress probe's, asked for on purpose, is not)."""
        self.allowlist = allowlist
        self.blocked = blocked
        self.narrate = narrate
        self.limits = limits or ProxyLimits()
        self._own_resolver: RunResolver | None = None
        if resolve is None:
            resolve = self._own_resolver = RunResolver()
        self._resolve = resolve
        self._is_own = is_own
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.Task[None]] = set()

    async def start(self, path: Path) -> None:
        """Listen on a Unix socket at `path`."""
        listener = bind_unix(path)
        self._server = await asyncio.start_unix_server(self._accept, sock=listener)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._open):
            task.cancel()
        await asyncio.gather(*self._open, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        if self._own_resolver is not None:
            self._own_resolver.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(self._open) >= self.limits.max_connections:
            await _answer(reader, writer, refusal(503, "too many connections at once"))
            writer.close()
            return
        self._open.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            pass
        except Exception:  # one connection's surprise must not reach the run
            log.exception("egress: a connection failed")
        finally:
            self._open.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(read_head(reader, self.limits), self.limits.head_seconds)
            target, origin_form = self._target(head)
        except BadRequest as exc:
            await _answer(reader, writer, refusal(exc.status, str(exc)))
            return
        try:
            addresses = await self._allowed(target)
        except EgressRefused as exc:
            self.blocked.add(target.host, target.port, str(exc))
            if self.narrate:
                log.info("egress: refused %s: %s", target, exc)
            await _answer(reader, writer, refusal(403, str(exc)))
            return
        except ResolveTimeout as exc:
            log.info("egress: %s", exc)
            await _answer(reader, writer, refusal(504, str(exc)))
            return
        upstream = await self._connect(target, addresses)
        if upstream is None:
            await _answer(reader, writer, refusal(502, f"{target} did not answer"))
            return
        up_reader, up_writer = upstream
        try:
            if origin_form is None:
                writer.write(ESTABLISHED)
            else:
                up_writer.write(_forwarded_head(head, target, origin_form))
            up_writer.write(head.rest)
            await _pipe_both(reader, writer, up_reader, up_writer, self.limits.idle_seconds)
        finally:
            up_writer.close()

    def _target(self, head: RequestHead) -> tuple[Target, bytes | None]:
        if head.method == b"CONNECT":
            try:
                return parse_target(head.url.decode("ascii")), None
            except (BadTarget, UnicodeDecodeError) as exc:
                raise BadRequest(400, "CONNECT needs host:port") from exc
        return _plain_target(head)

    async def _allowed(self, target: Target) -> list[IPAddress]:
        if not self.allowlist.allows(target):
            raise EgressRefused(f"{target} is not on this run's allowlist")
        literal = target.address
        found = [literal] if literal else await self._lookup(target)
        return check_addresses(target, found, self.allowlist, self._is_own)

    async def _lookup(self, target: Target) -> list[IPAddress]:
        deadline = self.limits.resolve_seconds
        try:
            return await asyncio.wait_for(self._resolve(target.host, target.port), deadline)
        except TimeoutError as exc:
            raise ResolveTimeout(f"{target.host} did not resolve within {deadline:g} s") from exc
        except OSError as exc:
            raise EgressRefused(f"{target.host} does not resolve") from exc

    async def _connect(
        self, target: Target, addresses: list[IPAddress]
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        for address in addresses:
            try:
                return await asyncio.wait_for(
                    asyncio.open_connection(str(address), target.port),
                    self.limits.connect_seconds,
                )
            except (OSError, TimeoutError) as exc:
                log.info("egress: %s (%s) did not answer: %s", target, address, exc)
        return None


async def _answer(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, response: bytes
) -> None:
    """Send a refusal and let the client finish sending: closing on unread bytes would
    reset the connection, and the client would never read the answer."""
    with contextlib.suppress(ConnectionError, TimeoutError):
        writer.write(response)
        await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
        async with asyncio.timeout(LINGER_SECONDS):
            while await reader.read(65536):
                pass


async def _pipe_both(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
    idle_seconds: float,
) -> None:
    """Copy both ways until both ends finish, or nothing moved either way for a while."""
    last = [time.monotonic()]

    async def copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while chunk := await src.read(65536):
                last[0] = time.monotonic()
                dst.write(chunk)
                await dst.drain()
            if dst.can_write_eof():
                dst.write_eof()

    copies = {asyncio.ensure_future(copy(reader, up_writer))}
    copies.add(asyncio.ensure_future(copy(up_reader, writer)))
    try:
        while copies:
            idle_for = time.monotonic() - last[0]
            if idle_for >= idle_seconds:
                return
            _, copies = await asyncio.wait(copies, timeout=idle_seconds - idle_for)
    finally:
        for pending in copies:
            pending.cancel()
        await asyncio.gather(*copies, return_exceptions=True)
