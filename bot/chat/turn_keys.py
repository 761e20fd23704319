"""A chat turn sent with the client's idempotency key (`Idempotency-Key` or `request_id`):
one turn per key and operator, however often the message is sent again. A client that lost
the answer (a dropped connection, a timeout) sends the same message with the same key and
gets that turn: attached to it while it runs, its recorded end once it has ended.

The key's row lives in `side_effects` (bot/idempotency.py's table, kind `chat_turn`),
claimed as the turn is placed, before it launches: its `request` is what was asked (to
refuse the same key with another message) and which turn it started; its `result` is the
turn's first and terminal frames, recorded as the terminal frame goes out. A turn refused
before it launched (a 409, a 400) claimed nothing: its retry runs. A turn whose process was
killed recorded no end: the end a reader of it reads (an error, reason `cancelled`) is
recorded for its key as its session notes it cut (`record_killed_end`), so a send again
with the key answers what the note says. A `forget that <words>` takes the words out of
these rows too (bot.chat.forgotten_keys): a send again with the key and the message as it
was then still names that turn (the words are kept nowhere to compare with, so any words in
their place do), and answers it without them; a delete or a clear of the session deletes
them (`drop_session_keys`). Knows nothing of HTTP.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

import msgspec
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bot.chat.forget_words import said_as
from bot.chat.frames import OWNER_GONE_TEXT, FrameRelay, NumberedFrame, RelayedTurn
from bot.chat.inflight import TurnRegistry
from bot.clock import Clock, utcnow
from bot.contracts.chat import ErrorFrame, ErrorReason, StatusFrame
from bot.contracts.errors import ErrorDetail
from bot.errors import Conflict
from bot.idempotency import DONE, PENDING, SideEffect, check_same_request

KIND = "chat_turn"
MAX_KEY_CHARS = 200


class Asked(msgspec.Struct, frozen=True):
    """What a keyed send asked, as the client sent it: a retry must ask the same."""

    message: str
    session: str | None
    agent: str | None
    focus: int | None
    keep_focus: bool  # no `focus` sent: the session's focus stays


class KeyedTurn(msgspec.Struct, frozen=True):
    """The key's row `request`: what was asked and the turn it started."""

    asked: Asked
    turn_id: str
    session_id: str


class TurnEnd(msgspec.Struct, frozen=True):
    """The key's row `result`: the turn's first frame (`turn started`) and terminal frame
    (`done` or `error`), as the stream sent them."""

    frames: list[str]


@dataclass(frozen=True)
class KeyState:
    """A key's row as read: the turn it started, and its end once recorded."""

    turn: KeyedTurn
    end: TurnEnd | None


def row_key(operator_id: int, client_key: str) -> str:
    """The row's key: the client's key scoped to its operator (two operators' keys never
    meet), hashed to the column's size."""
    digest = hashlib.sha256(f"{operator_id}\x1f{client_key}".encode()).hexdigest()[:40]
    return f"chat-turn:{digest}"


def check_asked(state: KeyState, asked: Asked) -> None:
    """Refuse (KeyReused, 422) a send with the key of a turn of another message (or
    session, agent, focus), naming that turn. A message a forget took words out of since
    is the message sent with any words in their place (bot.chat.forget_words.said_as)."""
    kept = state.turn.asked
    if kept.message != asked.message and said_as(kept.message, asked.message):
        asked = msgspec.structs.replace(asked, message=kept.message)
    check_same_request(
        kept,
        asked,
        what="message",
        detail=ErrorDetail(
            field="Idempotency-Key", session=state.turn.session_id, turn_id=state.turn.turn_id
        ),
    )


def read_key(session: Session, key: str) -> KeyState | None:
    row = session.scalar(select(SideEffect).where(SideEffect.key == key, SideEffect.kind == KIND))
    if row is None:
        return None
    end = msgspec.convert(row.result, TurnEnd) if row.status == DONE and row.result else None
    return KeyState(msgspec.convert(row.request, KeyedTurn), end)


def claim_key(
    session: Session, key: str, turn: KeyedTurn, *, clock: Clock = utcnow
) -> KeyState | None:
    """Claim the key for `turn`: None when claimed, else the state of the turn that
    claimed it first."""
    now = clock()
    try:
        with session.begin_nested():
            session.add(
                SideEffect(
                    key=key,
                    kind=KIND,
                    status=PENDING,
                    request=msgspec.to_builtins(turn),
                    result=None,
                    lease_until=None,
                    created_at=now,
                    updated_at=now,
                )
            )
    except IntegrityError:
        return read_key(session, key)
    return None


def record_end(
    session: Session, key: str, turn_id: str, end: TurnEnd, *, clock: Clock = utcnow
) -> None:
    """The turn's end, the answer of every later send with its key."""
    row = session.scalar(select(SideEffect).where(SideEffect.key == key).with_for_update())
    if row is None or row.request.get("turn_id") != turn_id:
        return
    row.status = DONE
    row.result = msgspec.to_builtins(end)
    row.updated_at = clock()


