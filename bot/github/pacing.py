"""Outbound pacing per installation, as GitHub's REST best practices ask.

"Best practices for using the REST API": make requests for one installation serially, not
concurrently; wait at least a second between POST, PATCH, PUT and DELETE requests; and the
secondary limits allow at most 80 content-creating requests a minute and 500 an hour.
A rate-limit answer blocks every request of that installation until GitHub's wait is over.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

Sleep = Callable[[float], Awaitable[None]]
CONTENT_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
MINUTE = 60.0
HOUR = 3600.0


@dataclass(frozen=True)
class PacingPolicy:
    min_interval: float = 1.0
    per_minute: int = 80
    per_hour: int = 500


@dataclass
class _Lane:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    sent: deque[float] = field(default_factory=deque)
    blocked_until: float = 0.0


class Pacer:
    """Serialises and spaces content-creating requests per key (an installation id)."""

    def __init__(self, policy: PacingPolicy, *, clock: Callable[[], float], sleep: Sleep) -> None:
        self.policy = policy
        self._clock = clock
        self._sleep = sleep
        self._lanes: dict[int, _Lane] = {}

    def _lane(self, key: int) -> _Lane:
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane()
        return lane

    def block_until(self, key: int, when: float) -> None:
        """GitHub said to wait: hold every request of this installation until `when`."""
        lane = self._lane(key)
        lane.blocked_until = max(lane.blocked_until, when)

    async def wait_unblocked(self, key: int) -> None:
        lane = self._lane(key)
        while (delay := lane.blocked_until - self._clock()) > 0:
            await self._sleep(delay)

    @asynccontextmanager
    async def slot(self, key: int, method: str) -> AsyncIterator[None]:
        """Hold the installation's write slot for one content-creating request (reads only
        wait out a rate-limit block)."""
        if method.upper() not in CONTENT_METHODS:
            await self.wait_unblocked(key)
            yield
            return
        lane = self._lane(key)
        async with lane.lock:
            while (delay := self._next_allowed(lane) - self._clock()) > 0:
                await self._sleep(delay)
            lane.sent.append(self._clock())
            yield

    def _next_allowed(self, lane: _Lane) -> float:
        now = self._clock()
        while lane.sent and lane.sent[0] <= now - HOUR:
            lane.sent.popleft()
        earliest = lane.blocked_until
        if lane.sent:
            earliest = max(earliest, lane.sent[-1] + self.policy.min_interval)
        recent = [t for t in lane.sent if t > now - MINUTE]
        if len(recent) >= self.policy.per_minute:
            earliest = max(earliest, recent[-self.policy.per_minute] + MINUTE)
        if len(lane.sent) >= self.policy.per_hour:
            earliest = max(earliest, lane.sent[-self.policy.per_hour] + HOUR)
        return earliest
