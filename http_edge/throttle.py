"""Throttling of failed authentications, per client address and per token prefix.

Bearer tokens, session cookies, sign-in codes and the metrics token were checked as fast as
they came (about 7,200 guesses a second). Now each failure counts against the client's
address and the first characters of what it sent; past `free_failures` in a row, each
further failure blocks that scope for twice as long as the last (1 s, 2 s, 4 s ... up to the
ceiling), and while it is blocked a credential is answered 429 with `Retry-After`, unread.
A failure count is forgotten `WINDOW_SECONDS` after the last failure.

A correct credential is never slowed: a digest verified before (in this process, or by any
instance through Redis, for `GOOD_SECONDS`) skips the block and is checked as always. So an
operator behind the same address as a guesser works on, and the guesser learns nothing while
blocked. The one credential a block can delay is one never used before, sent from a blocked
address or with a blocked prefix, for at most the ceiling.

State lives in Redis when the service has one (every instance sees the same counts), in
this process otherwise; when Redis fails the process's own state is used (never an error
that locks everyone out).
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from bot.errors import TooManyRequests
from bot.operators import credential_bytes

log = logging.getLogger("steelframe.auth")
DEFAULT_FREE_FAILURES = 10
DEFAULT_CEILING_SECONDS = 60.0
BASE_SECONDS = 1.0
WINDOW_SECONDS = 900.0
GOOD_SECONDS = 86_400.0
PREFIX_CHARS = 12  # "sfo_" and 8 random characters: a guesser's variations of one token
_LOCAL_GOOD = 10_000  # digests remembered in the process, newest kept
_MAX_SCOPES = 100_000  # in-memory scopes before the oldest are dropped
_KEY = "steelframe:auth:"
_T = TypeVar("_T")


def scopes_for(address: str | None, credential: str) -> tuple[str, ...]:
    """What one attempt counts against: its client address and its credential's prefix. The
    prefix is a Redis key's text: a header that was not UTF-8 is escaped, not a 500."""
    prefix = credential_bytes(credential[:PREFIX_CHARS]).decode("utf-8", "backslashreplace")
    return (f"addr:{address or 'unknown'}", f"prefix:{prefix}")


class ThrottleStore(Protocol):
    async def state(self, digest: str, scopes: Sequence[str]) -> tuple[bool, float]:
        """Whether `digest` was verified before, and the longest block (seconds) left."""
        ...

    async def fail(self, scopes: Sequence[str], *, free: int, ceiling: float) -> None: ...

    async def good(self, digest: str) -> None: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class _Count:
    failures: int
    last: float


