"""A sans-I/O reader for server-sent events: bytes in, frames out.

Follows the SSE parsing rules the operator API relies on (WHATWG HTML, "Server-sent
events"): `field: value` lines, a blank line ends an event, lines starting with `:` are
comments (our heartbeats), CR, LF and CRLF all end a line, and chunks may split anywhere.

What an event's `data` becomes is the reader's decoder's: the TUI's streams decode it once,
straight into their Structs (tui_client/api.py); without one, a JSON object (`Frame`, what
the tests and the API contract check read).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

Frame = dict[str, Any]
T = TypeVar("T")
# An event's data and its `id:` line (None without a numeric one) to what the stream reads:
# a frame, or None to skip the event (one of a kind the reader does not know).
Decode = Callable[[str, int | None], T | None]


class SseError(ValueError):
    """An event whose `data` is not a JSON object (the operator API only sends objects), or
    for a typed decoder not even a frame of some type."""


def json_object(data: str, event_id: int | None) -> Frame:
    """An event's data as a JSON object, with the event's id as `id` unless it has one."""
    try:
        frame = json.loads(data)
    except ValueError as exc:
        raise SseError(f"event data is not JSON: {data[:80]!r}") from exc
    if not isinstance(frame, dict):
        raise SseError("event data is not a JSON object")
    if event_id is not None:
        frame.setdefault("id", event_id)
    return frame


class SseReader(Generic[T]):
    """Feed it raw chunks; it returns the complete frames each chunk finished.

    `last_event_id` is the id of the last complete event (its `id:` line), for
    `Last-Event-ID` on re-attach; an event its decoder skips counts too, and so does one
    with an `id:` line and no data (as the SSE standard has it: the service starts an
    events stream so, to say where it begins). `id_seen`: some event had an id.
    """

    @overload
    def __init__(self: SseReader[Frame]) -> None: ...

    @overload
    def __init__(self, decode: Decode[T]) -> None: ...

    def __init__(self, decode: Decode[Any] = json_object) -> None:
        self._decode = decode
        # Incremental: a chunk may end inside a multi-byte UTF-8 character.
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._buffer = ""
        self._pending_cr = False
        self._data: list[str] = []
        self._event_id: str | None = None
        self.last_event_id = 0
        self.id_seen = False

    def reset(self) -> None:
        """Drop a half-read event (its stream broke); keep `last_event_id` to resume from."""
        self._decoder.reset()
        self._buffer = ""
        self._pending_cr = False
        self._data = []
        self._event_id = None

    def feed(self, chunk: bytes | str) -> list[T]:
        text = self._decoder.decode(chunk) if isinstance(chunk, bytes) else chunk
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]  # the LF of a CRLF split across chunks
        self._pending_cr = text.endswith("\r")
        self._buffer += text.replace("\r\n", "\n").replace("\r", "\n")
        frames: list[T] = []
        *lines, self._buffer = self._buffer.split("\n")
        for line in lines:
            frame = self._line(line)
            if frame is not None:
                frames.append(frame)
        return frames

    def _line(self, line: str) -> T | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._event_id = value
        return None

    def _dispatch(self) -> T | None:
        event_id = int(self._event_id) if self._event_id and self._event_id.isdigit() else None
        self._event_id = None
        if event_id is not None:
            self.last_event_id = event_id
            self.id_seen = True
        if not self._data:
            return None  # nothing to decode; its id (if any) is the position all the same
        raw = "\n".join(self._data)
        self._data = []
        return self._decode(raw, event_id)
