"""The error answers' bytes (docs/api.md, "Errors") as the real service sends them: the same
before and after `detail` became a Struct (bot.contracts.errors.ErrorDetail). The expected
bytes were recorded on the code that built `detail` from dicts; a key renamed, dropped,
reordered or a null left out would change them."""

from __future__ import annotations

import asyncio
import contextlib
import types
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest
from aiohttp import web
from sqlalchemy.exc import OperationalError

from bot.contracts.errors import ErrorDetail
from bot.errors import Conflict, SteelframeError, TooManyRequests, error_body
from http_edge import validation
from http_edge.errors import errors_middleware
from steelframe.lanes import _failure
from tests.conftest import ApiClient, make_settings
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.runtimes import ScriptedRuntime, reply

ID = {"X-Request-Id": "req-bytes-1"}


async def _body(answer: Any) -> tuple[int, bytes]:
    return answer.status, await answer.read()


async def test_the_operator_apis_error_answers_keep_their_bytes(api: ApiClient) -> None:
    seen = [
        await _body(await api.post("/api/operator/chat/new", json={"issue": 0})),
        await _body(await api.post("/api/operator/chat/new", json={"agent": "nobody"})),
        await _body(await api.post("/api/operator/chat/new", json={"shade": 1})),
        await _body(await api.post("/api/operator/chat/new", data=b"{nope")),
        await _body(await api.post("/api/operator/chat", data=b"[" * 40 + b"]" * 40)),
        await _body(await api.post("/api/operator/chat", json={"message": "x" * 200_000})),
        await _body(await api.get("/api/operator/chat/session/0123abcd")),
        await _body(await api.get("/api/operator/board?state=nowhere")),
        await _body(await api.get("/api/operator/tasks/0")),
    ]
    assert seen == [
        (
            400,
            b'{"error": "issue must be a positive integer issue number", "code": "bad_request",'
            b' "detail": {"field": "issue"}}',
        ),
        (
            400,
            b'{"error": "unknown agent \'nobody\'", "code": "bad_request", "detail":'
            b' {"field": "agent", "known": ["default"]}}',
        ),
        (
            400,
            b'{"error": "unknown field \'shade\'", "code": "bad_request", "detail":'
            b' {"field": "shade", "allowed": ["agent", "issue", "title"]}}',
        ),
        (
            400,
            b'{"error": "request body is not valid JSON", "code": "bad_request", "detail":'
            b' {"reason": "unexpected character, expected a string key: line 1 column'
            b' 2 (char 1)"}}',
        ),
        (
            400,
            b'{"error": "request body is nested deeper than 32 levels", "code": "bad_request",'
            b' "detail": {"limit": 32}}',
        ),
        (
            413,
            b'{"error": "request body is larger than 196096 bytes", "code": "payload_too_large",'
            b' "detail": {"limit": 196096}}',
        ),
        (404, b'{"error": "session 0123abcd not found", "code": "not_found", "detail": null}'),
        (
            400,
            b'{"error": "state must be one of queued, running, waiting_for_info, delivered,'
            b' failed, terminated, merged, closed", "code": "bad_request", "detail": {"field":'
            b' "state", "allowed": ["queued", "running", "waiting_for_info", "delivered",'
            b' "failed", "terminated", "merged", "closed"]}}',
        ),
        (
            400,
            b'{"error": "task id must be a positive integer", "code": "bad_request",'
            b' "detail": {"field": "id"}}',
        ),
    ]


async def test_a_turn_in_flight_is_a_409_naming_it(
    api_factory: Callable[..., Awaitable[ApiClient]], tmp_path: Path
) -> None:
    gate = asyncio.Event()
    runtime = ScriptedRuntime([reply("never")], gate=gate)
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    client = api.operator_client()
    try:
        stream = client.turn("wait")
        first = await anext(stream)
        answer = await api.post("/api/operator/chat", json={"message": "and this"})
        turn_id = first.frame.turn_id
        assert await _body(answer) == (
            409,
            b'{"error": "a turn is already in flight for this operator; resume it or stop it'
            b' first", "code": "conflict", "detail": {"session": "%s", "turn_id": "%s"}}'
            % (first.frame.session.encode(), turn_id.encode()),
        )
        gate.set()
        [frame async for frame in stream]
    finally:
        await client.close()


