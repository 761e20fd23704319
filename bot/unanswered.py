"""Requests not yet answered: work that can wait yields to them.

asyncio runs ready work in the order it became ready. When 1,000 operators open chat
streams within a second, the first frames of the last ones queued behind the retrieval and
model requests of the turns already started: seconds of silence on a stream whose request
had arrived. The HTTP layer counts each request from its handler's start until its answer's
first byte (`arrived`, `answered`); a started turn awaits `quiet()` before its heavy work.

Turns that wait are let go one at a time, oldest first, by a pacer that ticks every `TICK`
while any wait: on a tick with no request unanswered and the loop on time (the tick ran
less than `LAG` late), one goes. A loop running late is one whose new connections wait in
the kernel's accept queue, unseen by the count; let go all at once, the held turns started
together and the requests behind them waited for all of them. A turn that has waited
`max_wait` goes on the next tick whatever the load: a steady stream of requests must not
starve the turns already running.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

MAX_WAIT = 1.0  # seconds a started turn yields to unanswered requests at most
TICK = 0.001  # seconds between two releases at most
LAG = 0.002  # a tick this late means the loop is behind: nobody goes (unless overdue)


class Unanswered:
    def __init__(self, max_wait: float = MAX_WAIT, *, tick: float = TICK, lag: float = LAG) -> None:
        self.max_wait = max_wait
        self.tick = tick
        self.lag = lag
        self.count = 0
        # Turns in `quiet()`, oldest first: (when it began waiting, its future).
        self._queue: deque[tuple[float, asyncio.Future[None]]] = deque()
        self._ticking = False

    @property
    def waiting(self) -> int:
        """Turns in `quiet()` now."""
        return sum(1 for _, waiter in self._queue if not waiter.done())

    def arrived(self) -> None:
        self.count += 1

    def answered(self) -> None:
        self.count = max(0, self.count - 1)

    async def quiet(self) -> None:
        """Until the pacer lets this turn go: no request unanswered, the loop on time, the
        turns that waited before it gone; or `max_wait` has passed."""
        if self.count == 0 and not self._queue:
            return
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self._queue.append((time.monotonic(), waiter))
        if not self._ticking:
            self._ticking = True
            loop.call_soon(self._tick, time.monotonic())
        await waiter

    def _tick(self, due: float) -> None:
        """Let the oldest waiting turn go if the time is right; tick again while any wait.
        `due` is when this tick should have run (time.monotonic(): uvloop's own clock has
        millisecond steps, too coarse for a 2 ms lag)."""
        while self._queue and self._queue[0][1].done():
            self._queue.popleft()  # its turn was cancelled
        if not self._queue:
            self._ticking = False
            return
        now = time.monotonic()
        since, waiter = self._queue[0]
        if (self.count == 0 and now - due < self.lag) or now - since >= self.max_wait:
            self._queue.popleft()
            waiter.set_result(None)
        asyncio.get_running_loop().call_later(self.tick, self._tick, now + self.tick)
