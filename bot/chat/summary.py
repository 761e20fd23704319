"""Session summaries: every session the operator leaves gets one (a new chat, reopening
another, or an idle time), written by the agent's model when one is configured and made
extractively, with no model, otherwise or when the model fails.

The three steps are separate so no database transaction waits on a model: `summary_source`
reads the turns, the caller writes the text (`extractive_summary` or a model), and
`store_summary` saves it and hands it to the sinks (memory, for one).

A turn the caller says to leave out (`summary_source(leave_out=...)`: the summariser's are
the operator's "forget ..." commands) is left out whole, the message and its reply, as is
the title it gave the session: what was forgotten must not come back through the summary.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import exists, func, select
from sqlalchemy.orm import Session

from bot.chat.message_ids import is_reply, turn_of
from bot.dialogue.titles import title_from_message
from bot.models import ChatSession, ChatTurn, Operator, Role, SummaryStatus

SUMMARY_LIMIT = 1200
SOURCE_TURNS = 60  # the newest turns a summary is made from
_MARKER = re.compile(r"<!--.*?-->", re.DOTALL)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_FILED = re.compile(r"Filed as #(\d+)")


@dataclass(frozen=True)
class SessionSummary:
    session_id: str
    operator_id: int
    agent: str
    focus: int | None
    title: str | None
    text: str


@dataclass(frozen=True)
class SummarySource:
    session_id: str
    agent: str
    title: str | None
    turns: list[tuple[str, str]]  # (role, content), oldest first
    covers: int  # the newest turn's seq when the turns were read

    def transcript(self, limit: int = 12_000) -> str:
        lines = [f"{role}: {_flat(content, 1500)}" for role, content in self.turns]
        text = "\n".join(lines)
        return text[-limit:]


SummarySink = Callable[[Session, SessionSummary], None]


def extractive_summary(title: str | None, turns: list[tuple[str, str]]) -> str:
    """A model-free summary: the subject, what came of it (the answers' opening sentences,
    issues filed, task results), and the open question if the session ended on one."""
    asked = [content for role, content in turns if role == Role.USER]
    answers = [content for role, content in turns if role == Role.ASSISTANT]
    subject = title or (_flat(asked[0], 80) if asked else "untitled")
    parts = [f"{subject}: {len(asked)} message(s) from the operator."]
    filed = sorted({int(n) for answer in answers for n in _FILED.findall(answer)})
    if filed:
        parts.append("Filed: " + ", ".join(f"#{n}" for n in filed) + ".")
    for answer in answers[-3:]:
        lead = _first_sentences(_MARKER.sub("", answer))
        if lead:
            parts.append(f"- {lead}")
    if turns and turns[-1][0] == Role.USER:
        parts.append(f"Left open: {_flat(turns[-1][1], 200)}")
    return _cap("\n".join(parts))


def summary_source(
    session: Session, session_id: str, *, leave_out: Callable[[str], bool] = lambda _: False
) -> SummarySource | None:
    """The turns to summarise, or None when the session is gone or already summarised.

    An operator's message `leave_out` says yes to is left out with its reply (the turn's two
    messages share the turn id: `<turn>-u`, `<turn>-a`), and so is the session's title when
    that message gave it; the turns may then be none (nothing to summarise). A reply whose
    message is older than the newest SOURCE_TURNS is left out too (what it answered is not
    there to be judged)."""
    row = session.get(ChatSession, session_id)
    if row is None or row.summary_status == SummaryStatus.DONE:
        return None
    turns = session.execute(
        select(ChatTurn.id, ChatTurn.role, ChatTurn.content, ChatTurn.seq)
        .where(ChatTurn.session_id == session_id)
        .order_by(ChatTurn.seq.desc())
        .limit(SOURCE_TURNS)
    ).all()
    if not turns:
        return None
    covers = turns[0].seq
    if turns[-1].role == Role.ASSISTANT and is_reply(turns[-1].id):
        turns = turns[:-1]  # a reply whose message is older than the window: not judged
    left_out = {
        turn_of(turn_id)
        for turn_id, role, content, _seq in turns
        if role == Role.USER and leave_out(content)
    }
    title = row.title
    if title is not None:
        first = session.scalar(
            select(ChatTurn.content)
            .where(ChatTurn.session_id == session_id, ChatTurn.role == Role.USER)
            .order_by(ChatTurn.seq)
            .limit(1)
        )
        if first is not None and leave_out(first) and title == title_from_message(first):
            title = None
    ordered = [
        (str(role), str(content))
        for turn_id, role, content, _seq in reversed(turns)
        if turn_of(turn_id) not in left_out
    ]
    return SummarySource(row.id, row.agent, title, ordered, covers)


def store_summary(
    session: Session,
    session_id: str,
    text: str,
    *,
    covers: int,
    sinks: tuple[SummarySink, ...] = (),
) -> SessionSummary | None:
    """Save the summary of the turns up to seq `covers` and hand it to the sinks.
    Idempotent: a session summarised or deleted meanwhile is left alone. A turn stored
    while the summary was being made (a reply that finished after the operator left) is
    not in it: the summary is kept, and the session stays due another (`none`: the next
    leave or the idle sweep makes it), or that turn would be missing from it for good."""
    row = session.get(ChatSession, session_id, with_for_update=True)
    if row is None or row.summary_status == SummaryStatus.DONE:
        return None
    newest = session.scalar(select(func.max(ChatTurn.seq)).where(ChatTurn.session_id == session_id))
    row.summary = _cap(_MARKER.sub("", text).strip())
    stale = newest is not None and newest > covers
    row.summary_status = SummaryStatus.NONE if stale else SummaryStatus.DONE
    summary = SessionSummary(
        row.id, row.operator_id, row.agent, row.focus_issue, row.title, row.summary
    )
    for sink in sinks:
        sink(session, summary)
    return summary


def mark_left(session: Session, session_id: str) -> bool:
    """The operator left the session: it is due a summary if it has turns the stored one
    does not cover. True when the caller should make it."""
    row = session.get(ChatSession, session_id, with_for_update=True)
    if row is None or row.summary_status in (SummaryStatus.DONE, SummaryStatus.PENDING):
        return False
    has_turns = session.scalar(select(exists().where(ChatTurn.session_id == session_id)))
    if not has_turns:
        return False
    row.summary_status = SummaryStatus.PENDING
    return True


def idle_sessions(session: Session, *, before: datetime, limit: int = 50) -> list[str]:
    """Sessions with turns nobody touched since `before` and no current summary; marked
    pending here, so two instances sweeping at once do not both summarise them."""
    rows = session.scalars(
        select(ChatSession)
        .where(
            ChatSession.summary_status == SummaryStatus.NONE,
            ChatSession.last_activity_at < before,
            exists().where(ChatTurn.session_id == ChatSession.id),
        )
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    for row in rows:
        row.summary_status = SummaryStatus.PENDING
    return [row.id for row in rows]


def pending_summaries(session: Session) -> list[str]:
    """Sessions due a summary that a crash or restart interrupted."""
    return list(
        session.scalars(
            select(ChatSession.id).where(ChatSession.summary_status == SummaryStatus.PENDING)
        )
    )


def active_session_of(session: Session, operator_id: int) -> str | None:
    operator = session.get(Operator, operator_id)
    return operator.active_session_id if operator is not None else None


def _first_sentences(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    sentences = _SENTENCE.split(flat)
    lead = " ".join(sentences[:2])
    return lead if len(lead) <= limit else lead[: limit - 1] + "…"


def _flat(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _cap(text: str) -> str:
    return text if len(text) <= SUMMARY_LIMIT else text[: SUMMARY_LIMIT - 1] + "…"
