"""Chat sessions as the API shows them (bot.contracts.chat): the list, one session with its
messages, a session's history. Reading changes nothing."""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import (
    func,
    select,
)
from sqlalchemy.orm import Session

from bot.chat.proposals import proposal_of
from bot.chat.session_label import session_label
from bot.chat.session_rows import active_session, operator_row, owned_session
from bot.chat.unseen import unseen_sessions
from bot.contracts.chat import (
    History,
    ListedSession,
    Message,
    SessionDecision,
    SessionSummary,
)
from bot.contracts.chat import Session as SessionView
from bot.models import ChatSession, ChatTurn, Role, SessionKind

View = TypeVar("View", bound=SessionSummary)


def list_sessions(session: Session, operator_id: int, *, limit: int = 100) -> list[ListedSession]:
    operator = operator_row(session, operator_id)
    counts = (
        select(ChatTurn.session_id, func.count().label("turns"))
        .join(ChatSession, ChatSession.id == ChatTurn.session_id)
        .where(ChatSession.operator_id == operator_id)
        .group_by(ChatTurn.session_id)
        .subquery()
    )
    rows = session.execute(
        select(ChatSession, func.coalesce(counts.c.turns, 0))
        .outerjoin(counts, counts.c.session_id == ChatSession.id)
        .where(ChatSession.operator_id == operator_id)
        .order_by(ChatSession.last_activity_at.desc(), ChatSession.created_at.desc())
        .limit(limit)
    ).all()
    unseen = unseen_sessions(session, operator_id)  # the sidebar's dot (unseen.py)
    return [
        session_view(
            ListedSession,
            row,
            turns=count,
            active=row.id == operator.active_session_id,
            unseen=row.id in unseen,
        )
        for row, count in rows
    ]


def get_session(session: Session, operator_id: int, session_id: str) -> SessionView:
    """The session with its messages and stored summary (`turn_in_flight` is the turn
    registry's to say: None here). Reading changes nothing."""
    row = owned_session(session, operator_id, session_id)
    active = operator_row(session, operator_id).active_session_id == row.id
    messages = [turn_json(turn) for turn in row.turns]
    return session_view(
        SessionView, row, turns=len(messages), active=active, messages=messages, turn_in_flight=None
    )


def history(session: Session, operator_id: int, *, session_id: str | None, limit: int) -> History:
    """The last `limit` messages of the named session, else of the active one."""
    if session_id is None:
        row = active_session(session, operator_row(session, operator_id))
        if row is None:
            return History(session=None, messages=[])
    else:
        row = owned_session(session, operator_id, session_id)
    turns = session.scalars(
        select(ChatTurn)
        .where(ChatTurn.session_id == row.id)
        .order_by(ChatTurn.seq.desc())
        .limit(limit)
    ).all()
    return History(session=row.id, messages=[turn_json(t) for t in reversed(turns)])


def session_json(
    row: ChatSession, *, turns: int | None = None, active: bool = False
) -> SessionSummary:
    return session_view(SessionSummary, row, turns=turns, active=active)


def session_view(
    view: type[View], row: ChatSession, *, turns: int | None, active: bool, **more: Any
) -> View:
    """The session as `view` shows it: a summary, or with its messages (`more`)."""
    decision = None
    if row.decision_body and row.decision_issue is not None:
        decision = SessionDecision(body=row.decision_body, issue=row.decision_issue)
    return view(
        id=row.id,
        title=row.title,
        label=session_label(row.title, row.summary),  # what the sidebar shows
        kind="discuss" if row.kind == SessionKind.DISCUSS else "chat",
        agent=row.agent,
        focus=row.focus_issue,
        created_at=row.created_at.isoformat(),
        last_activity_at=row.last_activity_at.isoformat(),
        closed_at=row.closed_at.isoformat() if row.closed_at else None,
        summary=row.summary,
        summary_status=row.summary_status,
        decision=decision,
        pending=proposal.view() if (proposal := proposal_of(row)) else None,
        turns=turns,
        active=active,
        **more,
    )


def turn_json(turn: ChatTurn) -> Message:
    return Message(
        id=turn.id,
        seq=turn.seq,
        role="user" if turn.role == Role.USER else "assistant",
        content=turn.content,
        reasoning=turn.reasoning,
        intent=turn.intent,
        meta=None if turn.meta is None else turn.meta.copy(),
        created_at=turn.created_at.isoformat(),
    )


def agent_of(session: Session, operator_id: int, session_id: str | None) -> str | None:
    if session_id is None:
        row = active_session(session, operator_row(session, operator_id))
        return row.agent if row is not None else None
    return owned_session(session, operator_id, session_id).agent
