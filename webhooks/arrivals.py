"""Deliveries being received now: from a request's headers to its answer.

Processing gives way to intake while any is (`webhooks.processor`). The writer's queue was
the signal before, but it goes quiet between two batches while dozens of requests are
still being read and verified, so under load processing took more than its share.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager


class Arrivals:
    def __init__(self) -> None:
        self._count = 0
        self._quiet = asyncio.Event()
        self._quiet.set()

    @contextmanager
    def arriving(self) -> Iterator[None]:
        """Count a delivery as being received for the duration of the block."""
        self._count += 1
        self._quiet.clear()
        try:
            yield
        finally:
            self._count -= 1
            if not self._count:
                self._quiet.set()

    def is_quiet(self) -> bool:
        return not self._count

    async def quiet(self) -> None:
        """Return when no delivery is being received."""
        await self._quiet.wait()
