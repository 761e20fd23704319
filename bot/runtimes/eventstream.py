"""Server-sent events as the model providers send them: `event:`/`data:` lines, blank-line ends.

Sans-I/O: `EventStreamParser.feed(line)` returns a finished event or None; `server_events`
adapts any async iterator of byte lines (an aiohttp response body) to it. Follows the
WHATWG event-stream rules the providers rely on: comment lines start with `:`, one optional
space after the colon is dropped, several `data:` lines join with a newline.

`tui_client/sse.py` reads the operator API's frames by the same rules; the layering keeps
them apart on purpose (the core imports no shell, and `tui_client` nothing of ours), so a
few lines of their field handling look alike.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass


@dataclass(frozen=True)
class ServerEvent:
    event: str
    data: str


class EventStreamParser:
    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: str) -> ServerEvent | None:
        line = line.rstrip("\r\n")
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None  # `id:`, `retry:` and unknown fields carry nothing we use

    def close(self) -> ServerEvent | None:
        """An event left open when the body ended (a server that omits the last blank line)."""
        return self._dispatch()

    def _dispatch(self) -> ServerEvent | None:
        if not self._data:  # an event with no data is dropped (WHATWG dispatch rule)
            self._event = ""
            return None
        event = ServerEvent(event=self._event or "message", data="\n".join(self._data))
        self._event, self._data = "", []
        return event


async def server_events(lines: AsyncIterable[bytes]) -> AsyncIterator[ServerEvent]:
    parser = EventStreamParser()
    async for raw in lines:
        event = parser.feed(raw.decode("utf-8", errors="replace"))
        if event is not None:
            yield event
    tail = parser.close()
    if tail is not None:
        yield tail