class MemoryStore:
    """Counts and blocks in this process (no Redis)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._counts: OrderedDict[str, _Count] = OrderedDict()
        self._blocked: dict[str, float] = {}  # scope -> monotonic time the block ends
        self._good: dict[str, float] = {}

    async def state(self, digest: str, scopes: Sequence[str]) -> tuple[bool, float]:
        now = self._clock()
        good = self._good.get(digest, -math.inf) > now
        return good, max((self._blocked.get(s, now) - now for s in scopes), default=0.0)

    async def fail(self, scopes: Sequence[str], *, free: int, ceiling: float) -> None:
        now = self._clock()
        for scope in scopes:
            count = self._counts.pop(scope, None)
            failures = (
                1 if count is None or now - count.last > WINDOW_SECONDS else count.failures + 1
            )
            self._counts[scope] = _Count(failures, now)
            block = backoff(failures, free=free, ceiling=ceiling)
            if block:
                self._blocked[scope] = now + block
        while len(self._counts) > _MAX_SCOPES:
            oldest, _ = self._counts.popitem(last=False)
            self._blocked.pop(oldest, None)

    async def close(self) -> None:
        return None

    async def good(self, digest: str) -> None:
        if len(self._good) > _MAX_SCOPES:
            self._good.clear()
        self._good[digest] = self._clock() + GOOD_SECONDS


class RedisStore:
    """Counts and blocks shared by every instance: a counter and a block key per scope, each
    expiring on its own (PEXPIRE), so nothing needs cleaning up."""

    def __init__(self, client: aioredis.Redis) -> None:
        self._redis = client

    async def state(self, digest: str, scopes: Sequence[str]) -> tuple[bool, float]:
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.exists(f"{_KEY}good:{digest}")
            for scope in scopes:
                pipe.pttl(f"{_KEY}block:{scope}")
            good, *left = await pipe.execute()
        return bool(good), max((ms / 1000 for ms in left if ms > 0), default=0.0)

    async def fail(self, scopes: Sequence[str], *, free: int, ceiling: float) -> None:
        window = int(WINDOW_SECONDS * 1000)
        async with self._redis.pipeline(transaction=False) as pipe:
            for scope in scopes:
                pipe.incr(f"{_KEY}count:{scope}")
                pipe.pexpire(f"{_KEY}count:{scope}", window)
            answers = await pipe.execute()
        blocks = [
            (scope, backoff(int(failures), free=free, ceiling=ceiling))
            for scope, failures in zip(scopes, answers[::2], strict=True)
        ]
        blocks = [(scope, block) for scope, block in blocks if block]
        if blocks:
            async with self._redis.pipeline(transaction=False) as pipe:
                for scope, block in blocks:
                    pipe.set(f"{_KEY}block:{scope}", 1, px=max(1, int(block * 1000)))
                await pipe.execute()

    async def good(self, digest: str) -> None:
        await self._redis.set(f"{_KEY}good:{digest}", 1, ex=int(GOOD_SECONDS))

    async def close(self) -> None:
        await self._redis.aclose()


def backoff(failures: int, *, free: int, ceiling: float) -> float:
    """Seconds a scope is blocked after its `failures`-th failure in a row (0: not)."""
    if failures <= free:
        return 0.0
    return min(BASE_SECONDS * 2.0 ** min(failures - free - 1, 30), ceiling)


class AuthThrottle:
    """What an authentication check asks before and tells after verifying a credential."""

    def __init__(
        self,
        store: ThrottleStore | None = None,
        *,
        free_failures: int = DEFAULT_FREE_FAILURES,
        ceiling: float = DEFAULT_CEILING_SECONDS,
    ) -> None:
        self._local = MemoryStore()
        self._store: ThrottleStore = store or self._local
        self._free = free_failures
        self._ceiling = ceiling
        self._known: OrderedDict[str, None] = OrderedDict()  # verified digests, this process
        self._warned = False

    async def before(self, digest: str, scopes: Sequence[str]) -> None:
        """TooManyRequests if a scope is blocked and the credential was never verified."""
        if digest in self._known:
            return
        good, left = await self._ask(lambda store: store.state(digest, scopes))
        if good:
            self._remember(digest)
        elif left > 0:
            raise TooManyRequests(
                "too many failed sign-ins from this address or with this token: wait and retry",
                retry_after=max(1, math.ceil(left)),
            )

    async def failed(self, digest: str, scopes: Sequence[str]) -> None:
        self._known.pop(digest, None)
        await self._ask(lambda store: store.fail(scopes, free=self._free, ceiling=self._ceiling))

    async def succeeded(self, digest: str) -> None:
        if digest not in self._known:
            self._remember(digest)
            await self._ask(lambda store: store.good(digest))

    async def close(self) -> None:
        await self._store.close()

    def _remember(self, digest: str) -> None:
        self._known[digest] = None
        if len(self._known) > _LOCAL_GOOD:
            self._known.popitem(last=False)

    async def _ask(self, call: Callable[[ThrottleStore], Awaitable[_T]]) -> _T:
        try:
            return await call(self._store)
        except RedisError as exc:
            if not self._warned:
                log.warning("auth throttle: Redis failed (%s); counting in this process", exc)
                self._warned = True
            return await call(self._local)
