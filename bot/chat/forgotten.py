"""What Chat keeps of its conversations after the operator's "forget ...": the words a
`forget that <words>` named taken out of every chat session of the repository (each message,
its reasoning and stored metadata, each session's title, summary, Decision draft and held
proposal, and what a turn sent with an idempotency key recorded for its key:
bot.chat.forgotten_keys), and the stored summary of a session whose `chat_summary` chunk was
forgotten.

Session memory is forgotten by the memory package (`Memory.forget_*`); these are Chat's own
records, which memory never sees but which are shown again (history, a reopened session, the
sidebar) and read again (a session's history is in every later turn's prompt, its summary is
made from its messages and stored in memory). Left there, the words would be on the screen
and in the prompt after the operator asked for them to be gone, and a session summarised
after the forget would put them back into memory. The scope is memory's: every session whose
agent works on the repository, whoever's it is (a summary of any of them is shared memory).

A session whose messages said the words is due a new summary (`none`: the idle sweep makes
it), made from what is left: the stored one was made from the words, and a model's words or
a cut sentence may say them otherwise than verbatim; its memory chunk is replaced with it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Select, Text, cast, func, or_, select
from sqlalchemy.orm import Session

from bot.chat.forget_words import Words
from bot.chat.forgotten_keys import forget_in_keyed_turns
from bot.chat.proposals import Proposal
from bot.chat.session_store import TurnRecord
from bot.dialogue.titles import title_from_message
from bot.models import Agent, ChatSession, ChatTurn, Role, SummaryStatus

# Messages one "forget that ..." may change; more: nothing is forgotten (as memory's bound,
# bot.chat.operator_commands.FORGET_AT_MOST): say more of it, or delete the sessions.
FORGET_MESSAGES_AT_MOST = 100
SUMMARY_KEY = "chat_summary:"  # bot/chat/summary_sink.py's chunk keys


@dataclass(frozen=True)
class Scrubbed:
    """What a forget changed in the chat sessions: messages, and sessions (any field)."""

    messages: int
    sessions: int


def _turns_saying(session: Session, repo: str, words: Words) -> list[ChatTurn]:
    """The messages of the repository's sessions that say the words, locked until the
    forget commits. A turn still running elsewhere stores its messages as they are: it was
    sent before the forget."""
    like = [
        func.lower(ChatTurn.content).like(words.like, escape="\\"),
        func.lower(ChatTurn.reasoning).like(words.like, escape="\\"),
        func.lower(cast(ChatTurn.meta, Text)).like(words.like, escape="\\"),
    ]
    rows = session.scalars(
        select(ChatTurn)
        .join(ChatSession, ChatSession.id == ChatTurn.session_id)
        .join(Agent, Agent.name == ChatSession.agent)
        .where(Agent.repo == repo, or_(*like))
        .order_by(ChatTurn.session_id, ChatTurn.seq)
        .with_for_update(of=ChatTurn)
    ).all()
    return [row for row in rows if _says(words, row)]


def _says(words: Words, row: ChatTurn) -> bool:
    return (
        words.said_in(row.content)
        or words.said_in(row.reasoning)
        or row.meta != words.out_of(row.meta)
    )


def count_saying(session: Session, repo: str, words: str) -> int:
    """How many messages of the repository's chat sessions say the words (read only)."""
    return len(_turns_saying(session, repo, Words(words)))


