"""Task rows: create, look up, fence, touch (columns that are not the state), log.

A state change is not made here: every one goes through `bot.lifecycle.transition`.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypedDict, Unpack

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.contracts.errors import ErrorDetail
from bot.contracts.tasks import EventData
from bot.errors import Conflict, NotFound
from bot.lifecycle.models import EventKind, Task, TaskEvent, TaskLease
from bot.lifecycle.states import TaskState

MAX_TITLE = 300


class TaskChanges(TypedDict, total=False):
    """The task columns a move (`Move.changes`) or `touch` may set, with their types: mypy
    checks every writer's keys and values against these. Never the state (only
    `bot.lifecycle.transition` moves it) nor the row's identity (id, repo, issue, origin,
    branch, created_at); `updated_at` is set by the writer itself."""

    title: str  # a failed task picked up again takes the issue's title now
    archived: bool
    generation: int
    attempts: int
    job_id: str | None
    pushed_at: datetime | None
    pr_number: int | None
    pr_url: str | None
    progress_comment_id: int | None
    runtime_session: str | None
    runtime_transcript: str | None
    question: str | None
    pending_decision: str | None
    decision_comment_id: int | None
    tokens_used: int
    cost_usd: float
    runtime_seconds: float
    last_error: str | None
    summary: str | None
    issue_title: str | None
    issue_body: str | None
    pinned_at: datetime | None


class LeaseLost(Conflict):
    """The run's lease is gone (expired or taken over): it may change nothing any more."""

    code = "lease_lost"


def hold(session: Session, task_id: int, holder: str, clock: Clock = utcnow) -> None:
    """The fence: raise LeaseLost unless `holder` holds the task's live lease. Called in
    the transaction of every change a run makes; the row lock (PostgreSQL; SQLite's write
    lock, bot/db.py) keeps a take-over from committing between this check and the change."""
    lease = session.scalar(select(TaskLease).where(TaskLease.task_id == task_id).with_for_update())
    if lease is None or lease.holder != holder or lease.expires_at < clock():
        raise LeaseLost(
            f"task {task_id}: this run no longer holds the lease", detail=ErrorDetail(task=task_id)
        )


def get_task(session: Session, task_id: int, *, locked: bool = False) -> Task:
    """The task as committed now; `locked`: its row held until this transaction ends (a
    change that depends on what was read, such as its state), so no other change of it
    can commit in between."""
    task = session.get(Task, task_id, populate_existing=True, with_for_update=locked or None)
    if task is None:
        raise NotFound(f"no task {task_id}", detail=ErrorDetail(task=task_id))
    return task


def find_task(session: Session, repo: str, issue: int) -> Task | None:
    return session.scalar(select(Task).where(Task.repo == repo, Task.issue == issue))


def new_task(
    session: Session,
    *,
    repo: str,
    issue: int,
    title: str,
    origin_session: str | None,
    actor: str,
    clock: Clock = utcnow,
) -> Task:
    """A queued task and its `created` event; the caller's flush raises on a duplicate."""
    now = clock()
    task = Task(
        repo=repo,
        issue=issue,
        title=(title or f"Issue #{issue}")[:MAX_TITLE],
        state=TaskState.QUEUED,
        archived=False,
        origin_session=origin_session,
        generation=1,
        attempts=0,
        branch=branch_name(issue),
        tokens_used=0,
        cost_usd=0.0,
        runtime_seconds=0.0,
        created_at=now,
        updated_at=now,
    )
    session.add(task)
    session.flush()
    record(
        session,
        task,
        EventKind.CREATED,
        actor=actor,
        to_state=TaskState.QUEUED,
        detail=f"picked up {repo}#{issue}",
        clock=clock,
    )
    return task


def branch_name(issue: int) -> str:
    return f"steelframe/issue-{issue}"


def record(
    session: Session,
    task: Task,
    kind: EventKind,
    *,
    actor: str,
    detail: str = "",
    data: EventData | None = None,
    from_state: str | None = None,
    to_state: str | None = None,
    clock: Clock = utcnow,
) -> TaskEvent:
    event = TaskEvent(
        task_id=task.id,
        kind=kind,
        from_state=from_state,
        to_state=to_state,
        actor=actor[:200],
        detail=detail,
        data=data or {},
        at=clock(),
    )
    session.add(event)
    session.flush()
    return event


def touch(
    session: Session,
    task_id: int,
    clock: Clock = utcnow,
    *,
    fence: str | None = None,
    **changes: Unpack[TaskChanges],
) -> None:
    """Set columns that are not the state (counters, ids, markers); fenced like a
    transition. The state itself only ever changes through `bot.lifecycle.transition`."""
    if "state" in changes:  # a caller mypy does not see (a test, a dict passed on) still fails
        raise ValueError("a task's state changes only through bot.lifecycle.transition")
    if fence is not None:
        hold(session, task_id, fence, clock)
    session.execute(
        update(Task)
        .where(Task.id == task_id)
        .values(updated_at=clock(), **changes)
        .execution_options(synchronize_session=False)
    )


def events(session: Session, task_id: int, *, limit: int = 500) -> list[TaskEvent]:
    return list(
        session.scalars(
            select(TaskEvent)
            .where(TaskEvent.task_id == task_id)
            .order_by(TaskEvent.id.desc())
            .limit(limit)
        )
    )[::-1]
