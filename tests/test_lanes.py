"""Fast lanes (steelframe.lanes): a delivery in GitHub's shape is answered by the lane, over
raw sockets so the bytes are exactly what a client sends; anything else on a connection is
handed to aiohttp with its bytes and answered as before; the lane's answers match
aiohttp's for the same request; budgets, disconnects, idle connections and shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import logging
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from sqlalchemy import func, select

from bot.config_values import Secret
from bot.errors import BadRequest
from http_edge.appkeys import LANE_ROUTES
from steelframe import lanes
from steelframe.lanes import Lanes
from steelframe.protocol_log import QuietAppRunner
from tests.conftest import GITHUB_DATA, WEBHOOK_SECRET, QuietTestServer, make_settings
from tests.conftest import webhook_headers as signed_headers
from tests.fakes.lifecycle import PATIENCE_SECONDS, wait_for
from webhooks import routes as webhook_routes
from webhooks.body import InFlight
from webhooks.deliveries import WebhookDelivery
from webhooks.deps import WEBHOOKS

OPENED = (GITHUB_DATA / "webhook-examples/issues/opened.payload.json").read_bytes()
# Another issue opened: a new delivery, not a replay of OPENED's content.
OTHER_OPENED = OPENED.replace(
    b'"updated_at": "2019-05-15T15:20:18Z"', b'"updated_at": "2030-01-01T00:00:00Z"'
)
PATH = "/api/github/webhooks"


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def request_bytes(
    body: bytes = OPENED,
    *,
    delivery: str | None = None,
    headers: dict[str, str] | None = None,
    chunked: bool = False,
    method_line: str = f"POST {PATH} HTTP/1.1",
) -> bytes:
    """A delivery as a client writes it: GitHub's headers, signed, then the body."""
    sent = {"Host": "steelframe.test", **signed_headers(body, "issues", delivery=delivery)}
    sent.update(headers or {})
    if chunked:
        sent["Transfer-Encoding"] = "chunked"
        payload = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    else:
        sent.setdefault("Content-Length", str(len(body)))
        payload = body
    head = "".join(f"{name}: {value}\r\n" for name, value in sent.items())
    return f"{method_line}\r\n{head}\r\n".encode() + payload