def forget_saying(session: Session, repo: str, words: str) -> Scrubbed:
    """Take the words out of every chat session of the repository: each message's text,
    reasoning and metadata, each session's title, summary, Decision draft and held
    proposal, and what its keyed turns recorded for their keys. A session whose messages
    said them is due a new summary (module docstring). Running it again changes nothing."""
    found = Words(words)
    forget_in_keyed_turns(session, _sessions_of(repo), found)
    turns = _turns_saying(session, repo, found)
    said = {turn.session_id for turn in turns}
    fields = (
        ChatSession.title,
        ChatSession.summary,
        ChatSession.decision_body,
        ChatSession.pending_title,
        ChatSession.pending_body,
    )
    rows = session.scalars(
        select(ChatSession)
        .join(Agent, Agent.name == ChatSession.agent)
        .where(
            Agent.repo == repo,
            or_(
                ChatSession.id.in_(said),
                *(func.lower(field).like(found.like, escape="\\") for field in fields),
            ),
        )
        .order_by(ChatSession.id)
        .with_for_update(of=ChatSession)
    ).all()
    titles = {row.id: _title_without(session, row, found) for row in rows}  # messages as said
    for turn in turns:
        turn.content = found.out_of(turn.content)
        turn.reasoning = found.out_of(turn.reasoning)
        turn.meta = found.out_of(turn.meta)
    changed = sum(
        _forget_in_session(row, found, title=titles[row.id], resummarise=row.id in said)
        for row in rows
    )
    return Scrubbed(messages=len(turns), sessions=changed)


def _sessions_of(repo: str) -> Select[str]:
    """The ids of every chat session whose agent works on `repo`."""
    return (
        select(ChatSession.id)
        .join(Agent, Agent.name == ChatSession.agent)
        .where(Agent.repo == repo)
    )


def _forget_in_session(
    row: ChatSession, words: Words, *, title: str | None, resummarise: bool
) -> bool:
    before = (row.title, row.summary, row.decision_body, row.pending_title, row.pending_body)
    row.title = title
    row.summary = words.out_of(row.summary)
    if words.said_in(row.decision_body):
        row.decision_body = words.out_of(row.decision_body)
        row.decision_version += 1  # a publish under way leaves this draft alone (proposals.py)
    row.pending_title = words.out_of(row.pending_title)
    row.pending_body = words.out_of(row.pending_body)
    if resummarise and row.summary_status == SummaryStatus.DONE:
        row.summary_status = SummaryStatus.NONE
    after = (row.title, row.summary, row.decision_body, row.pending_title, row.pending_body)
    return resummarise or after != before


def _title_without(session: Session, row: ChatSession, words: Words) -> str | None:
    """The session's title without the words. A title made from the first message (cut to
    60 characters, maybe through the words) is made again from that message without them."""
    if row.title is None:
        return None
    first = session.scalar(
        select(ChatTurn.content)
        .where(ChatTurn.session_id == row.id, ChatTurn.role == Role.USER)
        .order_by(ChatTurn.seq)
        .limit(1)
    )
    if first is not None and row.title == title_from_message(first):
        return title_from_message(words.out_of(first))
    return words.out_of(row.title)


def forget_summaries(session: Session, keys: Collection[str | None]) -> int:
    """The stored summary of each session whose `chat_summary` chunk (by its key) was
    forgotten is forgotten too (it is that chunk's text, shown with the session); the
    session is not summarised again for it. How many sessions changed."""
    ids = [key.removeprefix(SUMMARY_KEY) for key in keys if key and key.startswith(SUMMARY_KEY)]
    if not ids:
        return 0
    rows = session.scalars(
        select(ChatSession)
        .where(ChatSession.id.in_(ids), ChatSession.summary.is_not(None))
        .with_for_update()
    ).all()
    for row in rows:
        row.summary = None
    return len(rows)


def record_without(record: TurnRecord, words: str) -> TurnRecord:
    """The forget turn's own messages as stored: without the words it named (the operator's
    message repeats them, the reply and its notes may), its title made from what is left."""
    found = Words(words)
    message = found.out_of(record.user_message)
    return replace(
        record,
        user_message=message,
        reply=found.out_of(record.reply),
        reasoning=found.out_of(record.reasoning),
        meta=found.out_of(record.meta),
        title=title_from_message(message) if record.title is not None else None,
        decision=_decision_without(record.decision, found),
        pending=_pending_without(record.pending, found),
    )


def _decision_without(decision: Any, words: Words) -> Any:
    if isinstance(decision, tuple):
        body, issue = decision
        return (words.out_of(body), issue)
    return decision


def _pending_without(pending: Any, words: Words) -> Any:
    if isinstance(pending, Proposal):
        return replace(pending, title=words.out_of(pending.title), body=words.out_of(pending.body))
    return pending
