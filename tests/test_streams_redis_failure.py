"""The SSE streams read from Redis when it fails: the operator events stream and a chat turn
relayed from another instance. Before the headers a 503 JSON; after them one log line with
the request id and a clean end of the stream (the events contract has no error frame, and a
turn that did not fail must not get one: a browser's EventSource, the GUI's and the TUI's
chat streams re-open a stream that ended), and a client that re-opens with Last-Event-ID
once Redis is back gets every frame it missed.

A Redis of the test's own goes away and comes back with its data (SAVE before the stop,
the same folder after), as a restarted or failed-over Redis does (tests/fakes/own_redis.py)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from bot.runtimes.base import Delta
from tests.conftest import frames_until, make_settings, read_sse
from tests.fakes.events import EVENTS, EventsFeed
from tests.fakes.own_redis import OwnRedis
from tests.fakes.own_redis import own_redis_fixture as own_redis_fixture  # `own_redis`
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.runtimes import ScriptedRuntime


def _problems(records: list[logging.LogRecord]) -> list[logging.LogRecord]:
    """Tracebacks and errors: what a handled Redis failure must not log."""
    return [r for r in records if r.exc_info or r.levelno >= logging.ERROR]


async def _ended(feed: EventsFeed, *, within: float = 30.0) -> BaseException | None:
    """Wait until the server ends the stream; how the client's read ended (None: cleanly)."""
    async with asyncio.timeout(within):
        await asyncio.wait({feed._task})
    return feed._task.exception()


async def test_a_redis_failure_mid_stream_ends_it_cleanly_and_a_reconnect_misses_nothing(
    api_factory: Any, tmp_path: Path, own_redis: OwnRedis, caplog: pytest.LogCaptureFixture
) -> None:
    api = await api_factory(make_settings(tmp_path, redis_url=own_redis.url))
    response = await api.get(EVENTS, headers={"X-Request-Id": "req-events-1"})
    assert response.status == 200
    feed = EventsFeed(response)
    await api.post("/api/operator/chat/new", json={})
    seen = await feed.wait_for(lambda f: f["type"] == "session")

    caplog.clear()
    with caplog.at_level(logging.INFO):
        own_redis.stop_keeping_data()
        # the stream ends: no truncated chunked body, no 500 written after the headers
        assert await _ended(feed) is None
        # one line says why, with the request id; no traceback ("Error handling request")
        told = [r for r in caplog.records if "req-events-1" in r.getMessage()]
        assert len(told) == 1, [r.getMessage() for r in caplog.records]
        assert "Redis" in told[0].getMessage() and told[0].levelno == logging.WARNING
        assert _problems(caplog.records) == []
        # a reconnect while Redis is away: a clear 503 before any header of a stream
        refused = await api.get(EVENTS, headers={"Last-Event-ID": str(seen["id"])})
        assert refused.status == 503
        assert (await refused.json())["code"] == "unavailable"
        assert _problems(caplog.records) == []
    feed.response.close()

    own_redis.start()
    missed = [await (await api.post("/api/operator/chat/new", json={})).json() for _ in range(2)]
    again = await EventsFeed.open(api, last_event_id=seen["id"])
    try:
        await again.wait_for(lambda f: f.get("session_id") == missed[-1]["id"])
        created = [f["session_id"] for f in again.frames if f.get("change") == "created"]
        assert created == [m["id"] for m in missed]
        assert again.of_type("resync") == []
        assert [f["id"] for f in again.frames] == list(range(seen["id"] + 1, seen["id"] + 3))
    finally:
        await again.close()


async def test_a_stream_opened_without_last_event_id_says_where_it_starts(
    api_factory: Any, tmp_path: Path, own_redis: OwnRedis
) -> None:
    """A stream that starts "now" names its position first (an `id:` line without data):
    a browser whose stream breaks before any event re-opens from there, not from a new
    "now" that would skip what happened in between."""
    api = await api_factory(make_settings(tmp_path, redis_url=own_redis.url))
    await api.post("/api/operator/chat/new", json={})  # the log is at 1
    response = await api.get(EVENTS)
    assert response.status == 200
    first = await asyncio.wait_for(response.content.readuntil(b"\n\n"), PATIENCE_SECONDS)
    assert first == b"id: 1\n\n"
    response.close()


