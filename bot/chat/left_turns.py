"""Turns a killed process left acknowledged but unstored (bot.chat.open_turn_rows), noted at
the next start as a SIGTERM notes a cut turn: the session keeps the operator's message,
answered by a note that the turn did not complete (bot.chat.turn.OWNER_GONE_REPLY, kind
`turn_cut`), once (bot.chat.cut_notes). Before, a `steelframe dev` killed mid-turn left
nothing of it: its frames were in the embedded Redis, which the next start stops."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.chat.coordination import TurnLocks
from bot.chat.cut_notes import store_cut_note
from bot.chat.inflight import TurnRegistry
from bot.chat.open_turn_rows import OpenTurn, forget_open
from bot.chat.turn import OWNER_GONE_REPLY
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


def left_turns(session: Session) -> list[LeftTurn]:
    """Every turn still kept open, oldest first: killed ones, and any running now."""
    rows = session.scalars(select(OpenTurn).order_by(OpenTurn.started_at)).all()
    return [LeftTurn(r.turn_id, r.operator_id, r.session_id, r.message) for r in rows]


def note_left_turn(session: Session, turn: LeftTurn, *, clock: Clock = utcnow) -> bool:
    """Note the turn in its session (its message and that it did not complete) and let it
    go; False when nothing was written (its messages stored already, its session gone)."""
    stored = store_cut_note(
        session,
        turn.operator_id,
        turn.session_id,
        turn.turn_id,
        turn.message,
        reply=OWNER_GONE_REPLY,
        clock=clock,
    )
    forget_open(session, turn.turn_id)
    return stored


async def note_left_turns(
    db: Database,
    writes: GroupCommit,
    *,
    registry: TurnRegistry,
    locks: TurnLocks,
    clock: Clock = utcnow,
) -> list[LeftTurn]:
    """Note every turn left open by a process that is gone; a turn running here, or on
    another instance (its slot held), is left. The turns noted."""
    noted = []
    for turn in await db.run(left_turns):
        if registry.find(turn.operator_id, session_id=None, turn_id=turn.turn_id):
            continue  # it runs here
        held = await locks.holder(turn.operator_id)
        if held is not None and held.get("turn_id") == turn.turn_id:
            continue  # it runs on another instance
        if await writes.run(note_left_turn, turn, clock=clock):
            noted.append(turn)
    if noted:
        log.info("%d chat turns cut by a killed process noted in their sessions", len(noted))
    return noted
