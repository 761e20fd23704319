"""A test client of the operator events stream: reads frames in the background, so a test
can act and then wait (with a generous deadline) for the event it expects."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from tests.fakes.patience import PATIENCE_SECONDS
from tui_client.sse import Frame, SseReader

EVENTS = "/api/operator/events"


class EventsFeed:
    def __init__(self, response: Any) -> None:
        self.response = response
        self.frames: list[Frame] = []
        self.pings = 0
        self._changed = asyncio.Event()
        self._reader = SseReader()
        self._task = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, api: Any, *, last_event_id: int | None = None) -> EventsFeed:
        headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
        response = await api.get(EVENTS, headers=headers)
        assert response.status == 200, await response.text()
        assert response.headers["Content-Type"].startswith("text/event-stream")
        return cls(response)

    async def _read(self) -> None:
        async for chunk in self.response.content.iter_any():
            self.pings += chunk.count(b": ping\n\n")
            self.frames.extend(self._reader.feed(chunk))
            self._changed.set()

    async def wait_for(
        self, predicate: Callable[[Frame], bool], *, within: float = PATIENCE_SECONDS
    ) -> Frame:
        """The first frame (already read or still to come) matching `predicate`."""
        async with asyncio.timeout(within):
            while True:
                for frame in self.frames:
                    if predicate(frame):
                        return frame
                self._changed.clear()
                await self._changed.wait()

    async def wait_pings(self, count: int, *, within: float = PATIENCE_SECONDS) -> None:
        async with asyncio.timeout(within):
            while self.pings < count:
                self._changed.clear()
                await self._changed.wait()

    @property
    def ended(self) -> bool:
        return self._task.done()

    async def wait_ended(self, *, within: float = PATIENCE_SECONDS) -> None:
        """Until the service ends the stream (its reader reaches the body's end)."""
        async with asyncio.timeout(within):
            await asyncio.shield(self._task)

    def of_type(self, type_: str) -> list[Frame]:
        return [frame for frame in self.frames if frame.get("type") == type_]

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task
        self.response.close()
