"""Storage of the lifecycle: tasks, their event log, run leases, notices and chat deliveries."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import BigInteger, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from bot.contracts.tasks import EventData
from bot.db import Base, JSONType
from bot.lifecycle.states import TaskState


class EventKind(StrEnum):
    CREATED = "created"
    TRANSITION = "transition"
    PICKUP_IGNORED = "pickup_ignored"
    TRIGGER_IGNORED = "trigger_ignored"
    DECISION = "decision"
    DECISION_IGNORED = "decision_ignored"
    RETRY_SCHEDULED = "retry_scheduled"
    RUNTIME_SESSION = "runtime_session"
    LIMIT_EXCEEDED = "limit_exceeded"
    RECONCILED = "reconciled"
    ARCHIVED = "archived"
    UNARCHIVED = "unarchived"  # the operator's Undo of an archive (bot/lifecycle/archiving.py)
    ORIGIN_LINKED = "origin_linked"
    NOTE = "note"
    ISSUE_PINNED = "issue_pinned"
    EDIT_IGNORED = "edit_ignored"
    PULL_END_IGNORED = "pull_end_ignored"
    REVIEW_PICKUP = "review_pickup"  # a review run took threads up (bot.lifecycle.review_run)
    CI_FIX_RUN = "ci_fix_run"  # failing CI on the pull request started a fix run


class Task(Base):
    """One task per (repo, issue). A finished task picked up again is reopened in place."""

    __tablename__ = "tasks"
    __table_args__ = (
        UniqueConstraint("repo", "issue", name="uq_tasks_repo_issue"),
        Index("ix_tasks_state_updated", "state", "updated_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    repo: Mapped[str] = mapped_column(String(200))
    issue: Mapped[int]
    title: Mapped[str] = mapped_column(String(300))
    state: Mapped[str] = mapped_column(String(20), default=TaskState.QUEUED)
    archived: Mapped[bool] = mapped_column(default=False)
    # The chat session that filed the issue; results are delivered there (spec: filing).
    origin_session: Mapped[str | None] = mapped_column(String(32))
    # Bumped when a finished task is picked up again; delivery ids and job ids include it.
    generation: Mapped[int] = mapped_column(default=1)
    # Runs started in the current leg (reset by a resume and by a reopen).
    attempts: Mapped[int] = mapped_column(default=0)
    job_id: Mapped[str | None] = mapped_column(String(100))
    branch: Mapped[str | None] = mapped_column(String(200))
    pushed_at: Mapped[datetime | None]
    pr_number: Mapped[int | None]
    pr_url: Mapped[str | None] = mapped_column(Text)
    progress_comment_id: Mapped[int | None] = mapped_column(BigInteger)
    # The coding runtime's own session id / transcript, stored as soon as the run reports
    # it, so a continuation keeps the first run's context even if that run then crashed.
    runtime_session: Mapped[str | None] = mapped_column(String(200))
    runtime_transcript: Mapped[str | None] = mapped_column(Text)
    question: Mapped[str | None] = mapped_column(Text)
    pending_decision: Mapped[str | None] = mapped_column(Text)
    decision_comment_id: Mapped[int | None] = mapped_column(BigInteger)
    tokens_used: Mapped[int] = mapped_column(default=0)
    cost_usd: Mapped[float] = mapped_column(default=0.0)
    runtime_seconds: Mapped[float] = mapped_column(default=0.0)
    last_error: Mapped[str | None] = mapped_column(Text)
    summary: Mapped[str | None] = mapped_column(Text)
    # The issue text runs work from, as it was when the pickup was authorised (the label
    # event or the Chat filing); later edits count only from the App or a writer.
    issue_title: Mapped[str | None] = mapped_column(Text)
    issue_body: Mapped[str | None] = mapped_column(Text)
    pinned_at: Mapped[datetime | None]
    # The newest pickup webhook the task followed (GitHub's time of that change), and
    # whether GitHub has shown the issue closed or without a pickup label since: together
    # they tell a new pickup from one sent again (bot.lifecycle.pickup_signal).
    pickup_followed_at: Mapped[datetime | None]
    pickup_rearmed: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class TaskEvent(Base):
    """The task's log: every transition and every trigger that was recorded and ignored."""

    __tablename__ = "task_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(40))
    from_state: Mapped[str | None] = mapped_column(String(20))
    to_state: Mapped[str | None] = mapped_column(String(20))
    # Who or what caused it: "webhook:issues.labeled", "chat:<session>", "operator:<name>",
    # "worker:<host>:<pid>", "reconciler".
    actor: Mapped[str] = mapped_column(String(200))
    detail: Mapped[str] = mapped_column(Text, default="")
    data: Mapped[EventData] = mapped_column(JSONType, default=dict)  # its typed JSON
    at: Mapped[datetime]


