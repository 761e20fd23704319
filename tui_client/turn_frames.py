"""A chat turn's frames as the TUI reads them: each SSE event's data decoded once, by one
decoder, into the `Frame` union of tui_client/sessions_wire.py (generated from the service's
own tagged union on `type`, bot/contracts/chat.py).

A frame of a type this TUI does not know is skipped: a newer service may stream more than
this TUI shows (a new phase of a turn), and the turn still ends with `done` or `error`. A
frame of a type it knows, in a shape it cannot read, is `Unreadable`: the panel shows the
error in the reply, and the stream goes on to the turn's end (a non-terminal frame) or ends
with it (a `done` or `error` frame).
"""

from __future__ import annotations

import logging
import typing
from dataclasses import dataclass
from typing import Any

import msgspec

from tui_client import wire
from tui_client.sessions_wire import Frame
from tui_client.sse import SseError

log = logging.getLogger(__name__)
_DECODER = msgspec.json.Decoder(Frame)


class _Tagged(msgspec.Struct):
    """Only a frame's `type` (read when the frame did not decode, to say which it was)."""

    type: Any = None


_TAG_DECODER = msgspec.json.Decoder(_Tagged)
KNOWN: frozenset[str] = frozenset(
    str(kind.__struct_config__.tag) for kind in typing.get_args(Frame)
)


@dataclass(frozen=True)
class Unreadable:
    """A frame of a type this TUI knows, in a shape it cannot read (a key it needs is
    missing or of another type: a service much older or newer than the TUI)."""

    type: str
    error: str

    @property
    def text(self) -> str:
        return f"The service sent a `{self.type}` frame this TUI cannot read: {self.error}"


@dataclass(frozen=True)
class NumberedFrame:
    """A frame and its id in the turn's stream (the SSE event's id: where a re-attach
    resumes after)."""

    id: int | None
    frame: Frame | Unreadable

    @property
    def type(self) -> str:
        if isinstance(self.frame, Unreadable):
            return self.frame.type
        return str(self.frame.__struct_config__.tag)

    @property
    def terminal(self) -> bool:
        """The turn's last frame (`done` or `error`), read or not."""
        return self.type in wire.TERMINAL_FRAMES


def decode(data: str, event_id: int | None) -> NumberedFrame | None:
    """An SSE event of a turn's stream as its frame; None for a frame type this TUI does not
    know (skipped: see the module's docstring)."""
    try:
        return NumberedFrame(event_id, _DECODER.decode(data))
    except msgspec.ValidationError as exc:
        error = exc
    except msgspec.DecodeError as exc:
        raise SseError(f"event data is not JSON: {data[:80]!r}") from exc
    try:
        tag = _TAG_DECODER.decode(data).type
    except msgspec.ValidationError:
        raise SseError("event data is not a JSON object") from error
    if not isinstance(tag, str):
        raise SseError(f"event data is not a frame (no `type`): {data[:80]!r}") from error
    if tag not in KNOWN:
        log.info("chat stream: frame %s of unknown type %r skipped", event_id, tag)
        return None
    return NumberedFrame(event_id, Unreadable(tag, str(error)))
