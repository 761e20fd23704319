"""Task rows: create, look up, transition (compare-and-set on the state), log, and render.

Every state change goes through `transition`, which checks the state machine, updates the
row only if its state is still the one it read (so two writers cannot both win) and writes
the event in the same transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Required, TypedDict

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.errors import Conflict, NotFound
from bot.lifecycle import egress_blocked, pull_view
from bot.lifecycle.leverage_view import leverage_json
from bot.lifecycle.models import EventKind, Task, TaskEvent, TaskLease, TaskLog
from bot.lifecycle.review_ledger import review_threads, thread_json
from bot.lifecycle.states import IllegalTransition, TaskState, check_transition

MAX_TITLE = 300
CAS_ROUNDS = 5


class TransitionFields(TypedDict, total=False):
    """`transition`'s keywords as one type, for what passes them on (outcomes.change_state)."""

    actor: Required[str]
    detail: str
    data: dict[str, Any] | None
    expect: Iterable[TaskState] | None
    changes: dict[str, Any] | None
    fence: str | None
    clock: Clock


class LeaseLost(Conflict):
    """The run's lease is gone (expired or taken over): it may change nothing any more."""

    code = "lease_lost"


def hold(session: Session, task_id: int, holder: str, clock: Clock = utcnow) -> None:
    """The fence: raise LeaseLost unless `holder` holds the task's live lease. Called in
    the transaction of every change a run makes; the row lock (PostgreSQL) keeps a
    take-over from committing between this check and the change."""
    lease = session.scalar(select(TaskLease).where(TaskLease.task_id == task_id).with_for_update())
    if lease is None or lease.holder != holder or lease.expires_at < clock():
        raise LeaseLost(
            f"task {task_id}: this run no longer holds the lease", detail={"task": task_id}
        )


def get_task(session: Session, task_id: int) -> Task:
    task = session.get(Task, task_id, populate_existing=True)
    if task is None:
        raise NotFound(f"no task {task_id}", detail={"task": task_id})
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
    data: dict[str, Any] | None = None,
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


