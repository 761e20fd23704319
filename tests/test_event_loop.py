"""`serve --loop`: uvloop when installed, asyncio's own loop on request or without it; on
uvloop, outgoing connections to IP addresses are made without resolving them again."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from steelframe import event_loop
from tests.fakes.ports import refused_port
from tests.fakes.served import served


def test_asyncio_is_asyncios_own_loop() -> None:
    assert event_loop.loop_factory("asyncio") is None


def test_auto_uses_uvloop_when_installed() -> None:
    uvloop = event_loop.uvloop
    if uvloop is None:
        if sys.platform == "win32":
            pytest.skip("uvloop does not exist on Windows")
        pytest.fail("the dev install has uvloop everywhere but Windows: pip install -e '.[dev]'")
    factory = event_loop.loop_factory("auto")
    assert factory is event_loop.ServeLoop
    with asyncio.Runner(loop_factory=factory) as runner:
        assert isinstance(runner.get_loop(), uvloop.Loop)
        assert runner.run(asyncio.sleep(0, result=7)) == 7


def test_without_uvloop_auto_falls_back_and_uvloop_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(event_loop, "uvloop", None)  # as on Windows
    assert event_loop.loop_factory("auto") is None
    with pytest.raises(event_loop.LoopUnavailable, match="not installed"):
        event_loop.loop_factory("uvloop")


@pytest.fixture
def serve_loop() -> Iterator[asyncio.Runner]:
    # uvloop is a dependency wherever `make test` runs (it uses .venv/bin: not Windows).
    assert event_loop.uvloop is not None, "uvloop is missing: pip install -e '.[dev]'"
    with asyncio.Runner(loop_factory=event_loop.ServeLoop) as runner:
        yield runner


@asynccontextmanager
async def hello_server() -> AsyncIterator[int]:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello")

    app = web.Application()
    app.router.add_get("/", hello)
    async with served(app) as port:
        yield port


def _nonblocking() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    return sock


def _no_lookup(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("an IP address went to getaddrinfo")


def test_connections_to_ip_addresses_skip_the_resolver(serve_loop: asyncio.Runner) -> None:
    """aiohttp connects to the addresses its resolver returned; serve's loop looks none of
    them up again (uvloop's own sends each through getaddrinfo on its thread pool)."""

    async def fetch() -> str:
        loop = asyncio.get_running_loop()
        async with hello_server() as port:
            with _nonblocking() as sock:
                loop.getaddrinfo = _no_lookup  # type: ignore[method-assign]
                try:
                    await loop.sock_connect(sock, ("127.0.0.1", port))
                finally:
                    del loop.getaddrinfo
                assert sock.getpeername() == ("127.0.0.1", port)
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{port}/") as response,
            ):
                return await response.text()

    assert serve_loop.run(fetch()) == "hello"


def test_host_names_are_still_resolved(serve_loop: asyncio.Runner) -> None:
    async def connect() -> tuple[int, int]:
        async with hello_server() as port:
            with _nonblocking() as sock:
                await asyncio.get_running_loop().sock_connect(sock, ("localhost", port))
                return sock.getpeername()[1], port

    peer_port, port = serve_loop.run(connect())
    assert peer_port == port


def test_a_refused_connection_raises_the_usual_error(serve_loop: asyncio.Runner) -> None:
    port = refused_port()  # bound by this process, never listening

    async def connect() -> None:
        with _nonblocking() as sock:
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))

    with pytest.raises(ConnectionRefusedError):
        serve_loop.run(connect())
