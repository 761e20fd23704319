"""`Expect` on every route (http_edge/expect.py): a value other than 100-continue is a JSON 417
in the error shape, its value not echoed (aiohttp's own refusal, run before the middlewares,
was text/plain "Unknown Expect: <value>": the OpenAPI fuzzer found it); 100-continue still
gets its interim answer and then the route's own."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.conftest import ApiClient

HOSTILE = "0<script>"


async def _exchange(api: ApiClient, head: str, body: bytes = b"") -> bytes:
    """One raw HTTP/1.1 request, its answer read to the end (Connection: close)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", api.raw.port)
    try:
        writer.write(head.encode() + b"\r\n" + body)
        await writer.drain()
        async with asyncio.timeout(30):
            return await reader.read()
    finally:
        writer.close()


def _head(path: str, expect: str, token: str, length: int) -> str:
    return (
        f"POST {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\nExpect: {expect}\r\n"
    )


@pytest.mark.parametrize("path", ["/api/operator/chat", "/api/github/webhooks"])
async def test_an_unknown_expectation_is_a_json_417_that_does_not_echo_it(
    api: ApiClient, path: str
) -> None:
    answer = await _exchange(api, _head(path, HOSTILE, api.token, 2), b"{}")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 417 "), answer
    assert b"application/json" in head and b"X-Request-Id" in head, head
    error = json.loads(body)
    assert error["code"] == "expectation_failed" and error["detail"] == {"header": "Expect"}
    assert "100-continue" in error["error"] and HOSTILE not in answer.decode()


async def test_100_continue_gets_its_interim_answer_then_the_routes_own(api: ApiClient) -> None:
    body = json.dumps({"message": ""}).encode()
    head = _head("/api/operator/chat", "100-continue", api.token, len(body))
    reader, writer = await asyncio.open_connection("127.0.0.1", api.raw.port)
    try:
        writer.write(head.encode() + b"\r\n")  # the body waits for the interim answer
        await writer.drain()
        async with asyncio.timeout(30):
            interim = await reader.readuntil(b"\r\n\r\n")
            assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
            writer.write(body)
            await writer.drain()
            answer = await reader.read()
    finally:
        writer.close()
    head_out, _, out = answer.partition(b"\r\n\r\n")
    assert head_out.startswith(b"HTTP/1.1 400 "), answer  # the route's own: an empty message
    assert json.loads(out)["detail"] == {"field": "message"}
