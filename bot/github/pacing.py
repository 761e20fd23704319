"""Outbound pacing per installation, as GitHub's REST best practices ask.

"Best practices for using the REST API": make requests for one installation serially, not
concurrently; wait at least a second between POST, PATCH, PUT and DELETE requests; and the
secondary limits allow at most 80 content-creating requests a minute and 500 an hour.
A rate-limit answer blocks every request of that installation until GitHub's wait is over.

The rules live in `Pacer`; what has been sent and any block are kept in a `Ledger`: in
this process (`LocalLedger`), or in Redis (`bot.github.shared_pacing.RedisLedger`) so
every process of a deployment - each `serve`, each worker's jobs - shares one budget per
installation.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

Sleep = Callable[[float], Awaitable[None]]
CONTENT_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
MINUTE = 60.0
HOUR = 3600.0


@dataclass(frozen=True)
class PacingPolicy:
    min_interval: float = 1.0
    per_minute: int = 80
    per_hour: int = 500


class Ledger(Protocol):
    """Where sends and blocks are recorded, per installation."""

    async def reserve(self, key: int, now: float, policy: PacingPolicy) -> float:
        """Record a content-creating send at `now` if the policy allows it (returns 0.0),
        else record nothing and return how many seconds to wait first."""
        ...

    async def block_until(self, key: int, when: float) -> None: ...

    async def blocked_until(self, key: int) -> float: ...

    async def close(self) -> None: ...


def next_allowed(sent: list[float], blocked: float, now: float, policy: PacingPolicy) -> float:
    """When the next content-creating send may go, given the sends of the last hour (oldest
    first) and any block (sans-I/O: `LocalLedger` uses it; `RedisLedger` runs the same
    rules in Lua)."""
    earliest = blocked
    if sent:
        earliest = max(earliest, sent[-1] + policy.min_interval)
    recent = [t for t in sent if t > now - MINUTE]
    if len(recent) >= policy.per_minute:
        earliest = max(earliest, recent[-policy.per_minute] + MINUTE)
    if len(sent) >= policy.per_hour:
        earliest = max(earliest, sent[-policy.per_hour] + HOUR)
    return earliest


@dataclass
class _Lane:
    sent: deque[float] = field(default_factory=deque)
    blocked_until: float = 0.0


class LocalLedger:
    """This process's sends (without Redis: each process paces its own requests)."""

    def __init__(self) -> None:
        self._lanes: dict[int, _Lane] = {}

    def _lane(self, key: int) -> _Lane:
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane()
        return lane

    async def reserve(self, key: int, now: float, policy: PacingPolicy) -> float:
        lane = self._lane(key)
        while lane.sent and lane.sent[0] <= now - HOUR:
            lane.sent.popleft()
        wait = next_allowed(list(lane.sent), lane.blocked_until, now, policy) - now
        if wait > 0:
            return wait
        lane.sent.append(now)
        return 0.0

    async def block_until(self, key: int, when: float) -> None:
        lane = self._lane(key)
        lane.blocked_until = max(lane.blocked_until, when)

    async def blocked_until(self, key: int) -> float:
        return self._lane(key).blocked_until

    async def close(self) -> None:
        return None


class Pacer:
    """Serialises (within the process) and spaces (across every process sharing the
    ledger) content-creating requests per key (an installation id)."""

    def __init__(
        self,
        policy: PacingPolicy,
        *,
        clock: Callable[[], float],
        sleep: Sleep,
        ledger: Ledger | None = None,
    ) -> None:
        self.policy = policy
        self.ledger: Ledger = ledger or LocalLedger()
        self._clock = clock
        self._sleep = sleep
        self._locks: dict[int, asyncio.Lock] = {}

    async def block_until(self, key: int, when: float) -> None:
        """GitHub said to wait: hold every request of this installation until `when`."""
        await self.ledger.block_until(key, when)

    async def wait_unblocked(self, key: int) -> None:
        while (delay := await self.ledger.blocked_until(key) - self._clock()) > 0:
            await self._sleep(delay)

    @asynccontextmanager
    async def slot(self, key: int, method: str) -> AsyncIterator[None]:
        """Hold the installation's write slot for one content-creating request (reads only
        wait out a rate-limit block)."""
        if method.upper() not in CONTENT_METHODS:
            await self.wait_unblocked(key)
            yield
            return
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            while (delay := await self.ledger.reserve(key, self._clock(), self.policy)) > 0:
                await self._sleep(delay)
            yield

    async def close(self) -> None:
        await self.ledger.close()