async def test_the_middlewares_own_answers_keep_their_bytes(aiohttp_client: Any) -> None:
    """What no route of the real service raises on demand: a bug (500), a database that does
    not answer (503), a throttled client (429), through the real middleware."""

    async def bug(request: web.Request) -> web.Response:
        raise RuntimeError("a bug")

    async def database(request: web.Request) -> web.Response:
        raise OperationalError("SELECT 1", {}, Exception("gone"))

    async def throttled(request: web.Request) -> web.Response:
        raise TooManyRequests("too many failed authentications", retry_after=7)

    async def conflict(request: web.Request) -> web.Response:
        raise Conflict("task 3 is running", detail=ErrorDetail(task=3, state="running"))

    app = web.Application(middlewares=[errors_middleware])
    for path, handler in [("/bug", bug), ("/db", database), ("/429", throttled)]:
        app.router.add_get(path, handler)
    app.router.add_get("/409", conflict)
    client = await aiohttp_client(app)
    seen = [await _body(await client.get(path, headers=ID)) for path in ("/bug", "/db", "/429")]
    seen.append(await _body(await client.get("/409")))
    assert seen == [
        (
            500,
            b'{"error": "internal error", "code": "internal_error", "detail":'
            b' {"request_id": "req-bytes-1"}}',
        ),
        (
            503,
            b'{"error": "the database is unavailable", "code": "database_unavailable",'
            b' "detail": {"request_id": "req-bytes-1", "retry_after": 5}}',
        ),
        (
            429,
            b'{"error": "too many failed authentications", "code": "too_many_requests",'
            b' "detail": {"retry_after": 7}}',
        ),
        (
            409,
            b'{"error": "task 3 is running", "code": "conflict", "detail":'
            b' {"task": 3, "state": "running"}}',
        ),
    ]


def test_a_fast_lanes_error_answers_keep_their_bytes() -> None:
    """The fast lanes encode with orjson (no spaces): the same keys, in the same order."""
    route = types.SimpleNamespace(path="/api/github/webhooks")
    bug = _failure(route, RuntimeError("a bug"), "req-bytes-1")  # type: ignore[arg-type]
    assert bug.body == (
        b'{"error":"internal error","code":"internal_error","detail":{"request_id":"req-bytes-1"}}'
    )
    failed = _failure(route, SteelframeError("no"), "req-bytes-1")  # type: ignore[arg-type]
    assert failed.body == b'{"error":"no","code":"internal_error","detail":null}'
    assert msgspec.json.decode(
        msgspec.json.encode(error_body("x", ErrorDetail(field="f"), code="c"))
    ) == {"error": "x", "code": "c", "detail": {"field": "f"}}


async def test_a_path_sent_with_line_breaks_is_logged_as_sent_never_as_a_new_line(
    api: ApiClient, caplog: Any
) -> None:
    """The path is logged percent-encoded: decoded, `%0A` wrote a log line of the client's
    choosing (here through the 401 line: no token needed)."""
    forged = "/api/operator/chat/session/abc%0A2026-12-06 08:00:00,000 CRITICAL forged"
    caplog.set_level("INFO", logger="steelframe.http")
    answer = await api.raw.get(forged.replace(" ", "%20"))
    assert answer.status == 401
    lines = [line for r in caplog.records for line in r.getMessage().splitlines()]
    assert lines and not any(line.startswith("2026-12-06") for line in lines), lines
    assert any("abc%0A2026-12-06" in line for line in lines), lines


async def test_a_405_says_which_methods_the_path_allows(api: ApiClient) -> None:
    answer = await api.get("/api/operator/chat/new")
    assert answer.status == 405
    assert (await answer.json())["code"] == "method_not_allowed"
    assert answer.headers["Allow"] == "POST"


async def test_a_chat_body_that_stops_arriving_is_a_408(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bodies the operator API reads are bounded in time as webhooks' are: a client that
    declares 100 bytes and sends 10 gets a 408, not a request held open while it stays."""
    monkeypatch.setattr(validation, "BODY_STALL_SECONDS", 0.3)
    url = api.raw.make_url("/api/operator/chat")
    reader, writer = await asyncio.open_connection(url.host, url.port)
    try:
        writer.write(
            b"POST /api/operator/chat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {api.token}\r\nContent-Length: 100\r\n\r\n".encode()
            + b'{"message"'
        )
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), PATIENCE_SECONDS)
    finally:
        writer.close()
    assert head.startswith(b"HTTP/1.1 408"), head
    sessions = await (await api.get("/api/operator/chat/sessions")).json()
    assert sessions["sessions"] == []  # nothing was started


async def test_a_client_that_left_is_no_unhandled_error(
    aiohttp_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A client gone while its stream's headers were sent (a page reloaded quickly) was
    logged as an unhandled error with a traceback and counted a 500."""

    async def left(request: web.Request) -> web.Response:
        raise ConnectionResetError("Cannot write to closing transport")

    app = web.Application(middlewares=[errors_middleware])
    app.router.add_get("/left", left)
    client = await aiohttp_client(app)
    caplog.set_level("INFO", logger="steelframe.http")
    with contextlib.suppress(aiohttp.ClientError):
        await client.get("/left")
    assert not [r for r in caplog.records if "unhandled error" in r.getMessage()]