def transition(
    session: Session,
    task_id: int,
    wanted: TaskState,
    *,
    actor: str,
    detail: str = "",
    data: dict[str, Any] | None = None,
    expect: Iterable[TaskState] | None = None,
    changes: dict[str, Any] | None = None,
    fence: str | None = None,
    clock: Clock = utcnow,
) -> TaskEvent:
    """Move the task to `wanted` and log it; `changes` are other columns set with it.

    `expect` narrows the states this caller moves from (a worker only moves its own
    `running` task); anything else, like the state machine refusing, is IllegalTransition.
    `fence` (a run's lease holder) makes it LeaseLost unless that run still holds the lease.
    """
    if fence is not None:
        hold(session, task_id, fence, clock)
    allowed = set(expect) if expect is not None else None
    for _ in range(CAS_ROUNDS):
        task = get_task(session, task_id)
        current = task.state
        if allowed is not None and TaskState(current) not in allowed:
            raise IllegalTransition(task_id, current, wanted)
        check_transition(task_id, current, wanted)
        now = clock()
        values: dict[str, Any] = {"state": wanted, "updated_at": now, **(changes or {})}
        result = session.execute(
            update(Task)
            .where(Task.id == task_id, Task.state == current)
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        if getattr(result, "rowcount", 0) == 1:
            session.refresh(task)
            return record(
                session,
                task,
                EventKind.TRANSITION,
                actor=actor,
                detail=detail or f"{current} -> {wanted}",
                data=data,
                from_state=current,
                to_state=wanted,
                clock=clock,
            )
    raise IllegalTransition(task_id, get_task(session, task_id).state, wanted)


def touch(
    session: Session,
    task_id: int,
    clock: Clock = utcnow,
    *,
    fence: str | None = None,
    **changes: Any,
) -> None:
    """Set columns that are not the state (counters, ids, markers); fenced as `transition`."""
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


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def event_json(event: TaskEvent) -> dict[str, Any]:
    return {
        "id": event.id,
        "kind": event.kind,
        "from": event.from_state,
        "to": event.to_state,
        "actor": event.actor,
        "at": _iso(event.at),
        "detail": event.detail,
        "data": event.data,
    }


def task_json(task: Task, last: TaskEvent | None) -> dict[str, Any]:
    """The board's shape of a task (docs/api.md, "Task lifecycle")."""
    return {
        "id": task.id,
        "repo": task.repo,
        "issue": task.issue,
        "title": task.title,
        "state": task.state,
        "archived": task.archived,
        "pr_url": task.pr_url,
        "cost_usd": task.cost_usd,
        "tokens": task.tokens_used,  # with cost 0: the agent reported no cost (issue 34)
        "last_event": None
        if last is None
        else {"kind": last.kind, "at": _iso(last.at), "detail": last.detail},
        "updated_at": _iso(task.updated_at),
    }


def board(
    session: Session, *, state: TaskState | None, archived: bool, limit: int
) -> list[dict[str, Any]]:
    """Tasks newest first; archived ones only when asked for."""
    query = select(Task).order_by(Task.updated_at.desc(), Task.id.desc()).limit(limit)
    if state is not None:
        query = query.where(Task.state == state)
    if not archived:
        query = query.where(Task.archived.is_(False))
    tasks = list(session.scalars(query))
    if not tasks:
        return []
    latest = (
        select(TaskEvent.task_id, func.max(TaskEvent.id).label("event_id"))
        .where(TaskEvent.task_id.in_([t.id for t in tasks]))
        .group_by(TaskEvent.task_id)
        .subquery()
    )
    last = {
        event.task_id: event
        for event in session.scalars(
            select(TaskEvent).join(latest, TaskEvent.id == latest.c.event_id)
        )
    }
    views = pull_view.views_of(session, tasks)  # PR state and ledger counts, per card
    return [{**task_json(task, last.get(task.id)), **views[task.id].as_json()} for task in tasks]


def task_detail(session: Session, task_id: int) -> dict[str, Any]:
    """One task with its whole event log, its limits so far and its lease if a run holds one."""
    task = get_task(session, task_id)
    log = events(session, task_id)
    lease = session.get(TaskLease, task_id)
    ledger = review_threads(session, task_id)
    return {
        **task_json(task, log[-1] if log else None),
        "origin_session": task.origin_session,
        "generation": task.generation,
        "attempts": task.attempts,
        "branch": task.branch,
        "pr_number": task.pr_number,
        "question": task.question,
        "last_error": task.last_error,
        "summary": task.summary,
        "runtime_session": task.runtime_session,
        "usage": {
            "tokens": task.tokens_used,
            "cost_usd": task.cost_usd,
            "runtime_seconds": round(task.runtime_seconds, 3),
        },
        "created_at": _iso(task.created_at),
        # What the runs' egress proxies refused, once per host per run.
        "blocked": egress_blocked.as_json(egress_blocked.of_task(session, task_id)),
        "lease": None
        if lease is None
        else {
            "holder": lease.holder,
            "heartbeat_at": _iso(lease.heartbeat_at),
            "expires_at": _iso(lease.expires_at),
        },
        "events": [event_json(e) for e in log],
        **leverage_json(session, task),  # its plan and budget hold (plan_store, budget_hold)
        "review_threads": [thread_json(thread) for thread in ledger],
        **pull_view.views_of(session, [task])[task.id].as_json(),  # with ready_for_review
    }


def task_for_issue(session: Session, repo: str, issue: int) -> dict[str, Any] | None:
    """The task of (repo, issue) as Chat's context sees it (the focused issue's task JSON)."""
    task = find_task(session, repo, issue)
    if task is None:
        return None
    last = session.scalar(
        select(TaskEvent).where(TaskEvent.task_id == task.id).order_by(TaskEvent.id.desc()).limit(1)
    )
    return {**task_json(task, last), "question": task.question, "attempts": task.attempts}


MAX_LOG_RUNS = 20


def run_logs(session: Session, task_id: int, *, limit: int = MAX_LOG_RUNS) -> dict[str, Any]:
    """The task's private runtime logs (already redacted), newest run last."""
    get_task(session, task_id)  # 404 for an unknown task
    rows = list(
        session.scalars(
            select(TaskLog)
            .where(TaskLog.task_id == task_id)
            .order_by(TaskLog.id.desc())
            .limit(limit)
        )
    )[::-1]
    return {
        "task": task_id,
        "runs": [
            {
                "generation": row.generation,
                "attempt": row.attempt,
                "status": row.status,
                "at": _iso(row.at),
                "text": row.text,
            }
            for row in rows
        ],
    }
