"""A turn whose owner is gone (its instance killed mid-turn: nothing could say so) ends for
a reader re-attaching through another instance once the turn's slot lapses, with an `error`
frame (`cancelled`) that the first reader to notice appends to the turn's relayed frames,
once, so every reader reads the same end. A turn that released its slot to end (its
terminal frame is on its way) keeps its own end. Real Redis; the slot's owner is a
`RedisTurnLocks` that stops renewing it (as a killed instance does)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from bot.chat.coordination import RedisTurnLocks
from bot.chat.frame_reader import _OwnerWatch
from bot.chat.frame_relay import RedisFrameRelay
from bot.chat.frames import OWNER_GONE_TEXT, PREFIX, NumberedFrame
from bot.contracts.chat import ErrorFrame, ErrorReason, StatusFrame
from tests.fakes.patience import PATIENCE_SECONDS

OPERATOR = 7
STARTED = NumberedFrame.of(101, StatusFrame(text="turn started", turn_id="turn-1"))
# The slot of a turn whose owner is gone lapses this long after its last renewal (and the
# readers wait as long again for a terminal frame on its way).
SHORT_TTL = 0.5


@pytest.fixture
async def admin(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


async def _frames(relay: RedisFrameRelay, turn_id: str) -> list[NumberedFrame]:
    """What a client re-attaching after the turn's first frame reads, to the stream's end."""
    async with asyncio.timeout(PATIENCE_SECONDS):  # not the frames' expiry (ten minutes)
        return [
            frame
            async for frame in relay.replay(turn_id, after=STARTED.id, heartbeat=0.1)
            if frame is not None
        ]


async def _stored(admin: aioredis.Redis, turn_id: str) -> list[NumberedFrame]:
    entries = await admin.xrange(f"{PREFIX}frames:{turn_id}")
    return [NumberedFrame.stored(fields[b"f"]) for _, fields in entries]


def _says_its_owner_is_gone(frame: NumberedFrame) -> None:
    assert frame.id == STARTED.id + 1, frame  # numbered after the turn's last frame
    assert frame.frame == ErrorFrame(error=OWNER_GONE_TEXT, reason=ErrorReason.CANCELLED)
    assert "service stopped" in OWNER_GONE_TEXT  # the words of a turn cut at shutdown


async def test_a_turn_whose_slot_lapsed_ends_once_for_every_reader(
    redis_url: str, admin: aioredis.Redis
) -> None:
    locks = RedisTurnLocks(redis_url, ttl_seconds=SHORT_TTL)
    relay = RedisFrameRelay(redis_url, linger=600, slot_ttl=SHORT_TTL)
    try:
        assert await locks.acquire(OPERATOR, "turn-1") is None
        await relay.publish(OPERATOR, "turn-1", "session-1", STARTED)
        # Its owner renews the slot no more (killed): three readers wait on the turn.
        ends = await asyncio.gather(*(_frames(relay, "turn-1") for _ in range(3)))
    finally:
        await relay.close()
        await locks.close()
    for frames in ends:
        assert len(frames) == 1, frames
        _says_its_owner_is_gone(frames[0])
    assert len({frames[0].data for frames in ends}) == 1  # the same frame, byte for byte
    stored = await _stored(admin, "turn-1")
    assert [frame.id for frame in stored] == [101, 102]  # appended once
    assert 0 < await admin.pttl(f"{PREFIX}frames:turn-1") <= 600_000


async def test_a_turn_whose_slot_another_turn_holds_ends(
    redis_url: str, admin: aioredis.Redis
) -> None:
    """The owner died, its slot lapsed and the operator's next turn took it (through another
    instance): the dead turn ends as well."""
    locks = RedisTurnLocks(redis_url, ttl_seconds=30)
    relay = RedisFrameRelay(redis_url, linger=600, slot_ttl=SHORT_TTL)
    try:
        assert await locks.acquire(OPERATOR, "turn-1") is None
        await relay.publish(OPERATOR, "turn-1", "session-1", STARTED)
        await admin.delete(f"steelframe:chat:turn:{OPERATOR}")  # lapsed
        assert await locks.acquire(OPERATOR, "turn-2") is None
        frames = await _frames(relay, "turn-1")
    finally:
        await relay.close()
        await locks.close()
    assert len(frames) == 1, frames
    _says_its_owner_is_gone(frames[0])


async def test_a_turn_that_released_its_slot_to_end_keeps_its_own_end(
    redis_url: str, admin: aioredis.Redis
) -> None:
    """The race of a turn's end: its slot is released just before its terminal frame is
    relayed (bot/chat/inflight.py `before_terminal`). A reader that finds the slot gone
    meanwhile waits for that frame (the grace: 10 s with the default TTL) and reads it."""
    locks = RedisTurnLocks(redis_url)
    relay = RedisFrameRelay(redis_url, linger=600)  # the default slot TTL: a 10 s grace
    # Its own end (the operator's Stop, say), not the one of a gone owner.
    done = NumberedFrame.of(102, ErrorFrame(error="turn stopped", reason=ErrorReason.STOPPED))
    seen: asyncio.Queue[NumberedFrame | None] = asyncio.Queue()

    async def read() -> None:
        async for frame in relay.replay("turn-1", after=STARTED.id, heartbeat=0.05):
            await seen.put(frame)

    reader: asyncio.Task[None] | None = None
    try:
        assert await locks.acquire(OPERATOR, "turn-1") is None
        await relay.publish(OPERATOR, "turn-1", "session-1", STARTED)
        # The reader attaches to the turn once its stream is there, as a client re-attaching
        # does (a replay of a turn with no stream ends at once: its stream expired).
        reader = asyncio.create_task(read())
        await locks.release(OPERATOR, "turn-1")
        async with asyncio.timeout(PATIENCE_SECONDS):
            # Two heartbeats after the release: the reader looked at the slot since (the
            # look before the first may have been answered before the release).
            for _ in range(2):
                while not seen.empty():
                    seen.get_nowait()
                assert await seen.get() is None
            await relay.publish(OPERATOR, "turn-1", "session-1", done)
            await reader
    finally:
        if reader is not None:
            reader.cancel()
        await relay.close()
        await locks.close()
    rest = [seen.get_nowait() for _ in range(seen.qsize())]
    assert [frame for frame in rest if frame is not None] == [done]
    assert [frame.id for frame in await _stored(admin, "turn-1")] == [101, 102]


async def test_the_end_of_a_gone_owner_is_not_appended_after_the_real_end(
    redis_url: str, admin: aioredis.Redis
) -> None:
    """Past the grace, the real terminal frame arrives between the reader's read and its
    append: the append (a script that checks the stream's last entry) is left undone."""
    relay = RedisFrameRelay(redis_url, linger=600)
    try:
        await relay.publish(OPERATOR, "turn-1", "session-1", STARTED)
        [(seen_last, _)] = await admin.xrange(f"{PREFIX}frames:turn-1")
        done = NumberedFrame.of(102, ErrorFrame(error="turn stopped", reason=ErrorReason.STOPPED))
        await relay.publish(OPERATOR, "turn-1", "session-1", done)  # no slot: released
        watch = _OwnerWatch("turn-1", f"{PREFIX}frames:turn-1", last_id=STARTED.id)
        watch.gone_since = asyncio.get_running_loop().time() - 3600  # long past the grace
        assert not await relay._reader._owner_gone(watch, seen_last)
    finally:
        await relay.close()
    assert [frame.frame for frame in await _stored(admin, "turn-1")] == [
        STARTED.frame,
        done.frame,
    ]
