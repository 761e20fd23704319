"""A sans-I/O reader for server-sent events: bytes in, JSON frames out.

Follows the SSE parsing rules the operator API relies on (WHATWG HTML, "Server-sent
events"): `field: value` lines, a blank line ends an event, lines starting with `:` are
comments (our heartbeats), CR, LF and CRLF all end a line, and chunks may split anywhere.
"""

from __future__ import annotations

import codecs
import json
from typing import Any

Frame = dict[str, Any]


class SseError(ValueError):
    """An event whose `data` is not a JSON object (the operator API only sends objects)."""


class SseReader:
    """Feed it raw chunks; it returns the complete frames each chunk finished.

    `last_event_id` is the id of the last complete event, for `Last-Event-ID` on re-attach.
    """

    def __init__(self) -> None:
        # Incremental: a chunk may end inside a multi-byte UTF-8 character.
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._buffer = ""
        self._pending_cr = False
        self._data: list[str] = []
        self._event_id: str | None = None
        self.last_event_id = 0

    def reset(self) -> None:
        """Drop a half-read event (its stream broke); keep `last_event_id` to resume from."""
        self._decoder.reset()
        self._buffer = ""
        self._pending_cr = False
        self._data = []
        self._event_id = None

    def feed(self, chunk: bytes | str) -> list[Frame]:
        text = self._decoder.decode(chunk) if isinstance(chunk, bytes) else chunk
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]  # the LF of a CRLF split across chunks
        self._pending_cr = text.endswith("\r")
        self._buffer += text.replace("\r\n", "\n").replace("\r", "\n")
        frames: list[Frame] = []
        *lines, self._buffer = self._buffer.split("\n")
        for line in lines:
            frame = self._line(line)
            if frame is not None:
                frames.append(frame)
        return frames

    def _line(self, line: str) -> Frame | None:
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

    def _dispatch(self) -> Frame | None:
        if not self._data:
            self._event_id = None
            return None
        raw = "\n".join(self._data)
        self._data = []
        try:
            frame = json.loads(raw)
        except ValueError as exc:
            raise SseError(f"event data is not JSON: {raw[:80]!r}") from exc
        if not isinstance(frame, dict):
            raise SseError("event data is not a JSON object")
        if self._event_id is not None and self._event_id.isdigit():
            frame.setdefault("id", int(self._event_id))
        self._event_id = None
        if isinstance(frame.get("id"), int):
            self.last_event_id = frame["id"]
        return frame
