"""The TUI through a Redis outage: its events stream, refused with a 503 while Redis is
away, is re-opened (with a visible status) and shows what happened meanwhile; a turn's
re-attach answered 503 is one failed attempt, not the end of the turn; the SSE reader takes
its position from an `id:` line without data (how the service starts an events stream).

A Redis of the test's own goes away and comes back with its data (tests/fakes/own_redis.py),
as tests/test_streams_redis_failure.py has the service do."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bot.runtimes.base import Delta
from tests.conftest import make_settings
from tests.fakes.own_redis import OwnRedis
from tests.fakes.own_redis import own_redis_fixture as own_redis_fixture  # `own_redis`
from tests.fakes.runtimes import ScriptedRuntime
from tests.fakes.tui import SIZE, ready, tui, until
from tests.fakes.turn_relay import HeldRepeat, SwitchingProxy
from tui_client.api import LiveStatus
from tui_client.app import SteelframeApp
from tui_client.chat import SessionItem
from tui_client.events_wire import EventFrame, SessionFrame
from tui_client.sessions_wire import DeltaFrame, DoneFrame
from tui_client.sse import SseReader
from tui_client.turn_frames import NumberedFrame


def test_sse_reader_takes_the_id_of_an_event_without_data() -> None:
    """The SSE standard sets the last event id from an `id:` line even when the event has
    no data (nothing is dispatched): a stream that breaks right after resumes from there."""
    reader = SseReader()
    assert reader.feed(b"id: 7\n\n") == []
    assert (reader.last_event_id, reader.id_seen) == (7, True)
    assert reader.feed(b': ping\n\nid: 8\ndata: {"type": "x"}\n\n') == [{"type": "x", "id": 8}]
    assert reader.last_event_id == 8


async def test_an_events_stream_broken_before_its_first_event_reopens_where_it_began(
    api_factory: Any, tmp_path: Path, own_redis: OwnRedis
) -> None:
    """Opened without Last-Event-ID, the stream's first line is `id: N` (no data): the
    client re-opens from N, so what came while it was away is not skipped for a new "now"."""
    held = HeldRepeat("/api/operator/events")
    api = await api_factory(
        make_settings(tmp_path, redis_url=own_redis.url), plugins=held.plugins()
    )
    await api.post("/api/operator/chat/new", json={})  # the log is at 1
    client = api.operator_client()
    frames: list[EventFrame] = []
    arrived, live = asyncio.Event(), asyncio.Event()

    def heard(status: LiveStatus) -> None:
        if status.live:
            live.set()

    async def follow() -> None:
        async for frame in client.events(on_status=heard):
            frames.append(frame)
            arrived.set()

    following = asyncio.create_task(follow())
    try:
        async with asyncio.timeout(60):
            await live.wait()  # the headers came; the `id: 1` line is written with them
        own_redis.stop_keeping_data()  # the stream ends before any event
        async with asyncio.timeout(60):
            await held.asked_again.wait()
        assert held.last_event_ids == [None, "1"]  # re-opened where it began
        own_redis.start()
        missed = [await (await api.post("/api/operator/chat/new", json={})).json() for _ in "ab"]
        held.release.set()
        async with asyncio.timeout(60):
            while len(frames) < 2:
                arrived.clear()
                await arrived.wait()
    finally:
        following.cancel()
        await client.close()
    assert [f.session_id for f in frames if isinstance(f, SessionFrame)] == [
        m["id"] for m in missed
    ]


def _listed(app: SteelframeApp) -> list[str]:
    return [item.session_id for item in app.chat.sessions.query(SessionItem)]


async def test_the_tui_events_stream_survives_a_503_and_shows_what_it_missed(
    api_factory: Any, tmp_path: Path, own_redis: OwnRedis
) -> None:
    api = await api_factory(make_settings(tmp_path, redis_url=own_redis.url))
    app = tui(api)
    base = app.client.base_url
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        before = await (await api.post("/api/operator/chat/new", json={})).json()
        await until(pilot, lambda: before["id"] in _listed(app), "the stream to be live")

        own_redis.stop_keeping_data()  # the stream ends; re-opening it is answered 503
        await until(
            pilot,
            lambda: "503" in app.sub_title or any("stopped" in t for t in app.told),
            lambda: f"a 503 on re-opening, header {app.sub_title!r}, told {app.told}",
        )
        assert "live updates: reconnecting…" in app.sub_title, app.sub_title
        assert not [t for t in app.told if "stopped" in t]

        own_redis.start()
        missed = [await (await api.post("/api/operator/chat/new", json={})).json() for _ in "ab"]
        await until(
            pilot,
            lambda: all(m["id"] in _listed(app) for m in missed),
            lambda: f"the sessions made meanwhile, listed {_listed(app)}",
        )
        await until(pilot, lambda: app.sub_title == base, lambda: f"live: {app.sub_title!r}")
        assert not [t for t in app.told if "stopped" in t]


async def test_a_turn_whose_reattach_is_answered_503_once_still_ends(
    api_factory: Any, tmp_path: Path, own_redis: OwnRedis
) -> None:
    """The turn runs on one instance; its stream breaks while Redis is away and the client
    lands on the other, which cannot find the turn yet (503): one failed attempt, and the
    next, once Redis is back, resumes from the last frame with nothing lost or doubled."""
    gate = asyncio.Event()  # the model holds its answer until Redis is back
    runtime = ScriptedRuntime([[Delta(f"w{i} ") for i in range(10)]], gate=gate)
    settings = make_settings(tmp_path, redis_url=own_redis.url)
    held = HeldRepeat("/api/operator/chat/stream")
    first = await api_factory(settings, runtimes=lambda agent: runtime)
    other = await api_factory(settings, runtimes=lambda agent: runtime, plugins=held.plugins())
    proxy = SwitchingProxy(first.raw.port, other.raw.port)
    client = other.as_operator(first.token).operator_client(url=await proxy.start())
    frames: list[NumberedFrame] = []
    got_one = asyncio.Event()

    async def follow() -> None:
        async for frame in client.turn("stream it"):
            frames.append(frame)
            got_one.set()

    following = asyncio.create_task(follow())
    try:
        async with asyncio.timeout(60):
            await got_one.wait()  # the turn's first frame: the client knows the turn
            await runtime.called.wait()
        own_redis.stop_keeping_data()
        proxy.cut.set()
        async with asyncio.timeout(60):
            await held.first_done.wait()
        assert held.answered == [503]
        assert not following.done(), following  # the old client raised the 503 here
        own_redis.start()
        held.release.set()
        gate.set()
        async with asyncio.timeout(60):
            await following
    finally:
        following.cancel()
        await client.close()
        await proxy.close()
    ids = [f.id for f in frames]
    assert ids[0] is not None and ids == list(range(ids[0], ids[0] + len(frames)))
    assert isinstance(frames[-1].frame, DoneFrame)
    deltas = "".join(f.frame.text for f in frames if isinstance(f.frame, DeltaFrame))
    assert deltas.split() == [f"w{i}" for i in range(10)]
    assert proxy.connections >= 2
