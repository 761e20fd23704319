"""Background asyncio work owned by the web service (summaries, deferred processing).

Tasks are tracked so shutdown waits for them and their failures are logged, never lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)


class BackgroundTasks:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task %s failed", task.get_name(), exc_info=task.exception())

    async def drain(self, within: float = 10.0) -> None:
        """Wait (at most `within` seconds) for running tasks, e.g. to observe their results."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=within)

    async def close(self) -> None:
        await self.drain()
        for task in list(self._tasks):
            task.cancel()
