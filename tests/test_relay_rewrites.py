"""A relayed turn's stream written again (bot/chat/relay_rewrites.py), as two `forget that`
do at once on two instances: each reads the stream, takes its words out and writes it back.
The second to write must not put back the words the first took out."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis

from bot.chat.relay_rewrites import rewrite_stream

STREAM = "steelframe:chat:frames:turn-1"


def _forgetting(word: bytes) -> Callable[[list[bytes]], list[bytes | None]]:
    def change(stored: list[bytes]) -> list[bytes | None]:
        return [data.replace(word, b"") if word in data else None for data in stored]

    return change


def _other_instance_forgets(redis_url: str, word: bytes) -> None:
    """The other instance's whole rewrite, run to its end (in a thread of its own)."""

    async def forget() -> None:
        client = aioredis.Redis.from_url(redis_url)
        try:
            assert await rewrite_stream(client, STREAM, _forgetting(word))
        finally:
            await client.aclose()

    thread = threading.Thread(target=lambda: asyncio.run(forget()))
    thread.start()
    thread.join()


async def test_a_rewrite_racing_another_keeps_what_both_took_out(redis_url: str) -> None:
    client = aioredis.Redis.from_url(redis_url)
    try:
        first = await client.xadd(STREAM, {"f": b"opened"})
        said = await client.xadd(STREAM, {"f": b"alpha beta gamma"})
        await client.pexpire(STREAM, 60_000)
        without_beta = _forgetting(b"beta")
        calls = 0

        def forget_beta(stored: list[bytes]) -> list[bytes | None]:
            nonlocal calls
            calls += 1
            if calls == 1:  # between this rewrite's read and its write, the other's
                _other_instance_forgets(redis_url, b"alpha")
            return without_beta(stored)

        assert await rewrite_stream(client, STREAM, forget_beta)
        entries: Any = await client.xrange(STREAM)
        assert [entry_id for entry_id, _ in entries] == [first, said]  # ids and places kept
        assert [fields[b"f"] for _, fields in entries] == [b"opened", b"  gamma"]
        assert await client.pttl(STREAM) > 0
    finally:
        await client.aclose()