async def test_a_relayed_turn_whose_redis_fails_ends_without_a_terminal_frame_and_resumes(
    api_factory: Any, tmp_path: Path, own_redis: OwnRedis, caplog: pytest.LogCaptureFixture
) -> None:
    gate = asyncio.Event()  # the model holds its answer until Redis is back
    runtime = ScriptedRuntime([[Delta(f"w{i} ") for i in range(10)]], gate=gate)
    settings = make_settings(tmp_path, redis_url=own_redis.url)
    first = await api_factory(settings, runtimes=lambda agent: runtime)
    other = (await api_factory(settings, runtimes=lambda agent: runtime)).as_operator(first.token)
    started = await first.post("/api/operator/chat/stream", json={"message": "stream it"})
    session = started.headers["X-Steelframe-Session"]
    await asyncio.wait_for(runtime.called.wait(), PATIENCE_SECONDS)
    started.close()  # the client moves to the other instance, which reads Redis

    resumed = await other.get(
        f"/api/operator/chat/stream?session={session}", headers={"X-Request-Id": "req-chat-1"}
    )
    assert resumed.status == 200
    seen = await frames_until(resumed, lambda f: True)  # the turn's first frame
    caplog.clear()
    with caplog.at_level(logging.INFO):
        own_redis.stop_keeping_data()
        async with asyncio.timeout(30):  # the stream ends, cleanly, without done or error
            seen += await frames_until(resumed, lambda f: False)
        assert [f for f in seen if f["type"] in ("done", "error")] == []
        told = [r for r in caplog.records if "req-chat-1" in r.getMessage()]
        assert len(told) == 1, [r.getMessage() for r in caplog.records]
        assert "Redis" in told[0].getMessage() and told[0].levelno == logging.WARNING
        assert _problems(caplog.records) == []

    own_redis.start()
    gate.set()
    again = await other.get(
        f"/api/operator/chat/stream?session={session}",
        headers={"Last-Event-ID": str(seen[-1]["id"])},
    )
    assert again.status == 200
    async with asyncio.timeout(30):
        frames = seen + await read_sse(again)
    ids = [f["id"] for f in frames]
    assert ids == list(range(ids[0], ids[0] + len(frames)))  # nothing lost, nothing twice
    assert frames[-1]["type"] == "done"
    deltas = "".join(f.get("text", "") for f in frames if f["type"] == "delta")
    assert deltas.split() == [f"w{i}" for i in range(10)]


async def test_an_error_mid_turn_stream_ends_it_and_the_turn_goes_on(
    api_factory: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Any error past a turn stream's headers (a frame another release wrote that cannot be
    read, a bug) ends the stream with its log line; left to aiohttp it stayed open with
    nothing more to come. The turn itself goes on, and a re-attach reads its end."""
    from bot.chat.inflight import TurnHandle

    gate = asyncio.Event()
    runtime = ScriptedRuntime([[Delta("the answer")]], gate=gate)
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    subscribe = TurnHandle.subscribe

    async def breaks_after_the_first(handle: TurnHandle, **options: Any) -> Any:
        async for frame in subscribe(handle, **options):
            yield frame
            if frame is not None:
                raise RuntimeError("unreadable frame")

    monkeypatch.setattr(TurnHandle, "subscribe", breaks_after_the_first)
    with caplog.at_level(logging.ERROR):
        response = await api.post(
            "/api/operator/chat/stream",
            json={"message": "hello"},
            headers={"X-Request-Id": "req-turn-1"},
        )
        assert response.status == 200
        async with asyncio.timeout(PATIENCE_SECONDS):
            frames = await read_sse(response)  # to the end of the stream
    assert frames and frames[-1]["type"] not in ("done", "error")  # ended, not failed
    assert [r for r in caplog.records if "req-turn-1" in r.getMessage()]

    monkeypatch.setattr(TurnHandle, "subscribe", subscribe)
    gate.set()
    session = response.headers["X-Steelframe-Session"]
    again = await api.get(
        f"/api/operator/chat/stream?session={session}",
        headers={"Last-Event-ID": str(frames[-1]["id"])},
    )
    done = await read_sse(again)
    assert done[-1]["type"] == "done"


async def test_an_error_mid_events_stream_ends_it(
    api_factory: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The events stream likewise: an error past its headers ends it, logged; the client
    re-opens it with Last-Event-ID."""
    from bot.events import OperatorEvents

    api = await api_factory(make_settings(tmp_path))
    stream = OperatorEvents.stream

    async def breaks_after_the_first(events: OperatorEvents, *args: Any, **options: Any) -> Any:
        async for event in stream(events, *args, **options):
            yield event
            if event is not None:
                raise RuntimeError("unreadable event")

    monkeypatch.setattr(OperatorEvents, "stream", breaks_after_the_first)
    with caplog.at_level(logging.ERROR):
        response = await api.get(EVENTS, headers={"X-Request-Id": "req-events-2"})
        assert response.status == 200
        feed = EventsFeed(response)
        await api.post("/api/operator/chat/new", json={})
        assert await _ended(feed, within=PATIENCE_SECONDS) is None
    assert feed.of_type("session")  # the event before the error was sent
    assert [r for r in caplog.records if "req-events-2" in r.getMessage()]
