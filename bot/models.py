"""Storage models of the core: operators, agents, chat sessions and chat turns, owed resyncs."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from bot.contracts.turn_meta import TurnMeta
from bot.db import Base, JSONType


class SessionKind(StrEnum):
    CHAT = "chat"
    DISCUSS = "discuss"


class SummaryStatus(StrEnum):
    NONE = "none"
    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"


class Operator(Base):
    __tablename__ = "operators"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    # sha256 of the bearer token; the token itself is shown once and never stored.
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime]
    # The session the next message goes to when a request names none (new chat, reopen).
    active_session_id: Mapped[str | None] = mapped_column(String(32))
    # When `operator revoke` took the token away (None: it works); `rotate` gives a new one.
    revoked_at: Mapped[datetime | None]


class WebSession(Base):
    """A browser sign-in (web GUI): the cookie is shown once and stored only as a digest, and
    the CSRF token it is paired with is checked on every state-changing request."""

    __tablename__ = "web_sessions"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    operator_id: Mapped[int] = mapped_column(
        ForeignKey("operators.id", ondelete="CASCADE"), index=True
    )
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime]


class OwedResync(Base):
    """An operator who missed an event while the events log was unreachable, kept until a
    `resync` reaches them. In memory alone the debt died with its process (a forked work
    horse exits seconds after its job, a pod is replaced): recorded here, any reconciler
    pass pays it (bot/events/publisher.py). One row a miss, so paying deletes exactly the
    rows it read and a miss recorded meanwhile stays."""

    __tablename__ = "owed_resyncs"
    # Ids never reused (SQLite reuses the largest rowid once it is deleted): a payer that
    # read rows late deletes those rows, never a new miss that took a deleted row's id.
    __table_args__ = ({"sqlite_autoincrement": True},)

    id: Mapped[int] = mapped_column(primary_key=True)
    operator_id: Mapped[int] = mapped_column(
        ForeignKey("operators.id", ondelete="CASCADE"), index=True
    )
    missed_at: Mapped[datetime]  # when: for a person reading the table


class Agent(Base):
    """Mirror of the configured agents, so sessions can reference them by name."""

    __tablename__ = "agents"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    repo: Mapped[str] = mapped_column(String(200))
    checkout: Mapped[str] = mapped_column(Text)
    runtime: Mapped[str] = mapped_column(String(40))
    updated_at: Mapped[datetime]


class ChatSession(Base):
    __tablename__ = "chat_sessions"
    __table_args__ = (
        Index("ix_chat_sessions_operator_activity", "operator_id", "last_activity_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    operator_id: Mapped[int] = mapped_column(ForeignKey("operators.id", ondelete="CASCADE"))
    agent: Mapped[str] = mapped_column(ForeignKey("agents.name"))
    kind: Mapped[str] = mapped_column(String(20), default=SessionKind.CHAT)
    title: Mapped[str | None] = mapped_column(String(200))
    focus_issue: Mapped[int | None]
    created_at: Mapped[datetime]
    last_activity_at: Mapped[datetime]
    closed_at: Mapped[datetime | None]
    summary: Mapped[str | None] = mapped_column(Text)
    summary_status: Mapped[str] = mapped_column(String(20), default=SummaryStatus.NONE)
    # The Decision draft (spec "Discuss and Decision"): kept until publish or a clearing event.
    decision_body: Mapped[str | None] = mapped_column(Text)
    decision_issue: Mapped[int | None]
    # Counted up by every write of the draft: a publish clears only the draft it answered.
    decision_version: Mapped[int] = mapped_column(default=0, server_default="0")
    # Work the model proposed without being asked; filed only on the operator's explicit `y`.
    pending_title: Mapped[str | None] = mapped_column(String(300))
    pending_body: Mapped[str | None] = mapped_column(Text)
    pending_kind: Mapped[str | None] = mapped_column(String(20))  # work | memory
    # The proposal's own filing key (the turn that proposed it): one issue however confirmed.
    pending_key: Mapped[str | None] = mapped_column(String(64))
    # When the operator last saw this session's task results (the sidebar's dot: unseen.py).
    results_seen_at: Mapped[datetime | None]

    turns: Mapped[list[ChatTurn]] = relationship(
        back_populates="session",
        cascade="all, delete-orphan",
        passive_deletes=True,
        order_by="ChatTurn.seq",
    )


class ChatTurn(Base):
    __tablename__ = "chat_turns"
    __table_args__ = (UniqueConstraint("session_id", "seq", name="uq_chat_turns_session_seq"),)

    # Deterministic where a producer can retry (background results use a derived id).
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    session_id: Mapped[str] = mapped_column(
        ForeignKey("chat_sessions.id", ondelete="CASCADE"), index=True
    )
    seq: Mapped[int]
    role: Mapped[str] = mapped_column(String(20))
    content: Mapped[str] = mapped_column(Text)
    reasoning: Mapped[str | None] = mapped_column(Text)
    intent: Mapped[str | None] = mapped_column(String(40))
    meta: Mapped[TurnMeta] = mapped_column(JSONType, default=dict)  # its typed JSON
    created_at: Mapped[datetime]

    session: Mapped[ChatSession] = relationship(back_populates="turns")
