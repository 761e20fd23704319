"""The forgets' log (bot/chat/coordination.py): a forget is heard by an instance whose
listener was away when it was signalled, once it subscribes again, and frames an instance
kept for a Redis that was away are written only after the forgets it missed are done on
them (bot/chat/frame_outbox.py); the log keeps the words no longer than the relayed frames
live. Real Redis, a test's own where it goes away."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator

import redis
import redis.asyncio as aioredis

from bot.chat.coordination import FORGET_LOG, ForgetSignal, RedisTurnLocks
from bot.chat.forget_words import Words
from bot.chat.forgotten_frames import frames_without
from bot.chat.frame_relay import RedisFrameRelay
from bot.chat.frames import PREFIX, NumberedFrame
from bot.contracts.chat import DeltaFrame
from tests.fakes.own_redis import OwnRedis
from tests.fakes.own_redis import own_redis_fixture as own_redis_fixture  # `own_redis`
from tests.fakes.patience import PATIENCE_SECONDS, wait_for

SECRET = "the deploy password is hunter2"


async def _no_stop(operator_id: int) -> None:
    return None


def _listeners(url: str, channel: str) -> int:
    """How many connections are subscribed to `channel` (Redis's own count)."""
    with redis.Redis.from_url(url) as client:
        [(_, count)] = client.pubsub_numsub(channel)
        return int(count)


@contextlib.asynccontextmanager
async def _listening(
    locks: RedisTurnLocks, heard: list[ForgetSignal]
) -> AsyncIterator[asyncio.Task[None]]:
    async def on_forget(signal: ForgetSignal) -> None:
        heard.append(signal)

    listener = asyncio.create_task(locks.run_listener(_no_stop, on_forget))
    try:
        yield listener
    finally:
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)


async def test_a_listener_away_at_the_forget_hears_it_when_it_subscribes_again(
    redis_url: str,
) -> None:
    here = RedisTurnLocks(redis_url, forgets_kept=30.0)
    there = RedisTurnLocks(redis_url, forgets_kept=30.0)
    signal = ForgetSignal(repo=f"acme/{uuid.uuid4().hex}", words=SECRET)
    try:
        assert await here.signal_forget(signal)  # nobody listening there: not heard live
        heard: list[ForgetSignal] = []
        async with _listening(there, heard):
            await wait_for(lambda: signal in heard, within=PATIENCE_SECONDS)
        async with aioredis.Redis.from_url(redis_url) as client:
            kept = await client.pttl(FORGET_LOG)
        assert 0 < kept <= 30_000  # the words go with the frames that may hold them
    finally:
        await here.close()
        await there.close()


async def test_frames_kept_for_redis_are_written_after_the_forgets_missed_meanwhile(
    own_redis: OwnRedis,
) -> None:
    here = RedisTurnLocks(own_redis.url)  # the instance the forget runs through
    there = RedisTurnLocks(own_redis.url)
    relay = RedisFrameRelay(own_redis.url, linger=60, catch_up=there.catch_up_forgets)
    turn_id = uuid.uuid4().hex

    async def forget_kept(signal: ForgetSignal) -> None:  # as the app's `frames_forgotten`
        def without(frames: list[NumberedFrame]) -> list[NumberedFrame]:
            return frames_without(frames, [Words(signal.words)])

        for turn in relay.held_turns():
            await relay.rewrite_held(turn.turn_id, without)

    try:
        listener = asyncio.create_task(there.run_listener(_no_stop, forget_kept))
        # It runs (subscribed, so its handler is the one catching up) ...
        await wait_for(lambda: _listeners(own_redis.url, there.forget_channel) == 1)
        listener.cancel()  # and is away (reconnecting) when the forget is signalled
        await asyncio.gather(listener, return_exceptions=True)
        assert await here.signal_forget(ForgetSignal(repo="acme/widgets", words=SECRET))
        own_redis.stop_keeping_data()
        said = NumberedFrame.of(1, DeltaFrame(text=f"Noted: {SECRET}.", draft=1))
        await relay.publish(1, turn_id, "s1", said)
        assert relay.held == 1  # kept for Redis

        own_redis.start()
        await wait_for(lambda: relay.held == 0, within=PATIENCE_SECONDS)

        async with aioredis.Redis.from_url(own_redis.url) as client:
            entries = await client.xrange(f"{PREFIX}frames:{turn_id}")
        relayed = [json.loads(fields[b"f"]) for _, fields in entries]
        assert [frame["text"] for frame in relayed] == ["Noted: [forgotten]."], relayed
    finally:
        await relay.close()
        await here.close()
        await there.close()


async def test_a_catch_up_that_fails_by_a_defect_does_not_keep_the_frames_unwritten(
    own_redis: OwnRedis,
) -> None:
    """Only Redis being away holds the frames back: a catch-up failing otherwise is logged,
    and the frames waiting are written (a relay stalled for good would lose every turn)."""
    tried: list[int] = []

    async def broken() -> None:
        tried.append(1)
        raise ValueError("a defect in the catch-up")

    relay = RedisFrameRelay(own_redis.url, linger=60, catch_up=broken)
    turn_id = uuid.uuid4().hex
    try:
        own_redis.stop_keeping_data()
        await relay.publish(1, turn_id, "s1", NumberedFrame.of(1, DeltaFrame(text="hi", draft=1)))
        assert relay.held == 1  # kept for Redis
        own_redis.start()
        await wait_for(lambda: relay.held == 0, within=PATIENCE_SECONDS)
        assert tried
        async with aioredis.Redis.from_url(own_redis.url) as client:
            assert len(await client.xrange(f"{PREFIX}frames:{turn_id}")) == 1
    finally:
        await relay.close()
