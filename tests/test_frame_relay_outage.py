"""A turn's frames through a Redis outage (bot.chat.frames): what a turn publishes while Redis
is away waits in its process and is written, in order and before anything later, once Redis
is back, so a client re-attaching through another instance gets the whole turn; frames Redis
never got or lost (held past the bound, a Redis back without its data) are said with a
`frames_lost` status frame where they were, never skipped in silence; a frame written twice
(a retry after a lost answer) is read once.

A Redis of the test's own goes away and comes back (tests/fakes/own_redis.py)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from bot.chat.frame_relay import RedisFrameRelay
from bot.chat.frames import Continuity, NumberedFrame
from bot.contracts.chat import DeltaFrame, DoneFrame, StatusFrame, StatusReason
from bot.runtimes.base import Delta
from tests.conftest import frames_until, make_settings, read_sse
from tests.fakes.own_redis import OwnRedis
from tests.fakes.own_redis import own_redis_fixture as own_redis_fixture  # `own_redis`
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.runtimes import ScriptedRuntime
from tests.test_frame_relay import _response

TURN = "turn-1"
WAIT = PATIENCE_SECONDS  # a hang deadline: a passing wait takes well under a second


def _opening(frame_id: int) -> NumberedFrame:
    return NumberedFrame.of(frame_id, StatusFrame(text="turn started", turn_id=TURN))


def _delta(frame_id: int) -> NumberedFrame:
    return NumberedFrame.of(frame_id, DeltaFrame(text=f"w{frame_id} ", draft=1))


def _done(frame_id: int) -> NumberedFrame:
    return NumberedFrame.of(frame_id, DoneFrame(response=_response("the whole reply")))


def _shown(frames: list[NumberedFrame]) -> list[tuple[int, str]]:
    """Each frame as its id and what it is (`lost` for a frames_lost status frame)."""
    return [
        (
            f.id,
            "lost"
            if getattr(f.frame, "reason", None) == StatusReason.FRAMES_LOST
            else type(f.frame).__name__,
        )
        for f in frames
    ]


async def _replayed(relay: RedisFrameRelay, after: int) -> list[NumberedFrame]:
    async with asyncio.timeout(WAIT):
        return [f async for f in relay.replay(TURN, after=after, heartbeat=5) if f is not None]


async def _publish(relay: RedisFrameRelay, *frames: NumberedFrame) -> None:
    """Publish as a turn does: one after the other, none held up by a Redis that is away."""
    for frame in frames:
        await asyncio.wait_for(relay.publish(7, TURN, "session-1", frame), WAIT)


async def _held(relay: RedisFrameRelay, count: int) -> None:
    """Wait until `count` frames wait for Redis (the relay's flusher trims between tries)."""
    async with asyncio.timeout(WAIT):
        while True:
            if relay.held == count:
                return
            await asyncio.sleep(0.02)


async def test_frames_published_while_redis_is_away_are_written_in_order_once_it_is_back(
    own_redis: OwnRedis, caplog: pytest.LogCaptureFixture
) -> None:
    relay = RedisFrameRelay(own_redis.url, linger=60)
    await _publish(relay, _opening(1), _delta(2))
    with caplog.at_level(logging.WARNING):
        try:
            own_redis.stop_keeping_data()
            await _publish(relay, _delta(3), _delta(4))
            own_redis.start()
            await _publish(relay, _delta(5), _done(6))  # behind the held ones, not before
            replayed = await _replayed(relay, after=2)
        finally:
            await relay.close()
    told = [r.getMessage() for r in caplog.records if r.name == "bot.chat.frame_outbox"]
    assert _shown(replayed) == [
        (3, "DeltaFrame"),
        (4, "DeltaFrame"),
        (5, "DeltaFrame"),
        (6, "DoneFrame"),
    ]
    # One line when Redis went, one when it came back: never one a frame.
    assert len(told) == 2 and "wait here, in order" in told[0] and "again" in told[1], told


async def test_frames_a_redis_back_without_its_data_lost_are_said_where_they_were(
    own_redis: OwnRedis,
) -> None:
    relay = RedisFrameRelay(own_redis.url, linger=60)
    try:
        await _publish(relay, _opening(1), _delta(2), _delta(3))
        own_redis.stop_losing_data()  # 1 to 3 are gone with it
        await _publish(relay, _delta(4), _done(5))
        own_redis.start()
        seen_one = await _replayed(relay, after=1)
        seen_three = await _replayed(relay, after=3)
    finally:
        await relay.close()
    # A reader that had 1 is told 2 and 3 are missing, with 3's id (its next Last-Event-ID);
    # one that had 3 misses nothing and is told nothing.
    assert _shown(seen_one) == [(3, "lost"), (4, "DeltaFrame"), (5, "DoneFrame")]
    lost = seen_one[0].frame
    assert isinstance(lost, StatusFrame) and "Redis" in lost.text
    assert _shown(seen_three) == [(4, "DeltaFrame"), (5, "DoneFrame")]


async def test_past_the_bound_the_oldest_held_frames_go_and_a_reader_is_told(
    own_redis: OwnRedis, caplog: pytest.LogCaptureFixture
) -> None:
    relay = RedisFrameRelay(own_redis.url, linger=60, max_held=3)
    try:
        await _publish(relay, _opening(1))
        own_redis.stop_keeping_data()
        with caplog.at_level(logging.WARNING):
            await _publish(relay, *(_delta(n) for n in range(2, 7)), _done(7))
            await _held(relay, 3)  # 5, 6 and 7
        own_redis.start()
        replayed = await _replayed(relay, after=1)
    finally:
        await relay.close()
    assert _shown(replayed) == [(4, "lost"), (5, "DeltaFrame"), (6, "DeltaFrame"), (7, "DoneFrame")]
    dropped = [r for r in caplog.records if "dropped" in r.getMessage()]
    assert len(dropped) == 1, [r.getMessage() for r in caplog.records]


async def test_a_relay_closed_while_redis_is_away_does_not_wait_for_it(own_redis: OwnRedis) -> None:
    relay = RedisFrameRelay(own_redis.url, linger=60)
    await _publish(relay, _opening(1))
    own_redis.stop_keeping_data()
    await _publish(relay, _delta(2))
    await asyncio.wait_for(relay.close(), WAIT)  # one more try, then the held frame goes
    assert relay.held == 0


def test_a_frame_written_twice_is_read_once_and_a_gap_is_said_once() -> None:
    order = Continuity(after=2)
    stream = [_opening(1), _delta(2), _delta(3), _delta(2), _delta(3), _delta(6), _done(7)]
    shown = [frame for entry in stream for frame in order.take(entry)]
    assert _shown(shown) == [(3, "DeltaFrame"), (5, "lost"), (6, "DeltaFrame"), (7, "DoneFrame")]


def test_a_stream_that_lost_its_head_is_said_unless_the_reader_had_it() -> None:
    def read(after: int) -> list[tuple[int, str]]:
        order = Continuity(after=after)
        return _shown([frame for entry in (_delta(5), _done(6)) for frame in order.take(entry)])

    assert read(0) == [(4, "lost"), (5, "DeltaFrame"), (6, "DoneFrame")]
    assert read(4) == [(5, "DeltaFrame"), (6, "DoneFrame")]


async def test_a_turn_made_while_redis_is_away_reaches_a_client_re_attaching_elsewhere(
    api_factory: Any, tmp_path: Path, own_redis: OwnRedis
) -> None:
    """The whole answer and the turn's end come while Redis is away: the client on the
    instance running the turn reads them from its buffer; one re-attaching through the other
    instance once Redis is back reads the same frames through Redis, where before they were
    never relayed (it waited for a turn whose end never came)."""
    gate = asyncio.Event()  # the model holds its answer until Redis is away
    runtime = ScriptedRuntime([[Delta(f"w{i} ") for i in range(10)]], gate=gate)
    settings = make_settings(tmp_path, redis_url=own_redis.url)
    first = await api_factory(settings, runtimes=lambda agent: runtime)
    other = (await api_factory(settings, runtimes=lambda agent: runtime)).as_operator(first.token)
    started = await first.post("/api/operator/chat/stream", json={"message": "stream it"})
    session = started.headers["X-Steelframe-Session"]
    seen = await frames_until(started, lambda f: True)  # the turn's first frame
    await asyncio.wait_for(runtime.called.wait(), WAIT)  # what came before is relayed
    started.close()

    own_redis.stop_keeping_data()
    gate.set()
    resume = f"/api/operator/chat/stream?session={session}"
    after = {"Last-Event-ID": str(seen[-1]["id"])}
    here = await first.get(resume, headers=after)
    async with asyncio.timeout(WAIT):
        local = seen + await read_sse(here)
    assert local[-1]["type"] == "done"

    own_redis.start()
    again = await other.get(resume, headers=after)
    assert again.status == 200
    async with asyncio.timeout(WAIT):
        relayed = seen + await read_sse(again)
    assert relayed == local
    ids = [f["id"] for f in relayed]
    assert ids == list(range(ids[0], ids[0] + len(relayed)))  # nothing lost, nothing twice
    assert [f for f in relayed if f.get("reason") == StatusReason.FRAMES_LOST] == []
    deltas = "".join(f.get("text", "") for f in relayed if f["type"] == "delta")
    assert deltas.split() == [f"w{i}" for i in range(10)]
