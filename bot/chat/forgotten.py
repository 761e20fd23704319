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
from dataclasses import dataclass

from sqlalchemy import Select, Text, cast, func, or_, select
from sqlalchemy.orm import Session

from bot.chat.forget_words import Words
from bot.chat.forgotten_keys import forget_in_keyed_turns
from bot.chat.open_turn_rows import OpenTurn
from bot.chat.pending_forgets import raise_epoch, settle
from bot.chat.turn_record import TurnRecord
from bot.dialogue.titles import title_from_message
from bot.models import Agent, ChatSession, ChatTurn, Role, SummaryStatus

# Messages one "forget that ..." may change; more: nothing is forgotten (as memory's bound,
# bot.chat.operator_commands.FORGET_AT_MOST): say more of it, or delete the sessions.
FORGET_MESSAGES_AT_MOST = 100
SUMMARY_KEY = "chat_summary:"  # bot/chat/summary_sink.py's chunk keys


@dataclass(frozen=True)
class ChangedSession:
    """A chat session a forget changed, and whose it is (its clients reload it)."""

    operator_id: int
    session_id: str


@dataclass(frozen=True)
class Scrubbed:
    """What a forget changed in the chat sessions: messages, and sessions (any field)."""

    messages: int
    changed: list[ChangedSession]

    @property
    def sessions(self) -> int:
        return len(self.changed)


def _turns_saying(session: Session, repo: str, words: Words) -> list[ChatTurn]:
    """The messages of the repository's sessions that say the words, locked until the
    forget commits. A turn still running elsewhere leaves them out as it stores
    (bot.chat.pending_forgets)."""
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
    proposal, what its keyed turns recorded for their keys, and the messages of the turns
    still open (kept until stored: bot.chat.open_turn_rows), which leave them out of what
    they store too (bot.chat.pending_forgets). A session whose messages said them is due a
    new summary (module docstring). Running it again changes nothing."""
    found = Words(words)
    raise_epoch(session, repo, words)  # first: it waits for the turns opening or storing
    forget_in_keyed_turns(session, _sessions_of(repo), found)
    _forget_in_open_turns(session, repo, found)
    turns = _turns_saying(session, repo, found)
    said = {turn.session_id for turn in turns}
    rows = _sessions_saying(session, repo, found, said)
    titles = {row.id: _title_without(session, row, found) for row in rows}  # messages as said
    for turn in turns:
        turn.content = found.out_of(turn.content)
        turn.reasoning = found.out_of(turn.reasoning)
        turn.meta = found.out_of(turn.meta)
    changed = [
        ChangedSession(row.operator_id, row.id)
        for row in rows
        if _forget_in_session(row, found, title=titles[row.id], resummarise=row.id in said)
    ]
    session.flush()
    settle(session)  # no turn in flight: the words are kept nowhere
    return Scrubbed(messages=len(turns), changed=changed)


def _sessions_saying(
    session: Session, repo: str, words: Words, said: set[str]
) -> list[ChatSession]:
    """The repository's sessions whose messages (`said`) or fields say the words, locked."""
    fields = (
        ChatSession.title,
        ChatSession.summary,
        ChatSession.decision_body,
        ChatSession.pending_title,
        ChatSession.pending_body,
    )
    return list(
        session.scalars(
            select(ChatSession)
            .join(Agent, Agent.name == ChatSession.agent)
            .where(
                Agent.repo == repo,
                or_(
                    ChatSession.id.in_(said),
                    *(func.lower(field).like(words.like, escape="\\") for field in fields),
                ),
            )
            .order_by(ChatSession.id)
            .with_for_update(of=ChatSession)
        ).all()
    )


def _forget_in_open_turns(session: Session, repo: str, words: Words) -> int:
    """The messages of the repository's turns still open, kept for a note should their
    process be killed (bot.chat.left_turns), without the words. How many changed."""
    rows = session.scalars(
        select(OpenTurn)
        .where(
            OpenTurn.session_id.in_(_sessions_of(repo).scalar_subquery()),
            func.lower(OpenTurn.message).like(words.like, escape="\\"),
        )
        .order_by(OpenTurn.turn_id)
        .with_for_update()
    ).all()
    changed = [row for row in rows if words.said_in(row.message)]
    for row in changed:
        row.message = words.out_of(row.message)
    return len(changed)


def owners_in_repo(session: Session, repo: str, session_ids: Collection[str]) -> dict[str, int]:
    """Of `session_ids`, those of the repository's chat sessions, and whose each is."""
    rows = session.execute(
        select(ChatSession.id, ChatSession.operator_id)
        .join(Agent, Agent.name == ChatSession.agent)
        .where(Agent.repo == repo, ChatSession.id.in_(list(session_ids)))
    )
    return {session_id: operator_id for session_id, operator_id in rows}


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


def forget_summaries(session: Session, keys: Collection[str | None]) -> list[ChangedSession]:
    """The stored summary of each session whose `chat_summary` chunk (by its key) was
    forgotten is forgotten too (it is that chunk's text, shown with the session); the
    session is not summarised again for it. The sessions that changed."""
    ids = [key.removeprefix(SUMMARY_KEY) for key in keys if key and key.startswith(SUMMARY_KEY)]
    if not ids:
        return []
    rows = session.scalars(
        select(ChatSession)
        .where(ChatSession.id.in_(ids), ChatSession.summary.is_not(None))
        .with_for_update()
    ).all()
    for row in rows:
        row.summary = None
    return [ChangedSession(row.operator_id, row.id) for row in rows]


def record_without(record: TurnRecord, words: str) -> TurnRecord:
    """The forget turn's own messages as stored: without the words it named (the operator's
    message repeats them, the reply and its notes may), its title made from what is left."""
    return record.without(Words(words))
