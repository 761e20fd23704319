"""A cut turn's note in its session: the operator's message, answered by a note that the turn
did not complete (bot.chat.turn.cut_record), written once per turn whoever writes it: the
turn's own instance cutting it while stopping (bot.chat.inflight), or the reader that ended
a turn whose instance was killed (bot.chat.frames, `OrphanedTurn`)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from bot.chat.message_ids import asked_id
from bot.chat.session_store import TurnSession, persist_turn
from bot.chat.turn import CUT_REPLY, cut_record
from bot.clock import Clock, utcnow
from bot.models import ChatSession, ChatTurn


def store_cut_note(
    session: Session,
    operator_id: int,
    session_id: str,
    turn_id: str,
    message: str,
    *,
    reply: str = CUT_REPLY,
    clock: Clock = utcnow,
) -> bool:
    """Write the turn's message and `reply` (its note) unless the turn is stored already
    (its answer saved before its instance died, or a note written before): a turn's stored
    messages carry its id. False when nothing was written (stored already, or the session
    is gone)."""
    row = session.get(ChatSession, session_id)
    if row is None or row.operator_id != operator_id:
        return False
    if session.get(ChatTurn, asked_id(turn_id)) is not None:
        return False
    found = TurnSession(
        id=row.id,
        agent=row.agent,
        title=row.title,
        focus=row.focus_issue,
        kind=row.kind,
        decision_body=None,
        decision_issue=None,
    )
    persist_turn(
        session, operator_id, row.id, cut_record(turn_id, message, found, reply=reply), clock=clock
    )
    return True