async def read_answer(reader: asyncio.StreamReader) -> Answer:
    """The next final answer (a `100 Continue` before it is skipped)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    while head.startswith(b"HTTP/1.1 1"):
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    status_line, *lines = head.decode("latin-1").split("\r\n")[:-2]
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Answer(int(status_line.split()[1]), headers, body)


@contextlib.asynccontextmanager
async def connection(port: int) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def exchange(port: int, *requests: bytes) -> list[Answer]:
    """Write the requests at once (pipelined) on one connection; their answers in order."""
    async with connection(port) as (reader, writer):
        writer.write(b"".join(requests))
        return [await read_answer(reader) for _ in requests]


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    with contextlib.suppress(ConnectionError):
        return await asyncio.wait_for(reader.read(), 30) == b""
    return True


@dataclass
class Served:
    port: int
    lanes: Lanes
    services: Any
    app: web.Application

    def stored(self) -> int:
        return int(
            self.services.db.call(
                lambda s: s.scalar(select(func.count()).select_from(WebhookDelivery))
            )
        )


async def serve(api_factory: Callable[..., Any], tmp_path: Path) -> Served:
    """The real app, served as `steelframe serve` serves it, with the webhook lane."""
    hooks = await api_factory(make_settings(tmp_path, webhook_secret=Secret(WEBHOOK_SECRET)))
    server = hooks.raw.server
    return Served(server.port, server.runner.server.lanes, hooks.services, server.app)


@pytest.fixture
async def served(api_factory: Callable[..., Any], tmp_path: Path) -> Served:
    return await serve(api_factory, tmp_path)


async def test_deliveries_in_githubs_shape_are_answered_on_the_lane_in_order(
    served: Served,
) -> None:
    first, again, second = await exchange(
        served.port,
        request_bytes(delivery="lane-1"),
        request_bytes(delivery="lane-1"),  # GitHub's redelivery: same id
        request_bytes(OTHER_OPENED, delivery="lane-2"),
    )
    assert (first.status, first.json()) == (202, {"delivery": "lane-1", "status": "accepted"})
    assert (again.status, again.json()) == (200, {"delivery": "lane-1", "status": "duplicate"})
    assert (second.status, second.json()) == (202, {"delivery": "lane-2", "status": "accepted"})
    assert first.headers["content-type"] == "application/json; charset=utf-8"
    assert first.headers["x-request-id"] != second.headers["x-request-id"]
    assert "connection" not in first.headers  # kept alive
    assert served.lanes.answered == 3 and served.lanes.handed_off == 0
    assert served.stored() == 2


async def test_another_request_on_the_connection_goes_to_aiohttp_with_its_bytes(
    served: Served,
) -> None:
    delivered, health, after = await exchange(
        served.port,
        request_bytes(delivery="before"),
        b"GET /healthz HTTP/1.1\r\nHost: steelframe.test\r\n\r\n",
        request_bytes(delivery="after"),
    )
    assert delivered.status == 202
    assert health.status == 200 and health.json()["status"] == "ok"
    # The connection stays with aiohttp, which serves the route as well.
    assert (after.status, after.json()["delivery"]) == (202, "after")
    assert served.lanes.answered == 1 and served.lanes.handed_off == 1
    assert served.stored() == 2


@pytest.mark.parametrize(
    ("variant", "change"),
    [
        ("chunked", {"chunked": True}),
        ("expect", {"headers": {"Expect": "100-continue"}}),
        ("query", {"method_line": f"POST {PATH}?x=1 HTTP/1.1"}),
        ("http/1.0", {"method_line": f"POST {PATH} HTTP/1.0"}),
        ("folded", {"headers": {"X-Folded": "a\r\n b"}}),
        ("non-ascii", {"headers": {"X-Name": "caf\u00e9"}}),
        ("twice", {"headers": {"Accept": "*/*", "accept": "*/*"}}),
        ("upgrade", {"headers": {"Connection": "upgrade", "Upgrade": "websocket"}}),
    ],
)
async def test_a_delivery_in_any_other_shape_is_served_by_aiohttp(
    served: Served, variant: str, change: dict[str, Any]
) -> None:
    delivery = f"shape-{variant}"
    raw = request_bytes(delivery=delivery, **change)
    if variant == "non-ascii":
        raw = raw.replace("caf\u00e9".encode(), "caf\u00e9".encode("utf-8"))
    async with connection(served.port) as (reader, writer):
        writer.write(raw)
        if variant == "expect":
            continued = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            assert continued.startswith(b"HTTP/1.1 100")
        answer = await read_answer(reader)
    if variant == "folded":  # obsolete line folding: aiohttp refuses it
        assert answer.status == 400 and served.stored() == 0
    else:
        assert (answer.status, answer.json()["delivery"]) == (202, delivery)
        assert served.stored() == 1
    assert served.lanes.answered == 0 and served.lanes.handed_off == 1


def damaged(name: str) -> tuple[bytes, dict[str, str]]:
    """A request the receiver refuses, as (body, header overrides)."""
    body = OPENED
    if name == "forged":
        return body, {"X-Hub-Signature-256": "sha256=" + "0" * 64}
    if name == "unsigned":
        return body, {"X-Hub-Signature-256": ""}
    if name == "no event":
        return body, {"X-GitHub-Event": ""}
    if name == "oversized":
        return body, {"Content-Length": str(26 * 1024 * 1024)}
    broken = {"not json": b"{not json", "lacking": b'{"action": "opened"}'}[name]
    return broken, signed_headers(broken, "issues")


@pytest.mark.parametrize(
    "name", ["forged", "unsigned", "no event", "oversized", "not json", "lacking"]
)
async def test_the_lanes_refusals_are_aiohttps_answers(served: Served, name: str) -> None:
    # The same request on the lane, and handed to aiohttp (chunked): same status and JSON.
    body, overrides = damaged(name)
    on_lane = request_bytes(body, delivery=f"lane-{name}", headers=overrides)
    if name == "oversized":
        on_lane = on_lane[: on_lane.index(b"\r\n\r\n") + 4]  # the body is never read
    (lane,) = await exchange(served.port, on_lane)
    by_aiohttp = {k: v for k, v in overrides.items() if k != "Content-Length"}
    if name == "oversized":
        # aiohttp can only see a chunked body's size while reading it: send a declared one
        # with `Expect`, which takes it off the lane as well.
        by_aiohttp = {**overrides, "Expect": "100-continue"}
        raw = request_bytes(body, delivery=f"http-{name}", headers=by_aiohttp)
        raw = raw[: raw.index(b"\r\n\r\n") + 4]
    else:
        raw = request_bytes(body, delivery=f"http-{name}", headers=by_aiohttp, chunked=True)
    (routed,) = await exchange(served.port, raw)
    assert lane.status == routed.status >= 400
    assert lane.json() == routed.json()
    assert lane.headers["x-request-id"]
    assert served.lanes.answered == 1 and served.lanes.handed_off == 1


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
@pytest.mark.parametrize("body", ["encoded", "not encoded"])
async def test_a_delivery_with_a_content_encoding_is_answered_as_aiohttp_answers_it(
    served: Served, encoding: str, body: str
) -> None:
    # aiohttp decodes the body as its Content-Encoding says, and the signature is checked on
    # what it decodes to; a body that does not decode is a 400 (http_edge.errors). A lane
    # reading the bytes as sent answered either with a signature mismatch or stored them.
    compress = gzip.compress if encoding == "gzip" else zlib.compress
    sent = compress(OPENED) if body == "encoded" else OPENED
    signed = signed_headers(OPENED, "issues", delivery=f"lane-{encoding}-{body}")
    headers = {**signed, "Content-Encoding": encoding, "Content-Length": str(len(sent))}
    raw = request_bytes(sent, headers=headers)

    (answer,) = await exchange(served.port, raw)

    if body == "encoded":
        assert answer.status == 202, answer.body
        assert served.stored() == 1
    else:
        assert answer.status == 400, answer.body
        assert answer.json()["error"] == "the request body could not be decoded"
        assert served.stored() == 0
    assert served.lanes.answered == 0 and served.lanes.handed_off == 1


async def test_a_delivery_that_decodes_past_the_largest_githubs_is_a_413(served: Served) -> None:
    # Declared small (a few KB of gzip), read as decoded: the 25 MB bound holds for that.
    bomb = gzip.compress(b" " * (26 * 1024 * 1024))
    headers = {"Content-Encoding": "gzip", "Content-Length": str(len(bomb))}
    (answer,) = await exchange(served.port, request_bytes(bomb, headers=headers))
    assert answer.status == 413, answer.body
    assert served.stored() == 0


async def test_a_body_the_budget_cannot_take_is_refused_with_retry_after(
    served: Served,
) -> None:
    receiver = served.app[WEBHOOKS].receiver
    receiver.budget = InFlight(limit=1024)
    async with connection(served.port) as (reader, writer):
        writer.write(request_bytes(delivery="busy"))
        answer = await read_answer(reader)
        assert answer.status == 503 and answer.json()["code"] == "busy"
        assert answer.headers["retry-after"] == "5"
        assert answer.headers["connection"] == "close"
        assert await closed_by_server(reader)
    assert receiver.budget.used == 0 and served.stored() == 0


async def test_a_client_gone_mid_body_gives_its_budget_back(served: Served) -> None:
    receiver = served.app[WEBHOOKS].receiver
    raw = request_bytes(delivery="gone")
    async with connection(served.port) as (_, writer):
        writer.write(raw[: len(raw) - 100])
        await writer.drain()
        await wait_for(lambda: receiver.budget.used > 0, within=PATIENCE_SECONDS)
    # wait_for's default 10 s, not PATIENCE_SECONDS: BODY_IDLE_SECONDS (30 s) would give the
    # budget back too, the client's leaving or not.
    await wait_for(lambda: receiver.budget.used == 0)
    assert served.stored() == 0 and served.lanes.answered == 0


async def test_a_body_that_stops_arriving_is_dropped_with_its_budget(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lanes, "BODY_IDLE_SECONDS", 0.3)
    receiver = served.app[WEBHOOKS].receiver
    raw = request_bytes(delivery="stalled")
    async with connection(served.port) as (reader, writer):
        writer.write(raw[: len(raw) - 100])
        answer = await read_answer(reader)
        assert answer.status == 408 and answer.json()["code"] == "request_timeout"
        assert answer.headers["connection"] == "close"
        assert await closed_by_server(reader)
    await wait_for(lambda: receiver.budget.used == 0, within=PATIENCE_SECONDS)
    assert served.stored() == 0


async def test_a_chunked_body_that_stops_arriving_is_a_408_from_aiohttp_too(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(webhook_routes, "BODY_STALL_SECONDS", 0.3)
    receiver = served.app[WEBHOOKS].receiver
    raw = request_bytes(delivery="stalled-chunked", chunked=True)
    async with connection(served.port) as (reader, writer):
        writer.write(raw[: len(raw) - 200])
        answer = await read_answer(reader)
    assert answer.status == 408 and answer.json()["code"] == "request_timeout"
    await wait_for(lambda: receiver.budget.used == 0, within=PATIENCE_SECONDS)
    assert served.stored() == 0 and served.lanes.handed_off == 1


async def test_a_header_block_over_the_limit_is_aiohttps_431(served: Served) -> None:
    raw = request_bytes(delivery="large", headers={"X-Padding": "p" * (lanes.MAX_HEAD + 10)})
    async with connection(served.port) as (reader, writer):
        writer.write(raw)
        answer = await read_answer(reader)
    assert answer.status == 431 and answer.json()["code"] == "headers_too_large"
    assert served.lanes.handed_off == 1 and served.stored() == 0


async def test_connection_close_is_honoured(served: Served) -> None:
    async with connection(served.port) as (reader, writer):
        writer.write(request_bytes(delivery="closing", headers={"Connection": "close"}))
        answer = await read_answer(reader)
        assert answer.status == 202 and answer.headers["connection"] == "close"
        assert await closed_by_server(reader)


async def test_an_idle_connection_is_closed_after_the_keep_alive_time(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lanes, "KEEP_ALIVE_SECONDS", 0.2)
    async with connection(served.port) as (reader, writer):
        writer.write(request_bytes(delivery="idle"))
        assert (await read_answer(reader)).status == 202
        assert await closed_by_server(reader)
    # A head that never completes is closed the same way.
    async with connection(served.port) as (reader, writer):
        writer.write(request_bytes(delivery="slow")[:40])
        assert await closed_by_server(reader)
    assert served.stored() == 1


class HeldRoute:
    """A lane route whose answers wait for `go`: the server's shutdown, mid-answer."""

    request_line = b"POST /held HTTP/1.1"
    path = "/held"

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.started = asyncio.Event()
        self.released = 0

    def begin(self, headers: Any, content_length: int) -> HeldRoute:
        if headers.get("x-refuse"):
            raise BadRequest("refused before the body")
        return self

    def feed(self, chunk: bytes, *, whole: bool) -> None:
        if chunk == b"crash":
            raise RuntimeError("internal detail that must not leak")

    async def finish(self) -> tuple[int, bytes]:
        self.started.set()
        await self.go.wait()
        return 200, b'{"held": true}'

    def release(self) -> None:
        self.released += 1


