"""Forgets that turns in flight still owe (docs/memory.md, "Forgetting").

A `forget that <words>` takes the words out of what the chat sessions have stored
(bot.chat.forgotten), but a turn running meanwhile, here or on another instance, read its
session's history before the forget and stores its messages after it: the words came back
with them. So a forget raises the forget epoch (one row) and keeps its words under the new
epoch; each turn notes the epoch it opened at (`chat_open_turns.forget_epoch`), and as it
stores (bot.chat.session_store.persist_turn, a cut note's too) it leaves out the words of
every forget of its repository raised since. The words are kept only while a turn opened
before them is still open in the repository: the forget, and each turn that stores or ends
after it, lets go of those no open turn owes (`settle`), so a forget with no turn in flight
keeps nothing. A turn whose process was killed owes them until an instance notes it
(bot.chat.left_turns: at a start, or at a running instance's look for such turns, which
settles too).

Why no turn slips between: a turn reads the epoch, under a key-share lock, before it reads
its history (`open_for_turn`) and again before it stores; a forget raises it under an
update lock first of all. On PostgreSQL a forget waits for the turns holding the epoch
(whose open rows and messages it then finds and scrubs), and they wait for it (and then
read its epoch and its words). The turns' group commit takes the epoch first in each of
its transactions (bot.group_commit's `prelude`), before any row lock, as the forget does:
taken in one order, the locks cannot deadlock. SQLite has one writer at a time.
"""

from __future__ import annotations

from sqlalchemy import Integer, String, Text, delete, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from bot.chat.open_turn_rows import OpenTurn, forget_open
from bot.db import Base
from bot.models import Agent, ChatSession

EPOCH_ROW = 1  # chat_forget_epoch has this one row (migration 0034)


class ForgetEpoch(Base):
    __tablename__ = "chat_forget_epoch"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    epoch: Mapped[int] = mapped_column(Integer)


class PendingForget(Base):
    __tablename__ = "chat_pending_forgets"

    epoch: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    repo: Mapped[str] = mapped_column(String(200))
    words: Mapped[str] = mapped_column(Text)


_EPOCH = (
    select(ForgetEpoch.epoch)
    .where(ForgetEpoch.id == EPOCH_ROW)
    .with_for_update(read=True, key_share=True)
)


def current_epoch(session: Session) -> int:
    """The forget epoch, held (key share) until the transaction ends: a forget raising it
    waits for this one, which waited for a forget under way."""
    return session.execute(_EPOCH).scalar() or 0


def raise_epoch(session: Session, repo: str, words: str) -> int:
    """A forget of `words` in `repo`: the epoch raised (waiting for the turns holding it)
    and the words kept under it for the turns opened before it. The new epoch."""
    row = session.scalars(
        select(ForgetEpoch).where(ForgetEpoch.id == EPOCH_ROW).with_for_update()
    ).one()
    row.epoch += 1
    session.add(PendingForget(epoch=row.epoch, repo=repo, words=words))
    session.flush()
    return row.epoch


def owed(session: Session, turn_id: str, session_id: str) -> list[str]:
    """The words of every forget of the session's repository raised since the turn opened,
    oldest first ([] for a turn not kept open, or opened after the last forget)."""
    now = current_epoch(session)
    opened = session.execute(
        select(OpenTurn.forget_epoch).where(OpenTurn.turn_id == turn_id)
    ).scalar()
    if opened is None or opened >= now:
        return []
    repo = (
        select(Agent.repo)
        .join(ChatSession, ChatSession.agent == Agent.name)
        .where(ChatSession.id == session_id)
        .scalar_subquery()
    )
    return list(
        session.scalars(
            select(PendingForget.words)
            .where(PendingForget.epoch > opened, PendingForget.repo == repo)
            .order_by(PendingForget.epoch)
        )
    )


def settle(session: Session) -> int:
    """Let go of the words no open turn owes any more (none of their repository opened
    before them). How many forgets' words went."""
    still_owed = (
        select(OpenTurn.turn_id)
        .join(ChatSession, ChatSession.id == OpenTurn.session_id)
        .join(Agent, Agent.name == ChatSession.agent)
        .where(Agent.repo == PendingForget.repo, OpenTurn.forget_epoch < PendingForget.epoch)
        .exists()
    )
    done = session.execute(delete(PendingForget).where(~still_owed))
    return int(done.rowcount)  # type: ignore[attr-defined]


def end_open(session: Session, turn_id: str) -> None:
    """The turn ended without storing its messages (stopped, failed, noted as cut): its
    kept-open row goes, and with it the words only it still owed."""
    forget_open(session, turn_id)
    settle(session)