def drop_session_keys(session: Session, session_id: str) -> int:
    """Delete the rows of the turns sent with a key in the session (a delete or a clear of
    the session: what was asked and answered goes with its messages); how many. A send
    again with such a key is a new send: into a deleted session, a 404."""
    result = session.execute(
        delete(SideEffect).where(
            SideEffect.kind == KIND, SideEffect.request["session_id"].as_string() == session_id
        )
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


def started_frame(session_id: str, turn_id: str, message: str) -> StatusFrame:
    """A turn's first frame: it names the session and the turn, which are decided before it
    goes out, and what was asked (a client re-attaching after a reload shows it)."""
    return StatusFrame(text="turn started", session=session_id, turn_id=turn_id, message=message)


def killed_end(session_id: str, turn_id: str, message: str, *, first_id: int) -> TurnEnd:
    """The end of a turn whose process was killed mid-turn: its first frame, and the error
    a reader of its relayed frames reads (reason `cancelled`, bot.chat.frames), numbered
    from `first_id`."""
    first = NumberedFrame.of(first_id, started_frame(session_id, turn_id, message))
    gone = ErrorFrame(error=OWNER_GONE_TEXT, reason=ErrorReason.CANCELLED)
    end = NumberedFrame.of(first_id + 1, gone)
    return TurnEnd(frames=[first.data.decode(), end.data.decode()])


def record_killed_end(
    session: Session, key: str, turn_id: str, end: TurnEnd, *, clock: Clock = utcnow
) -> bool:
    """`end` recorded for `key` (the row key its kept-open row names: bot.chat.open_turn_rows)
    if it started the turn and has no end yet (the turn's process was killed before recording
    it): a send again with that key then answers it, as it answers a turn cut by a shutdown,
    instead of a 409 forever. False when nothing was recorded."""
    row = session.scalar(
        select(SideEffect).where(SideEffect.key == key, SideEffect.kind == KIND).with_for_update()
    )
    if row is None or row.status != PENDING or row.request.get("turn_id") != turn_id:
        return False
    row.status = DONE
    row.result = msgspec.to_builtins(end)
    row.updated_at = clock()
    return True


class TurnFrames(Protocol):
    """A turn's frames, wherever they come from: the turn running here, another instance's
    through the relay, or the end a key recorded."""

    @property
    def session_id(self) -> str: ...

    @property
    def turn_id(self) -> str: ...

    def subscribe(
        self, *, after: int = 0, heartbeat: float | None = None
    ) -> AsyncIterator[NumberedFrame | None]: ...


@dataclass(frozen=True)
class RecordedTurn:
    """A keyed turn that ended before this send: its recorded frames."""

    session_id: str
    turn_id: str
    frames: list[NumberedFrame]

    @classmethod
    def of(cls, turn: KeyedTurn, end: TurnEnd) -> RecordedTurn:
        frames = [NumberedFrame.stored(data.encode()) for data in end.frames]
        return cls(turn.session_id, turn.turn_id, frames)

    async def subscribe(
        self, *, after: int = 0, heartbeat: float | None = None
    ) -> AsyncIterator[NumberedFrame | None]:
        for frame in self.frames:
            if frame.id > after:
                yield frame


@dataclass(frozen=True)
class RelayedFrames:
    """A keyed turn running on another instance: its frames through the relay."""

    relay: FrameRelay
    turn: RelayedTurn

    @property
    def session_id(self) -> str:
        return self.turn.session_id

    @property
    def turn_id(self) -> str:
        return self.turn.turn_id

    def subscribe(
        self, *, after: int = 0, heartbeat: float | None = None
    ) -> AsyncIterator[NumberedFrame | None]:
        return self.relay.replay(self.turn.turn_id, after=after, heartbeat=heartbeat)


async def find_keyed_turn(
    state: KeyState, *, operator_id: int, registry: TurnRegistry
) -> TurnFrames | None:
    """The frames of the turn a key started: its recorded end; the turn running here
    (attached, as a re-attach is), or on another instance (through the relay); None when
    it is found nowhere (not relayed yet, or killed: bot.chat.key_joins decides)."""
    turn = state.turn
    if state.end is not None:
        return RecordedTurn.of(turn, state.end)
    await registry.settle(operator_id)
    handle = registry.find(operator_id, session_id=None, turn_id=turn.turn_id)
    if handle is not None:
        return handle
    relay = registry.relay
    if relay is not None:
        located = await relay.locate(operator_id, session_id=None, turn_id=turn.turn_id)
        if located is not None:
            return RelayedFrames(relay, located)
    return None


def no_longer_running(turn: KeyedTurn) -> Conflict:
    """The 409 of a key whose turn is no longer running and recorded no end: its process was
    killed, and its session does not note it yet (bot.chat.left_turns)."""
    return Conflict(
        "the turn sent with this Idempotency-Key is no longer running and recorded no end"
        " (the service running it stopped); its session shows it",
        detail=ErrorDetail(session=turn.session_id, turn_id=turn.turn_id),
    )