@pytest.fixture
async def held(aiohttp_client: Any) -> AsyncIterator[tuple[Any, HeldRoute]]:
    route = HeldRoute()
    app = web.Application()
    app[LANE_ROUTES] = {route.request_line: route}
    client = await aiohttp_client(QuietTestServer(app))
    yield client, route
    route.go.set()


def held_request(**headers: str) -> bytes:
    head = "".join(f"{k}: {v}\r\n" for k, v in {"Content-Length": "2", **headers}.items())
    return f"POST /held HTTP/1.1\r\n{head}\r\nok".encode()


async def test_shutdown_lets_answers_under_way_finish_and_closes_idle_lanes(
    held: tuple[Any, HeldRoute],
) -> None:
    client, route = held
    port = client.server.port
    lanes = client.server.runner.server.lanes
    async with (
        connection(port) as (busy_reader, busy_writer),
        connection(port) as (late_reader, late_writer),
        connection(port) as (idle, _),
    ):
        busy_writer.write(held_request())
        await route.started.wait()
        late = held_request()
        late_writer.write(late[:-1])  # the body's last byte still to come
        await wait_for(
            lambda: any(lane.reading for lane in list(lanes.open)), within=PATIENCE_SECONDS
        )
        stopping = asyncio.create_task(client.server.close())
        assert await closed_by_server(idle)  # the idle lane is closed at once
        late_writer.write(late[-1:])
        route.go.set()
        for reader in (busy_reader, late_reader):
            answer = await read_answer(reader)
            assert (answer.status, answer.json()) == (200, {"held": True})
            assert answer.headers["connection"] == "close"
            assert await closed_by_server(reader)
        await stopping
    assert route.released == 2


