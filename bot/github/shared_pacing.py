"""A pacing ledger in Redis: one budget per installation for every process of a deployment.

GitHub's secondary limits (80 content-creating requests a minute, 500 an hour, a second
between them) and a rate-limit block apply to the installation, not to a process; with
several `serve` instances and workers each pacing alone, together they would exceed them.
Each check-and-record is one Lua script, so two processes never both take the last slot.
Times are the callers' epoch clocks (NTP-synchronised hosts agree to well under the
second that matters here). While Redis cannot be reached, each process paces its own
requests (a `LocalLedger`) rather than failing every GitHub write.
"""

from __future__ import annotations

import logging
import time
import uuid

import redis
import redis.asyncio as aioredis

from bot.github.pacing import HOUR, MINUTE, LocalLedger, PacingPolicy
from bot.redis_clients import CancellableRedis

log = logging.getLogger(__name__)
# How often the "Redis is unreachable, pacing locally" warning may repeat.
WARN_EVERY_SECONDS = 60.0

DEFAULT_PREFIX = "steelframe:github-pacing"

# KEYS: sent (sorted set of send times), blocked (epoch seconds as a string).
# ARGV: now, min_interval, per_minute, per_hour, a unique member for this send.
# Returns "0" after recording the send, else the seconds to wait (as a string: Lua numbers
# come back to Redis clients truncated to integers).
RESERVE = f"""
local now = tonumber(ARGV[1])
local min_interval = tonumber(ARGV[2])
local per_minute = tonumber(ARGV[3])
local per_hour = tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - {HOUR})
local earliest = tonumber(redis.call('GET', KEYS[2]) or '0')
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] then earliest = math.max(earliest, tonumber(last[2]) + min_interval) end
local recent = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. (now - {MINUTE}), '+inf', 'WITHSCORES')
local in_minute = #recent / 2
if in_minute >= per_minute then
  local oldest = tonumber(recent[(in_minute - per_minute) * 2 + 2])
  earliest = math.max(earliest, oldest + {MINUTE})
end
local in_hour = redis.call('ZCARD', KEYS[1])
if in_hour >= per_hour then
  local at = redis.call('ZRANGE', KEYS[1], in_hour - per_hour, in_hour - per_hour, 'WITHSCORES')
  earliest = math.max(earliest, tonumber(at[2]) + {HOUR})
end
if earliest > now then return tostring(earliest - now) end
redis.call('ZADD', KEYS[1], now, ARGV[5])
redis.call('EXPIRE', KEYS[1], {int(HOUR) + 60})
return '0'
"""

# KEYS: blocked. ARGV: when (epoch seconds). Only ever extends a block. The value is an
# absolute time, harmless once past; the key goes after an hour (a single wait is at most
# 15 minutes: `RetryPolicy.max_wait`).
BLOCK = f"""
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > current then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', {int(HOUR)})
end
return 1
"""


class RedisLedger:
    def __init__(self, client: aioredis.Redis, *, prefix: str = DEFAULT_PREFIX) -> None:
        self._redis = client
        self._prefix = prefix
        self._reserve = client.register_script(RESERVE)
        self._block = client.register_script(BLOCK)
        self._local = LocalLedger()  # while Redis is unreachable
        self._warned_at = 0.0

    @classmethod
    def from_url(cls, url: str, *, prefix: str = DEFAULT_PREFIX) -> RedisLedger:
        return cls(CancellableRedis.from_url(url), prefix=prefix)

    def _keys(self, key: int) -> tuple[str, str]:
        return f"{self._prefix}:{key}:sent", f"{self._prefix}:{key}:blocked"

    def _unreachable(self, exc: redis.RedisError) -> None:
        if time.monotonic() - self._warned_at > WARN_EVERY_SECONDS:
            self._warned_at = time.monotonic()
            log.warning("github pacing: Redis unreachable (%s); pacing this process alone", exc)

    async def reserve(self, key: int, now: float, policy: PacingPolicy) -> float:
        member = f"{now:.6f}:{uuid.uuid4().hex[:8]}"
        args: list[str | float] = [
            repr(now),
            policy.min_interval,
            policy.per_minute,
            policy.per_hour,
            member,
        ]
        try:
            wait = await self._reserve(keys=list(self._keys(key)), args=args)
        except redis.RedisError as exc:
            self._unreachable(exc)
            return await self._local.reserve(key, now, policy)
        return float(wait)

    async def block_until(self, key: int, when: float) -> None:
        await self._local.block_until(key, when)
        _, blocked = self._keys(key)
        try:
            await self._block(keys=[blocked], args=[repr(when)])
        except redis.RedisError as exc:
            self._unreachable(exc)

    async def blocked_until(self, key: int) -> float:
        local = await self._local.blocked_until(key)
        _, blocked = self._keys(key)
        try:
            value = await self._redis.get(blocked)
        except redis.RedisError as exc:
            self._unreachable(exc)
            return local
        return max(local, float(value) if value is not None else 0.0)

    async def close(self) -> None:
        await self._redis.aclose()
