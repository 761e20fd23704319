"""Requests not yet answered: work that can wait yields to them.

asyncio runs ready work in the order it became ready. When 1,000 operators open chat
streams within a second, the first frames of the last ones queued behind the retrieval and
model requests of the turns already started: seconds of silence on a stream whose request
had arrived. The HTTP layer counts each request from its handler's start until its answer's
first byte (`arrived`, `answered`); a started turn awaits `quiet()` before its heavy work, so
a burst of requests is answered first. `quiet()` waits at most `max_wait`: a steady stream
of requests must not starve the turns already running.
"""

from __future__ import annotations

import asyncio
import contextlib

MAX_WAIT = 1.0  # seconds a started turn yields to unanswered requests at most


class Unanswered:
    def __init__(self, max_wait: float = MAX_WAIT) -> None:
        self.max_wait = max_wait
        self.count = 0
        self.waiting = 0  # turns in `quiet()` now
        self._quiet: asyncio.Event | None = None  # made on first use, on the running loop

    def arrived(self) -> None:
        self.count += 1
        if self._quiet is not None:
            self._quiet.clear()

    def answered(self) -> None:
        self.count = max(0, self.count - 1)
        if self.count == 0 and self._quiet is not None:
            self._quiet.set()

    async def quiet(self) -> None:
        """Until every request has had its first byte, or `max_wait` has passed."""
        if self.count == 0:
            return
        if self._quiet is None:
            self._quiet = asyncio.Event()
        self.waiting += 1
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.max_wait):
                    await self._quiet.wait()
        finally:
            self.waiting -= 1
