"""Session summaries, made in the background when a new chat closes the previous one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.models import ChatSession, ChatTurn, Role, SummaryStatus

SUMMARY_LIMIT = 1200


@dataclass(frozen=True)
class SessionSummary:
    session_id: str
    operator_id: int
    agent: str
    focus: int | None
    title: str | None
    text: str


SummarySink = Callable[[Session, SessionSummary], None]


def summarise_turns(title: str | None, turns: list[tuple[str, str]]) -> str:
    """An extractive summary: what was asked and the last answers, within SUMMARY_LIMIT.

    Deterministic and model-free, so closing a session never depends on a model being up.
    """
    asked = [content for role, content in turns if role == Role.USER]
    answered = [content for role, content in turns if role == Role.ASSISTANT]
    parts = [f"Session: {title or 'untitled'} ({len(asked)} question(s))."]
    for question in asked[:5]:
        parts.append(f"Asked: {_line(question)}")
    if answered:
        parts.append(f"Last answer: {_line(answered[-1], 400)}")
    text = "\n".join(parts)
    return text if len(text) <= SUMMARY_LIMIT else text[: SUMMARY_LIMIT - 1] + "…"


def summarise_session(
    session: Session, session_id: str, *, sinks: tuple[SummarySink, ...] = ()
) -> SessionSummary | None:
    """Store the summary of a closed session and hand it to the sinks (memory, for one).

    Idempotent: a session already summarised, or deleted meanwhile, is left alone.
    """
    row = session.get(ChatSession, session_id, with_for_update=True)
    if row is None or row.summary_status == SummaryStatus.DONE:
        return None
    turns = session.execute(
        select(ChatTurn.role, ChatTurn.content)
        .where(ChatTurn.session_id == session_id)
        .order_by(ChatTurn.seq)
    ).all()
    text = summarise_turns(row.title, [(role, content) for role, content in turns])
    row.summary = text
    row.summary_status = SummaryStatus.DONE
    summary = SessionSummary(row.id, row.operator_id, row.agent, row.focus_issue, row.title, text)
    for sink in sinks:
        sink(session, summary)
    return summary


def pending_summaries(session: Session) -> list[str]:
    """Sessions closed but not summarised (a crash or restart interrupted them)."""
    return list(
        session.scalars(
            select(ChatSession.id).where(ChatSession.summary_status == SummaryStatus.PENDING)
        )
    )


def _line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