class TaskLease(Base):
    """At most one run per task: the holder renews `expires_at` while it works."""

    __tablename__ = "task_leases"

    task_id: Mapped[int] = mapped_column(
        ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True
    )
    holder: Mapped[str] = mapped_column(String(200))
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int]
    # The coding runtime's process group, so a reconciler on the same host can kill an
    # orphan left by a worker that died.
    child_pgid: Mapped[int | None]
    worktree: Mapped[str | None] = mapped_column(Text)
    acquired_at: Mapped[datetime]
    heartbeat_at: Mapped[datetime]
    expires_at: Mapped[datetime]


class TaskNotice(Base):
    """A one-off issue comment (question, failure, termination), posted at most once.

    The row is written before the call and the comment id after it; a row without an id is
    looked up by its marker before posting again (a crash between the two)."""

    __tablename__ = "task_notices"
    __table_args__ = (UniqueConstraint("task_id", "key", name="uq_task_notices_key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(100))
    body: Mapped[str] = mapped_column(Text)
    comment_id: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime]
    posted_at: Mapped[datetime | None]


class ChatDelivery(Base):
    """The marker that a task result reached its chat session; its id is the message id."""

    __tablename__ = "chat_deliveries"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    event_id: Mapped[int] = mapped_column(
        ForeignKey("task_events.id", ondelete="CASCADE"), unique=True
    )
    session_id: Mapped[str] = mapped_column(String(32))
    state: Mapped[str] = mapped_column(String(20))
    # "delivered" or "skipped" (the session was deleted before the result arrived).
    outcome: Mapped[str] = mapped_column(String(20))
    at: Mapped[datetime]


class TaskStopRequest(Base):
    """A terminate that could not take the task's row lock in time (a frozen work horse
    holds it): the reconciler stops the job, then applies it. No foreign key, so recording
    the request never waits on the locked task row."""

    __tablename__ = "task_stop_requests"

    task_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    actor: Mapped[str] = mapped_column(String(200))
    requested_at: Mapped[datetime]


class TaskLog(Base):
    """A run's full runtime log, redacted, for operators only (never posted)."""

    __tablename__ = "task_logs"

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    generation: Mapped[int]
    attempt: Mapped[int]
    holder: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(20))
    text: Mapped[str] = mapped_column(Text)
    at: Mapped[datetime]


class ThreadState(StrEnum):
    OPEN = "open"
    ADDRESSED = "addressed"
    DECLINED = "declined"
    NEEDS_OPERATOR = "needs_operator"


class ThreadKind(StrEnum):
    COMMENT = "comment"  # a thread of review comments on a line; root: its first comment
    REVIEW = "review"  # a submitted review's own text; root: the review


class ReviewThread(Base):
    """The thread ledger: every review thread on a task's pull request and where it stands
    (docs/api.md, "Review threads"). `text` is the root's text as it was recorded (cut at
    bot.lifecycle.reviews.MAX_REVIEW_TEXT with a note), untrusted."""

    __tablename__ = "review_threads"
    __table_args__ = (
        UniqueConstraint("task_id", "kind", "root_id", name="uq_review_threads_root"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(20))
    root_id: Mapped[int] = mapped_column(BigInteger)
    pr_number: Mapped[int]
    path: Mapped[str | None] = mapped_column(Text)
    line: Mapped[int | None]
    author: Mapped[str] = mapped_column(String(100))
    state: Mapped[str] = mapped_column(String(20), default=ThreadState.OPEN)
    commit: Mapped[str | None] = mapped_column(String(64))
    reason: Mapped[str | None] = mapped_column(Text)
    text: Mapped[str] = mapped_column(Text, default="")
    url: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    # The review run that took the thread up (its job id; None: no run has yet) and the
    # thread's text as that run was given it (root and writers' replies, untrusted).
    picked_job: Mapped[str | None] = mapped_column(String(100))
    picked_at: Mapped[datetime | None]
    pinned: Mapped[str | None] = mapped_column(Text)
    # A comment thread's review (GitHub's `pull_request_review_id`; None for a review's own
    # row, or a thread first seen through a reply): dismissing the review declines it.
    review_id: Mapped[int | None] = mapped_column(BigInteger)
    # When GitHub last changed the root comment's text as `text` holds it (None: not read
    # from the root yet): an older edit delivered late never replaces a newer text.
    source_updated_at: Mapped[datetime | None]


class ReviewAck(Base):
    """A review comment or review Steelframe acknowledged (its `eyes` reaction, or for a
    review's own text the acknowledging comment): written after GitHub answered, so a
    redelivery finds it and makes no call at all."""

    __tablename__ = "review_acks"

    kind: Mapped[str] = mapped_column(String(20), primary_key=True)
    github_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    answer_id: Mapped[int | None] = mapped_column(BigInteger)  # the reaction or the comment
    at: Mapped[datetime]
