"""Turns a killed process left acknowledged but unstored (bot.chat.open_turn_rows), noted at
the next start as a SIGTERM notes a cut turn: the session keeps the operator's message,
answered by a note that the turn did not complete (bot.chat.turn.OWNER_GONE_REPLY, kind
`turn_cut`), once (bot.chat.cut_notes). Before, a `steelframe dev` killed mid-turn left
nothing of it: its frames were in the embedded Redis, which the next start stops. A turn
sent with an idempotency key gets the same end for its key (bot.chat.turn_keys): a send
again with it answers that the turn did not complete, as the note says; it answered a 409
("no longer running and recorded no end") forever before. Every running instance looks
again now and then (bot.chat.turn_ends.TurnEnds.run_left_turn_sweeps): a turn is let go
without waiting for its own process's restart, and with it the words of the forgets it
still owed (bot.chat.pending_forgets)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.chat.coordination import TurnLocks
from bot.chat.cut_notes import store_cut_note
from bot.chat.inflight import TurnRegistry
from bot.chat.open_turn_rows import OpenTurn, open_key
from bot.chat.pending_forgets import end_open
from bot.chat.turn import OWNER_GONE_REPLY
from bot.chat.turn_keys import killed_end, record_killed_end
from bot.clock import Clock, utcnow
from bot.db import Database
from bot.group_commit import GroupCommit

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeftTurn:
    turn_id: str
    operator_id: int
    session_id: str
    message: str
    started_at: datetime

    @property
    def first_id(self) -> int:
        """An id for its first frame, as bot.chat.inflight.frame_base gives one (the turn's
        own was lost with its process): its start in milliseconds times 1,000, plus one."""
        at = self.started_at if self.started_at.tzinfo else self.started_at.replace(tzinfo=UTC)
        return int(at.timestamp() * 1000) * 1000 + 1


def left_turns(session: Session) -> list[LeftTurn]:
    """Every turn still kept open, oldest first: killed ones, and any running now."""
    rows = session.scalars(select(OpenTurn).order_by(OpenTurn.started_at)).all()
    return [LeftTurn(r.turn_id, r.operator_id, r.session_id, r.message, r.started_at) for r in rows]


def note_killed_turn(
    session: Session,
    operator_id: int,
    session_id: str,
    turn_id: str,
    message: str,
    *,
    first_id: int,
    clock: Clock = utcnow,
) -> bool:
    """A turn whose process was killed: its session notes it (its message and that it did
    not complete) and its key, if it was sent with one, records the same end, in one
    transaction. False when nothing was written (its messages stored already: the key is
    left as it is; its session gone). Its key is the one its kept-open row names, read before
    the note lets that row go."""
    key = open_key(session, turn_id)
    stored = store_cut_note(
        session, operator_id, session_id, turn_id, message, reply=OWNER_GONE_REPLY, clock=clock
    )
    if stored and key is not None:
        end = killed_end(session_id, turn_id, message, first_id=first_id)
        record_killed_end(session, key, turn_id, end, clock=clock)
    return stored


class KilledTurn(Protocol):
    """What a killed turn's note needs: a turn left open (`LeftTurn`) or one a reader ended
    (`bot.chat.frames.OrphanedTurn`)."""

    @property
    def operator_id(self) -> int: ...
    @property
    def session_id(self) -> str: ...
    @property
    def turn_id(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def first_id(self) -> int: ...


def note_killed(session: Session, turn: KilledTurn, *, clock: Clock = utcnow) -> bool:
    """`note_killed_turn` for `turn`."""
    return note_killed_turn(
        session,
        turn.operator_id,
        turn.session_id,
        turn.turn_id,
        turn.message,
        first_id=turn.first_id,
        clock=clock,
    )


def note_left_turn(session: Session, turn: LeftTurn, *, clock: Clock = utcnow) -> bool:
    """Note the turn (`note_killed_turn`) and let it go; False when nothing was written."""
    stored = note_killed(session, turn, clock=clock)
    end_open(session, turn.turn_id)
    return stored


async def turns_left(db: Database, *, registry: TurnRegistry, locks: TurnLocks) -> list[LeftTurn]:
    """Every turn kept open that runs neither here nor on another instance (its slot not
    held by it), oldest first. With Redis away a slot reads as free: `locks.degraded` says
    so after the call."""
    left = []
    for turn in await db.run(left_turns):
        if registry.find(turn.operator_id, session_id=None, turn_id=turn.turn_id):
            continue  # it runs here
        held = await locks.holder(turn.operator_id)
        if held is not None and held.turn_id == turn.turn_id:
            continue  # it runs on another instance
        left.append(turn)
    return left


async def note_left_turns(
    writes: GroupCommit, left: list[LeftTurn], *, clock: Clock = utcnow
) -> list[LeftTurn]:
    """Note each turn left open by a process that is gone (`turns_left`). The turns noted
    (one noted already, by another instance or a reader that ended it, is not)."""
    noted = []
    for turn in left:
        if await writes.run(note_left_turn, turn, clock=clock):
            noted.append(turn)
    if noted:
        log.info("%d chat turns cut by a killed process noted in their sessions", len(noted))
    return noted
