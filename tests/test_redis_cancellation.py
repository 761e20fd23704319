"""A task cancelled while it waits on Redis stops there: the service's asyncio clients
(`bot.redis_clients.CancellableRedis`) raise a cancellation redis-py let go of.

redis-py's asyncio client (8.2.0) sometimes returned a command's reply to a task cancelled
while the command ran, and the task went on: an operator's events stream cancelled at
shutdown went back to its XREAD and held the shutdown for aiohttp's minute. Cancels land at
random points of a loop of the events log's commands (GET, XRANGE, XREAD), many times; with
plain redis-py 82 of 300 were lost."""

from __future__ import annotations

import asyncio
import random

import redis.asyncio as aioredis

from bot.redis_clients import CancellableRedis
from tests.fakes.patience import PATIENCE_SECONDS

CANCELS = 300


async def _lost_cancels(client: aioredis.Redis) -> int:
    """How many of CANCELS cancelled readers ran on past their cancellation."""
    went_on = 0
    shuffle = random.Random(31)
    for _ in range(CANCELS):
        cancelled = asyncio.Event()

        async def reader(cancelled: asyncio.Event) -> None:
            while True:
                await client.get("steelframe-test:cancel:seq")
                await client.xrange("steelframe-test:cancel", "-", "+", count=1)
                await client.xread({"steelframe-test:cancel": "0-1"}, count=10, block=50)
                if cancelled.is_set():  # a whole round after the cancel: it was lost
                    raise RuntimeError("ran on after its cancellation")

        task = asyncio.ensure_future(reader(cancelled))
        for _ in range(shuffle.randrange(60)):  # a random point of its commands: loop turns
            await asyncio.sleep(0)
        task.cancel()
        cancelled.set()
        try:
            await asyncio.wait_for(task, PATIENCE_SECONDS)
        except asyncio.CancelledError:
            continue
        except RuntimeError:
            went_on += 1
    return went_on


async def test_a_reader_cancelled_mid_command_never_runs_on(redis_url: str) -> None:
    client = CancellableRedis.from_url(redis_url)
    try:
        assert await _lost_cancels(client) == 0
    finally:
        await client.aclose()
