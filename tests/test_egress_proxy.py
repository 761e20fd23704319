"""A run's egress proxy (bot.lifecycle.egress_proxy) on its Unix socket, against a real
upstream server: CONNECT tunnels and plain HTTP forwarding for allowed hosts, a one-line
403 (recorded once per host) for the rest, 400/431 for heads it will not read."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import socket
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bot.lifecycle.egress_blocked import BlockedLog
from bot.lifecycle.egress_dns import DEFAULT_RESOLVE_THREADS, RunResolver
from bot.lifecycle.egress_policy import Allowlist, IPAddress
from bot.lifecycle.egress_proxy import EgressProxy, ProxyLimits
from tests.fakes.served import served

NOW = datetime(2026, 12, 5, 8, 0, tzinfo=UTC)


@dataclass
class Upstream:
    port: int
    seen: list[dict[str, Any]]


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    seen: list[dict[str, Any]] = []

    async def record(request: web.Request) -> web.Response:
        body = await request.read()
        seen.append({"path": request.path_qs, "headers": dict(request.headers), "body": body})
        return web.Response(text=f"upstream saw {request.method} {request.path_qs}")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    async with served(app) as port:
        yield Upstream(port, seen)


class Resolver:
    """DNS for the tests: a name's answers in turn (the last one repeats)."""

    def __init__(self, answers: dict[str, list[list[str]]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[IPAddress]:
        self.asked.append(host)
        turns = self.answers.get(host)
        if not turns:
            raise OSError("no such host")
        answer = turns.pop(0) if len(turns) > 1 else turns[0]
        return [ipaddress.ip_address(a) for a in answer]


async def _proxy(
    tmp_path: Path,
    allowlist: Allowlist,
    resolver: Resolver | RunResolver | None = None,
    limits: ProxyLimits | None = None,
    *,
    run: str = "run-",
) -> tuple[EgressProxy, Path]:
    # A long folder, as a run's is: the socket path would not fit in sun_path.
    folder = tmp_path / (run + "x" * 100)
    folder.mkdir()
    proxy = EgressProxy(
        allowlist,
        BlockedLog(lambda: NOW),
        limits=limits,
        resolve=resolver or Resolver({}),
        is_own=lambda address: False,
    )
    await proxy.start(folder / "egress.sock")
    return proxy, folder / "egress.sock"


async def _open(path: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect through the folder's descriptor: the whole path is longer than sun_path."""
    folder = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        return await asyncio.open_unix_connection(f"/proc/self/fd/{folder}/{path.name}")
    finally:
        os.close(folder)


async def _exchange(path: Path, request: bytes) -> bytes:
    reader, writer = await _open(path)
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return answer


async def test_connect_to_an_allowed_host_tunnels_to_the_address_it_checked(
    tmp_path: Path, upstream: Upstream
) -> None:
    # The second DNS answer would be private: the proxy never asks twice.
    resolver = Resolver({"models.test": [["127.0.0.1"], ["10.9.9.9"]]})
    allowlist = Allowlist.of([], [f"models.test:{upstream.port}"])
    proxy, path = await _proxy(tmp_path, allowlist, resolver)
    try:
        connect = f"CONNECT models.test:{upstream.port} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        inner = b"GET /hello HTTP/1.1\r\nHost: models.test\r\nConnection: close\r\n\r\n"
        answer = await _exchange(path, connect + inner)  # the tunnel's bytes right behind
    finally:
        await proxy.close()
    assert answer.startswith(b"HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK")
    assert answer.endswith(b"upstream saw GET /hello")
    assert resolver.asked == ["models.test"] and proxy.blocked.hosts() == []


async def test_a_host_off_the_allowlist_gets_a_403_recorded_once_per_host(
    tmp_path: Path, upstream: Upstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot.lifecycle.egress_proxy")
    proxy, path = await _proxy(tmp_path, Allowlist.of(["pypi.org"]))
    try:
        for port in (443, 8443):
            answer = await _exchange(path, f"CONNECT example.org:{port} HTTP/1.1\r\n\r\n".encode())
            assert answer.startswith(b"HTTP/1.1 403 Forbidden\r\n")
            assert answer.endswith(
                f"\r\n\r\nsteelframe egress: example.org:{port} is not on this run's "
                "allowlist\n".encode()
            )
        plain = b"GET http://Example.ORG/x HTTP/1.1\r\nHost: example.org\r\n\r\n"
        assert (await _exchange(path, plain)).startswith(b"HTTP/1.1 403 ")
    finally:
        await proxy.close()
    (blocked,) = proxy.blocked.hosts()
    assert (blocked.host, blocked.port, blocked.count, blocked.first_at) == (
        "example.org",
        443,
        3,
        NOW,
    )
    assert upstream.seen == []
    # A run's refusals each get a line in the worker's log (the egress probe's do not).
    refused = [r.getMessage() for r in caplog.records if "egress: refused" in r.getMessage()]
    assert len(refused) == 3 and "example.org:443" in refused[0], refused


async def test_an_allowed_name_resolving_to_loopback_is_refused(
    tmp_path: Path, upstream: Upstream
) -> None:
    resolver = Resolver({"internal.test": [["127.0.0.1"]]})
    proxy, path = await _proxy(tmp_path, Allowlist.of([f"internal.test:{upstream.port}"]), resolver)
    try:
        ask = f"CONNECT internal.test:{upstream.port} HTTP/1.1\r\n\r\n".encode()
        answer = await _exchange(path, ask)
        direct = await _exchange(
            path, f"CONNECT 127.0.0.1:{upstream.port} HTTP/1.1\r\n\r\n".encode()
        )
    finally:
        await proxy.close()
    assert b"resolves to a loopback address (127.0.0.1)" in answer
    assert direct.startswith(b"HTTP/1.1 403 ")
    assert [b.host for b in proxy.blocked.hosts()] == ["internal.test", "127.0.0.1"]
    assert upstream.seen == []


async def test_plain_http_is_forwarded_once_in_origin_form_without_proxy_headers(
    tmp_path: Path, upstream: Upstream
) -> None:
    allowlist = Allowlist.of([], [f"127.0.0.1:{upstream.port}"])
    proxy, path = await _proxy(tmp_path, allowlist)
    body = b'{"model": "m", "stream": false}'
    request = (
        f"POST http://127.0.0.1:{upstream.port}/v1/chat?x=1 HTTP/1.1\r\n"
        "Host: somewhere.else\r\nProxy-Authorization: Basic c2VjcmV0\r\n"
        "Proxy-Connection: keep-alive\r\nConnection: keep-alive, X-Drop\r\nX-Drop: 1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    try:
        answer = await _exchange(path, request + body)
    finally:
        await proxy.close()
    assert answer.startswith(b"HTTP/1.1 200 OK") and answer.endswith(b"POST /v1/chat?x=1")
    (seen,) = upstream.seen
    assert seen["path"] == "/v1/chat?x=1" and seen["body"] == body
    headers = {name.lower(): value for name, value in seen["headers"].items()}
    assert headers["host"] == f"127.0.0.1:{upstream.port}"
    assert headers["connection"] == "close"
    assert not {"proxy-authorization", "proxy-connection", "x-drop"} & set(headers)


@pytest.mark.parametrize(
    ("request_head", "status", "words"),
    [
        (b"NOT HTTP AT ALL\r\n\r\n", 400, b"malformed request head"),
        (b"GET /relative HTTP/1.1\r\nHost: example.org\r\n\r\n", 400, b"absolute http://"),
        (b"GET https://example.org/ HTTP/1.1\r\n\r\n", 400, b"only http:// is forwarded"),
        (b"CONNECT example.org HTTP/1.1\r\n\r\n", 400, b"CONNECT needs host:port"),
        (b"CONNECT exa_mple.org:443 HTTP/1.1\r\n\r\n", 400, b"CONNECT needs host:port"),
        (b"CONNECT example.org:443/x HTTP/1.1\r\n\r\n", 400, b"CONNECT needs host:port"),
        (b"GET http://a/ HTTP/1.1\r\nX: " + b"y" * 20_000 + b"\r\n\r\n", 431, b"too large"),
        (b"CONNECT example.org:443 HTTP/1.1\r\n", 400, b"ended before its head did"),
    ],
)
async def test_heads_it_will_not_read_get_a_4xx(
    tmp_path: Path, request_head: bytes, status: int, words: bytes
) -> None:
    proxy, path = await _proxy(tmp_path, Allowlist.of(["example.org"]))
    try:
        reader, writer = await _open(path)
        writer.write(request_head)
        if request_head.endswith(b"HTTP/1.1\r\n"):
            writer.write_eof()  # the client gives up mid-head
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    finally:
        await proxy.close()
    assert answer.startswith(f"HTTP/1.1 {status} ".encode()) and words in answer
    assert proxy.blocked.hosts() == []  # malformed is not a blocked host


async def test_connections_past_the_cap_are_turned_away_and_idle_tunnels_close(
    tmp_path: Path, upstream: Upstream
) -> None:
    allowlist = Allowlist.of([], [f"127.0.0.1:{upstream.port}"])
    limits = ProxyLimits(max_connections=1, idle_seconds=0.5)
    proxy, path = await _proxy(tmp_path, allowlist, limits=limits)
    try:
        reader, writer = await _open(path)
        writer.write(f"CONNECT 127.0.0.1:{upstream.port} HTTP/1.1\r\n\r\n".encode())
        assert (await reader.readline()).startswith(b"HTTP/1.1 200")
        second = await _exchange(path, b"CONNECT example.org:443 HTTP/1.1\r\n\r\n")
        assert second.startswith(b"HTTP/1.1 503 ")
        # Nothing moves through the open tunnel: the proxy closes it.
        assert await asyncio.wait_for(reader.read(), 10) == b"\r\n"
        writer.close()
    finally:
        await proxy.close()


class StalledDNS:
    """`socket.getaddrinfo` for a name server that does not answer: each lookup blocks its
    thread until `answer` is set (as glibc's does until its timeouts run out)."""

    def __init__(self) -> None:
        self.answer = threading.Event()
        self.asked = 0
        self._lock = threading.Lock()

    def __call__(self, host: str, port: int, *args: Any) -> list[tuple[Any, ...]]:
        with self._lock:
            self.asked += 1
        self.answer.wait()
        return socket.getaddrinfo("127.0.0.1", port, *args)


async def test_slow_dns_gets_a_504_and_holds_only_its_own_runs_threads(
    tmp_path: Path, upstream: Upstream
) -> None:
    """Many connections to a name whose lookups hang: each is answered 504 at the deadline,
    at most the run's own threads are stuck, and the worker's shared threads (the event
    loop's default executor) and another run's proxy go on working meanwhile."""
    stalled = StalledDNS()
    slow_run = RunResolver(lookup=stalled)
    other_run = RunResolver(lookup=lambda host, *args: socket.getaddrinfo("127.0.0.1", *args))
    allowlist = Allowlist.of([], [f"models.test:{upstream.port}"])
    limits = ProxyLimits(resolve_seconds=0.5)
    slow, slow_path = await _proxy(tmp_path, allowlist, slow_run, limits, run="slow-")
    other, other_path = await _proxy(tmp_path, allowlist, other_run, limits, run="other-")
    connect = f"CONNECT models.test:{upstream.port} HTTP/1.1\r\n\r\n".encode()
    inner = b"GET /hello HTTP/1.1\r\nHost: models.test\r\nConnection: close\r\n\r\n"
    try:
        # More than the default executor has threads (at most 32): it would be full.
        answers = await asyncio.gather(*(_exchange(slow_path, connect) for _ in range(40)))
        # Every lookup still hangs: the shared threads and the other run are not held up.
        loop = asyncio.get_running_loop()
        shared = await asyncio.wait_for(loop.run_in_executor(None, threading.get_ident), 10)
        tunnelled = await _exchange(other_path, connect + inner)
    finally:
        stalled.answer.set()
        await slow.close()
        await other.close()
        slow_run.close()
        other_run.close()
    assert shared
    assert {a.split(b"\r\n", 1)[0] for a in answers} == {b"HTTP/1.1 504 Gateway Timeout"}
    assert answers[0].endswith(
        b"\r\n\r\nsteelframe egress: models.test did not resolve within 0.5 s\n"
    )
    assert stalled.asked == DEFAULT_RESOLVE_THREADS  # the rest were dropped unasked
    assert slow.blocked.hosts() == [] and len(upstream.seen) == 1  # a timeout is no refusal
    assert tunnelled.endswith(b"upstream saw GET /hello")


async def test_by_default_a_name_is_looked_up_for_real(
    tmp_path: Path,
) -> None:
    proxy = EgressProxy(Allowlist.of(["localhost:80"]), BlockedLog(lambda: NOW))
    folder = tmp_path / "run"
    folder.mkdir()
    await proxy.start(folder / "egress.sock")
    try:
        answer = await _exchange(folder / "egress.sock", b"CONNECT localhost:80 HTTP/1.1\r\n\r\n")
    finally:
        await proxy.close()
    # /etc/hosts, through the real getaddrinfo: localhost is loopback, so refused.
    assert answer.startswith(b"HTTP/1.1 403 ") and b"loopback" in answer
