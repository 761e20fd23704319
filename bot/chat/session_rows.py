"""The chat session rows and the lookups every session operation starts from: a session id
that belongs to another operator is NotFound, exactly as if it did not exist. Every function
takes an open SQLAlchemy `Session` and the operator's id."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.errors import NotFound
from bot.models import ChatSession, Operator, SessionKind, SummaryStatus

REASONING_CAP = 12_000


HISTORY_IN_RESPONSE = 20


PROMPT_HISTORY_TURNS = 40


UNSET: Any = object()


class SessionGone(Exception):
    """The session was deleted while a turn was running; the turn must write nothing."""


def new_id() -> str:
    return uuid.uuid4().hex


def owned_session(
    session: Session, operator_id: int, session_id: str, *, current: bool = False
) -> ChatSession:
    """`current`: read it again from the database even if this transaction loaded it (after
    `locked_operator_row`, what another transaction committed meanwhile counts)."""
    row = session.get(ChatSession, session_id, populate_existing=current)
    if row is None or row.operator_id != operator_id:
        raise NotFound(f"session {session_id} not found")
    return row


def operator_row(session: Session, operator_id: int) -> Operator:
    operator = session.get(Operator, operator_id)
    if operator is None:
        raise NotFound("operator not found")
    return operator


def locked_operator_row(session: Session, operator_id: int) -> Operator:
    """`operator_row`, for a change of the operator's active chat that depends on which chat
    is active (a new chat closes it, a reopen leaves it): locked until this transaction
    ends, so two such changes at once run one after the other, the second reading what the
    first made active (two new chats at once each closed the same chat, and one stayed
    open). SELECT ... FOR UPDATE: the row lock on PostgreSQL, the write lock on SQLite
    (bot/db.py)."""
    operator = session.get(Operator, operator_id, with_for_update=True, populate_existing=True)
    if operator is None:
        raise NotFound("operator not found")
    return operator


def active_session(session: Session, operator: Operator) -> ChatSession | None:
    if operator.active_session_id is None:
        return None
    row = session.get(ChatSession, operator.active_session_id)
    if row is None or row.operator_id != operator.id:
        return None
    return row


def create_session(
    session: Session,
    operator: Operator,
    *,
    agent: str,
    title: str | None = None,
    focus: int | None = None,
    kind: SessionKind = SessionKind.CHAT,
    clock: Clock = utcnow,
) -> ChatSession:
    row = new_session_row(
        operator.id, agent=agent, title=title, focus=focus, kind=kind, clock=clock
    )
    session.add(row)
    operator.active_session_id = row.id
    session.flush()
    return row


def new_session_row(
    operator_id: int,
    *,
    agent: str,
    title: str | None = None,
    focus: int | None = None,
    kind: SessionKind = SessionKind.CHAT,
    clock: Clock = utcnow,
    session_id: str | None = None,
) -> ChatSession:
    now = clock()
    return ChatSession(
        id=session_id or new_id(),
        operator_id=operator_id,
        agent=agent,
        kind=kind,
        title=title,
        focus_issue=focus,
        created_at=now,
        last_activity_at=now,
        summary_status=SummaryStatus.NONE,
        decision_version=0,
    )


def clear_decision(row: ChatSession) -> None:
    row.decision_body = None
    row.decision_issue = None
    row.decision_version += 1
