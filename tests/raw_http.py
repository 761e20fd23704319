"""Requests written byte for byte on a socket, for what aiohttp's client refuses to send
(header bytes that are not UTF-8, a body that is not what its Content-Encoding says)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import orjson

# Long enough for any answer of a loaded CI machine; a test reads until the server closes
# the connection (every request says `Connection: close`), so it never waits this long.
READ_TIMEOUT = 30.0


@dataclass(frozen=True)
class RawAnswer:
    """An answer as it came off the socket: its status, headers and the bytes after them."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


def request_bytes(
    method: str, path: str, headers: dict[str, bytes] | None = None, body: bytes = b""
) -> bytes:
    """One HTTP/1.1 request that asks the server to close the connection after answering."""
    lines = [f"{method} {path} HTTP/1.1".encode(), b"Host: x", b"Connection: close"]
    lines += [name.encode() + b": " + value for name, value in (headers or {}).items()]
    if body and not any(name.lower() == "transfer-encoding" for name in headers or {}):
        lines.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


async def send_raw(server: Any, request: bytes) -> RawAnswer:
    """Write `request` to the test server and read until it closes the connection."""
    reader, writer = await asyncio.open_connection(server.host, server.port)
    try:
        writer.write(request)
        await writer.drain()
        async with asyncio.timeout(READ_TIMEOUT):
            data = await reader.read()
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return RawAnswer(int(status_line.split()[1]), headers, body)