async def test_a_refusal_before_the_body_closes_and_a_crash_is_a_bare_500(
    held: tuple[Any, HeldRoute], caplog: pytest.LogCaptureFixture
) -> None:
    client, route = held
    route.go.set()
    async with connection(client.server.port) as (reader, writer):
        writer.write(held_request(**{"X-Refuse": "1", "X-Request-Id": "req-7"}))
        refused = await read_answer(reader)
        assert refused.status == 400 and refused.headers["x-request-id"] == "req-7"
        assert refused.json() == {
            "error": "refused before the body",
            "code": "bad_request",
            "detail": None,
        }
        assert await closed_by_server(reader)
    crash = b"POST /held HTTP/1.1\r\nContent-Length: 5\r\n\r\ncrash"
    with caplog.at_level(logging.ERROR, logger="steelframe.http"):
        (answer,) = await exchange(client.server.port, crash)
    assert answer.status == 500 and answer.json()["code"] == "internal_error"
    assert "internal detail" not in answer.body.decode()
    assert answer.json()["detail"]["request_id"] == answer.headers["x-request-id"]
    assert "unhandled error on POST /held" in caplog.text
    assert route.released == 1


async def test_the_access_log_has_a_line_for_each_answer_when_asked_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    route = HeldRoute()
    route.go.set()
    app = web.Application()
    app[LANE_ROUTES] = {route.request_line: route}
    runner = QuietAppRunner(app, access_log=logging.getLogger("test.lanes.access"))
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        with caplog.at_level(logging.INFO, logger="test.lanes.access"):
            (answer,) = await exchange(runner.addresses[0][1], held_request())
    finally:
        await runner.cleanup()
    assert answer.status == 200
    assert '127.0.0.1 "POST /held HTTP/1.1" 200 14' in caplog.text
