"""A request refused before any route runs (aiohttp's parser cannot read it) is answered
like every other request: an HTTP/1.1 status line, an `X-Request-Id` (on the log line too),
a JSON body with a message, and `Connection: close`, the connection then closed. It was
answered as HTTP/1.0 with no request id. Raw sockets against a real `steelframe serve`."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from tests.fakes.serve_process import Served, serve

pytestmark = pytest.mark.slow  # a real serve process

HEAD_TOO_LARGE = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n"
# 200 header lines, each short: more than aiohttp's parser takes (128).
MANY_HEADERS = (
    b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
    + b"".join(b"X-H%d: v\r\n" % n for n in range(200))
    + b"\r\n"
)
# The same to the webhook route, whose fast lane reads heads itself (steelframe/lane_heads.py).
WEBHOOK_MANY_HEADERS = (
    b"POST /api/github/webhooks HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
    + b"".join(b"X-H%d: v\r\n" % n for n in range(200))
    + b"\r\n{}"
)
NO_REQUEST_LINE = b"GARBAGE\r\n\r\n"
BAD_LENGTH = b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: twelve\r\n\r\n"
# The webhook route's fast lane hands a head llhttp refuses to aiohttp: the same answer.
WEBHOOK_BOTH_LENGTHS = (
    b"POST /api/github/webhooks HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n{}"
)


async def _exchange(served: Served, request: bytes) -> tuple[str, dict[str, str], bytes]:
    """Send `request`, read until the server closes: (status line, headers, body). A server
    that keeps the connection open fails here, by the timeout."""
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    try:
        writer.write(request)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 30)  # until EOF: the server closed
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, value in (x.split(":", 1) for x in lines)}
    return status, headers, body


async def _refused_like_any_answer(served: Served, request: bytes, status: int, code: str) -> None:
    line, headers, body = await _exchange(served, request)
    assert line.startswith(f"HTTP/1.1 {status} "), line
    assert re.fullmatch(r"[0-9a-f]{16}", headers.get("x-request-id", "")), headers
    assert headers["connection"] == "close" and headers["content-type"].startswith(
        "application/json"
    )
    answer = json.loads(body)
    assert answer["code"] == code and answer["error"], answer
    # The log line of the refusal carries the id the client was given.
    request_id = headers["x-request-id"]
    deadline = asyncio.get_running_loop().time() + 10
    while request_id not in served.log_text():
        assert asyncio.get_running_loop().time() < deadline, served.log_text()[-2000:]
        await asyncio.sleep(0.05)


async def test_refusals_before_routing_are_http11_json_with_a_request_id(
    tmp_path: Path,
) -> None:
    settings = {
        "STEELFRAME_DATABASE_URL": f"sqlite:///{tmp_path / 'serve.db'}",
        "STEELFRAME_DATA_DIR": str(tmp_path / "var"),
        "WEBHOOK_SECRET": "s",
    }
    async with serve(settings, tmp_path, tmp_path / "serve.log") as served:
        await _refused_like_any_answer(served, HEAD_TOO_LARGE, 431, "headers_too_large")
        # Too many header lines are too large a head too (RFC 6585: 431), not a 400.
        await _refused_like_any_answer(served, MANY_HEADERS, 431, "headers_too_large")
        await _refused_like_any_answer(served, WEBHOOK_MANY_HEADERS, 431, "headers_too_large")
        await _refused_like_any_answer(served, NO_REQUEST_LINE, 400, "bad_request")
        await _refused_like_any_answer(served, BAD_LENGTH, 400, "bad_request")
        await _refused_like_any_answer(served, WEBHOOK_BOTH_LENGTHS, 400, "bad_request")
        # A readable request on a new connection is still served as before.
        line, headers, _ = await _exchange(
            served, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        assert line.startswith("HTTP/1.1 200 ") and headers["x-request-id"]
