"""Turn coordination across service instances: one turn per operator, stop from anywhere.

Without Redis a single process is the whole system and `LocalTurnLocks` is enough. With
Redis, the operator's turn slot is a key (`SET NX` with an expiry so a crashed instance frees
it) and a stop is published on a channel every instance listens to, so `POST .../stop` works
whichever instance the load balancer picked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

import redis.asyncio as aioredis

log = logging.getLogger(__name__)
KEY_PREFIX = "steelframe:chat:turn:"
# The slot expires this long after its owner last renewed it (every third of it), so an
# instance that crashed mid-turn frees the operator within seconds, and a long turn that is
# alive never loses it.
SLOT_TTL_SECONDS = 30.0
STOP_CHANNEL = "steelframe:chat:stop"
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""
StopHandler = Callable[[int], Awaitable[object]]


class TurnLocks(Protocol):
    async def acquire(self, operator_id: int, turn_id: str) -> str | None:
        """Claim the slot; None on success, else the holder's turn id."""

    async def describe(self, operator_id: int, turn_id: str, session_id: str) -> None: ...

    async def holder(self, operator_id: int) -> dict[str, str] | None: ...

    async def release(self, operator_id: int, turn_id: str) -> None: ...

    async def renew(self, operator_id: int, turn_id: str) -> None: ...

    async def signal_stop(self, operator_id: int) -> None: ...

    async def run_stop_listener(self, on_stop: StopHandler) -> None: ...

    async def close(self) -> None: ...


class LocalTurnLocks:
    """One process: the in-process registry already enforces everything."""

    async def acquire(self, operator_id: int, turn_id: str) -> str | None:
        return None

    async def describe(self, operator_id: int, turn_id: str, session_id: str) -> None:
        return None

    async def holder(self, operator_id: int) -> dict[str, str] | None:
        return None

    async def release(self, operator_id: int, turn_id: str) -> None:
        return None

    async def renew(self, operator_id: int, turn_id: str) -> None:
        return None

    async def signal_stop(self, operator_id: int) -> None:
        return None

    async def run_stop_listener(self, on_stop: StopHandler) -> None:
        return None

    async def close(self) -> None:
        return None


class RedisTurnLocks:
    def __init__(self, url: str, *, ttl_seconds: float = SLOT_TTL_SECONDS) -> None:
        self._redis = aioredis.Redis.from_url(url)
        self._ttl_ms = int(ttl_seconds * 1000)

    async def acquire(self, operator_id: int, turn_id: str) -> str | None:
        value = json.dumps({"turn_id": turn_id, "session": ""})
        for _ in range(2):  # the holder may finish between our SET and GET: try once more
            if await self._redis.set(f"{KEY_PREFIX}{operator_id}", value, nx=True, px=self._ttl_ms):
                return None
            held = await self.holder(operator_id)
            if held is not None:
                return held["turn_id"]
        return ""

    async def describe(self, operator_id: int, turn_id: str, session_id: str) -> None:
        value = json.dumps({"turn_id": turn_id, "session": session_id})
        await self._redis.set(f"{KEY_PREFIX}{operator_id}", value, xx=True, px=self._ttl_ms)

    async def holder(self, operator_id: int) -> dict[str, str] | None:
        raw = await self._redis.get(f"{KEY_PREFIX}{operator_id}")
        return None if raw is None else dict(json.loads(raw))

    async def release(self, operator_id: int, turn_id: str) -> None:
        key = f"{KEY_PREFIX}{operator_id}"
        raw = await self._redis.get(key)
        if raw is not None and json.loads(raw).get("turn_id") == turn_id:
            await self._redis.eval(_RELEASE, 1, key, raw)

    async def renew(self, operator_id: int, turn_id: str) -> None:
        key = f"{KEY_PREFIX}{operator_id}"
        raw = await self._redis.get(key)
        if raw is not None and json.loads(raw).get("turn_id") == turn_id:
            await self._redis.eval(_RENEW, 1, key, raw, str(self._ttl_ms))

    @property
    def renew_every(self) -> float:
        return self._ttl_ms / 3000

    async def signal_stop(self, operator_id: int) -> None:
        await self._redis.publish(STOP_CHANNEL, str(operator_id))

    async def run_stop_listener(self, on_stop: StopHandler) -> None:
        """Until cancelled: call `on_stop(operator_id)` for each stop any instance publishes.
        Reconnects after a Redis outage so stops keep working once it is back."""
        while True:
            pubsub = self._redis.pubsub()
            try:
                await pubsub.subscribe(STOP_CHANNEL)
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        with contextlib.suppress(ValueError):
                            await on_stop(int(message["data"]))
            except aioredis.RedisError as exc:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    # redis-py can turn the cancel that arrives mid-read into a connection
                    # error; retrying would swallow the cancel and never stop.
                    raise asyncio.CancelledError from exc
                log.warning("stop listener lost Redis (%s); retrying", type(exc).__name__)
                await asyncio.sleep(1.0)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()

    async def close(self) -> None:
        await self._redis.aclose()
