"""Turn frames across instances: with Redis, every frame a turn emits is also appended to a
Redis stream of that turn, so `GET .../chat/stream` with `Last-Event-ID` resumes on any
instance behind the load balancer, not only on the one running the turn.

Keys (all expire about `linger` seconds after the turn's last frame: the two lookups are
renewed by its frames once a quarter of that has passed, so they may lapse up to a quarter
sooner: `_renewals_due`):
- `steelframe:chat:frames:{turn_id}`: the stream; one entry per frame, field `f` = JSON.
- `steelframe:chat:latest:{operator_id}`: {turn_id, session_id} of the operator's latest turn.
- `steelframe:chat:turn:{turn_id}:operator`: whose turn it is (a turn id names one operator).

Publishing never fails a turn: a Redis outage is logged once (and its end once), and the
turn goes on, resumable on its own instance as before. The frames it publishes meanwhile are
held in this process, in order (a bounded number: references to frames the turns hold anyway),
and written before any later one once Redis answers again, so a client re-attaching through
another instance gets the whole turn. Frames Redis never got or lost (held past the bound, a
Redis that came back without its data, a stream trimmed at MAX_FRAMES) are said, not skipped:
the reader puts a `status` frame with reason `frames_lost` where they were (`Continuity`).
A turn whose instance was killed mid-turn (SIGKILL, OOM, a crash) ends for its readers once
its slot lapses (bot/chat/coordination.py): the first reader to see it gone, past a grace for a
terminal frame on its way, appends its end to the stream, once (`FrameReader._owner_gone`),
and that reader alone records the turn in its session (`on_owner_gone`: bot/chat/cut_notes.py).
Finding another instance's turn while Redis is unreachable is a 503 naming the setting, never
a 500. The instance that wrote a turn's frames may run another release (a rolling deploy):
a frame whose `reason` this release has no word for is read without it
(`NumberedFrame.stored`), the one place stored frames are decoded.

This module declares what both sides share: the numbered frame, the reader's `Continuity`,
the keys, and the `FrameRelay` seam. The writing side (the outbox, its flusher, the held
frames' rewrite) is bot.chat.frame_outbox, the reading side (locate, replay, a gone owner's
end) bot.chat.frame_reader, and `RedisFrameRelay` (bot.chat.frame_relay) puts them together.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from bot.contracts.chat import (
    DoneFrame,
    ErrorFrame,
    Frame,
    StatusFrame,
    StatusReason,
    decode_frame,
    encode_frame,
)

log = logging.getLogger(__name__)
PREFIX = "steelframe:chat:"
MAX_FRAMES = 50_000  # a turn longer than this keeps its newest frames (XADD MAXLEN ~)
LOST_TEXT = (
    "part of this turn was not relayed (Redis was away or lost it); "
    "the whole reply comes with the turn's end"
)
# A turn whose owner is gone (its instance was killed: SIGKILL, OOM, a crash) ends for its
# readers with an `error` frame (reason `cancelled`) saying so, in the words of a turn the
# service cut while stopping (bot/chat/inflight.py SERVICE_STOPPED_TEXT).
OWNER_GONE_TEXT = (
    "the service stopped (the instance running this turn went away) before this turn finished"
)
TERMINAL_FRAMES = (DoneFrame, ErrorFrame)


@dataclass(frozen=True, slots=True)
class NumberedFrame:
    """A frame as its turn's stream carries it: numbered, and encoded once (the SSE writer
    and the relay send these bytes to every reader)."""

    id: int
    frame: Frame
    data: bytes

    @classmethod
    def of(cls, frame_id: int, frame: Frame) -> NumberedFrame:
        return cls(frame_id, frame, encode_frame(frame_id, frame))

    @classmethod
    def decode(cls, data: bytes) -> NumberedFrame:
        frame_id, frame = decode_frame(data)
        return cls(frame_id, frame, data)

    @classmethod
    def stored(cls, data: bytes) -> NumberedFrame:
        """A frame as the relay kept it, which another release may have written (a rolling
        deploy replays a turn of an older instance on a newer one, and the reverse). A
        `reason` this release has no word for (an older release's status reason was an
        error's text; a newer one may add a word) is read without it, never guessed: a
        status frame keeps those words as its `detail` (where this release says why), an
        error frame keeps its `error`. The frame is encoded again, so a reader gets only
        the words of this release's contract. What this release writes is checked as
        strictly as before (`decode`); anything else unreadable is raised, as it was."""
        try:
            return cls.decode(data)
        except msgspec.ValidationError as exc:
            refused = exc
        kept = msgspec.json.decode(data)
        reason = kept.pop("reason", None) if isinstance(kept, dict) else None
        if not isinstance(reason, str):
            raise refused
        if kept.get("type") == "status":
            kept.setdefault("detail", reason)
        try:
            frame_id, frame = decode_frame(msgspec.json.encode(kept))
        except msgspec.ValidationError:
            raise refused from None
        log.info("chat: frame %s read without its reason %r (%s)", frame_id, reason, refused)
        return cls.of(frame_id, frame)

    @property
    def terminal(self) -> bool:
        return isinstance(self.frame, TERMINAL_FRAMES)


class Continuity:
    """A turn's relayed frames in the order its stream holds them, for a reader that saw up
    to `after`: a frame seen already (a batch written again after its answer was lost) is
    skipped, and frames missing before one the reader has not seen (the stream does not start
    with the turn's first frame, or ids jump) are said by a `frames_lost` status frame in
    their place, with the last missing id (which nothing else will ever carry: a turn's frames
    reach its stream in order, so missing ones never come later)."""

    def __init__(self, after: int) -> None:
        self.last = after  # the last id the reader has (been told about)
        self._next: int | None = None  # the id the next entry should have

    def take(self, frame: NumberedFrame) -> list[NumberedFrame]:
        if self._next is None:  # the stream's first entry: the turn's first frame?
            missing = not _opens_turn(frame.frame)
        else:
            missing = frame.id > self._next
        shown: list[NumberedFrame] = []
        if missing and frame.id - 1 > self.last:
            shown.append(lost_frame(frame.id - 1))
        if frame.id > self.last:
            shown.append(frame)
        self.last = max(self.last, frame.id)
        self._next = max(self._next or 0, frame.id + 1)
        return shown


def lost_frame(frame_id: int) -> NumberedFrame:
    """What a reader is told where frames of the turn are missing."""
    return NumberedFrame.of(frame_id, StatusFrame(text=LOST_TEXT, reason=StatusReason.FRAMES_LOST))


def lookup_keys(operator_id: int, turn_id: str) -> tuple[str, str]:
    """Where a reader finds a turn: the operator's latest turn, and the turn's operator."""
    return f"{PREFIX}latest:{operator_id}", f"{PREFIX}turn:{turn_id}:operator"


def _opens_turn(frame: Frame) -> bool:
    """`turn started`, the first frame of every turn, is the one that names the turn."""
    return isinstance(frame, StatusFrame) and frame.turn_id is not None


@dataclass(frozen=True)
class RelayedTurn:
    turn_id: str
    session_id: str


@dataclass(frozen=True)
class OrphanedTurn:
    """A turn whose owner is gone, ended by a reader (bot.chat.frame_reader,
    `FrameReader._owner_gone`): what its first frame (`turn started`) said, for its
    session's note that it did not complete (the turn's own record of it died with its
    instance)."""

    operator_id: int
    turn_id: str
    session_id: str
    message: str
    first_id: int = 1  # its first frame's id: a send again with its key reads it numbered so


# A turn's frames given back changed (the same object: that frame is left as it is).
FramesChange = Callable[[list[NumberedFrame]], list[NumberedFrame]]
# Records an orphaned turn in its session; run by the one reader that ended it.
OwnerGoneRecord = Callable[[OrphanedTurn], Coroutine[Any, Any, None]]


class FrameRelay(Protocol):
    # Set by the composition (bot.chat.pipeline): None records nothing.
    on_owner_gone: OwnerGoneRecord | None

    async def publish(
        self, operator_id: int, turn_id: str, session_id: str, frame: NumberedFrame
    ) -> None: ...

    async def locate(
        self, operator_id: int, *, session_id: str | None, turn_id: str | None
    ) -> RelayedTurn | None: ...

    def replay(
        self, turn_id: str, *, after: int, heartbeat: float | None
    ) -> AsyncIterator[NumberedFrame | None]: ...

    async def relayed_turns(self) -> list[RelayedTurn]: ...

    async def rewrite(self, turn_id: str, change: FramesChange) -> bool: ...

    def held_turns(self) -> list[RelayedTurn]: ...

    async def rewrite_held(self, turn_id: str, change: FramesChange) -> bool: ...

    async def close(self) -> None: ...
