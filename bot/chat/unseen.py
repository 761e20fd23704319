"""The sidebar's "new task result" dot, kept on the server: a session has an unseen result
when a task result was delivered into it (`bot/lifecycle/delivery.py`) after the operator
last saw its results. Opening the session sees them (`open_session`), and a client that
shows a result live in the open session says so (`POST .../seen`). Per operator and session
(a session belongs to one operator), so it survives a reload and shows in every tab."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.contracts.chat import Seen
from bot.errors import NotFound
from bot.models import ChatSession, ChatTurn, Role

# The intent and meta kind of a delivered task result (bot/lifecycle/delivery.py).
RESULT_INTENT = "status"
RESULT_KIND = "task_result"


def unseen_sessions(session: Session, operator_id: int) -> set[str]:
    """The operator's sessions holding a task result newer than they last saw."""
    rows = session.execute(
        select(ChatTurn.session_id, ChatTurn.created_at, ChatSession.results_seen_at, ChatTurn.meta)
        .join(ChatSession, ChatSession.id == ChatTurn.session_id)
        .where(
            ChatSession.operator_id == operator_id,
            ChatTurn.role == Role.ASSISTANT,
            ChatTurn.intent == RESULT_INTENT,
        )
    ).all()
    return {
        session_id
        for session_id, created_at, seen_at, meta in rows
        if (meta or {}).get("kind") == RESULT_KIND and (seen_at is None or created_at > seen_at)
    }


def mark_seen(
    session: Session, operator_id: int, session_id: str, *, clock: Clock = utcnow
) -> Seen:
    """The operator has seen this session's results up to now (idempotent)."""
    row = session.get(ChatSession, session_id)
    if row is None or row.operator_id != operator_id:
        raise NotFound(f"session {session_id} not found")
    row.results_seen_at = clock()
    return Seen(session=row.id, unseen=False)
