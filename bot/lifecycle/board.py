"""Board: the views of tasks (the board, a task's detail and log, the focused issue's task)
as the typed task JSON of `bot.contracts.tasks`, and archiving a finished task.

Each view is one read transaction run through `Database.run`; nothing here changes a
task's state (`bot.lifecycle.transition` does).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Literal, TypedDict

import msgspec
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.contracts import tasks as wire
from bot.contracts.errors import ErrorDetail
from bot.db import Database
from bot.errors import Conflict
from bot.lifecycle import egress_blocked, pull_view, tasks
from bot.lifecycle.ci_models import FixRunFacts
from bot.lifecycle.ci_view import fix_history
from bot.lifecycle.leverage_view import leverage
from bot.lifecycle.models import EventKind, ReviewThread, Task, TaskEvent, TaskLease, TaskLog
from bot.lifecycle.review_ledger import excerpt, review_threads
from bot.lifecycle.states import FINISHED, TaskState

MAX_BOARD = 1000
MAX_LOG_RUNS = 20
# The events a card carries the latest of (`BoardTask.review_pickup`, `fix_run`): what the
# events stream's `review` and `fix_run` events tell, for a client that polls the Board.
NEWS_KINDS = (EventKind.REVIEW_PICKUP.value, EventKind.CI_FIX_RUN.value)


def _iso(value: datetime) -> str:
    return value.isoformat()


def last_event(event: TaskEvent | None) -> wire.LastEvent | None:
    if event is None:
        return None
    return wire.LastEvent(kind=event.kind, at=_iso(event.at), detail=event.detail)


class _BoardFields(TypedDict):
    """`TaskCore`'s fields, for the Structs that extend it (BoardTask, TaskDetail, FocusedTask)."""

    id: int
    repo: str
    issue: int
    title: str
    state: str
    archived: bool
    pr_url: str | None
    cost_usd: float
    tokens: int
    last_event: wire.LastEvent | None
    updated_at: str


class _PullFields(TypedDict):
    """`BoardTask`'s pull request loop (bot/lifecycle/pull_view.py)."""

    pr_state: Literal["draft", "open", "merged", "closed"] | None
    review: wire.ReviewCounts
    ready_for_review: bool


def _pull_fields(view: pull_view.PullView) -> _PullFields:
    counts = view.review
    return {
        "pr_state": None if view.pr_state is None else view.pr_state.value,
        "review": wire.ReviewCounts(
            open=counts.open,
            addressed=counts.addressed,
            declined=counts.declined,
            needs_operator=counts.needs_operator,
            summary=counts.words(),
        ),
        "ready_for_review": view.ready_for_review,
    }


def _board_fields(task: Task, last: TaskEvent | None) -> _BoardFields:
    return {
        "id": task.id,
        "repo": task.repo,
        "issue": task.issue,
        "title": task.title,
        "state": task.state,
        "archived": task.archived,
        "pr_url": task.pr_url,
        "cost_usd": task.cost_usd,
        "tokens": task.tokens_used,
        "last_event": last_event(last),
        "updated_at": _iso(task.updated_at),
    }


class _NewsFields(TypedDict):
    """`BoardTask`'s latest review pickup and fix run."""

    review_pickup: wire.ReviewPickup | None
    fix_run: wire.FixRun | None


def _review_pickup(event: TaskEvent) -> wire.ReviewPickup:
    return wire.ReviewPickup(
        event_id=event.id, at=_iso(event.at), threads=list((event.data or {}).get("threads", ()))
    )


def _fix_run(event: TaskEvent) -> wire.FixRun:
    facts = FixRunFacts.of_event(event.data)  # as the events stream's `fix_run` frame
    return wire.FixRun(event_id=event.id, at=_iso(event.at), **asdict(facts))


def _news_fields(events: Iterable[TaskEvent]) -> _NewsFields:
    """The latest review pickup and fix run among a task's `events` (oldest first)."""
    latest = {event.kind: event for event in events if event.kind in NEWS_KINDS}
    pickup = latest.get(EventKind.REVIEW_PICKUP.value)
    run = latest.get(EventKind.CI_FIX_RUN.value)
    return {
        "review_pickup": None if pickup is None else _review_pickup(pickup),
        "fix_run": None if run is None else _fix_run(run),
    }


def latest_news(session: Session, task_ids: list[int]) -> dict[int, list[TaskEvent]]:
    """Each task's latest review pickup and latest fix run event (oldest first)."""
    newest = (
        select(func.max(TaskEvent.id))
        .where(TaskEvent.task_id.in_(task_ids), TaskEvent.kind.in_(NEWS_KINDS))
        .group_by(TaskEvent.task_id, TaskEvent.kind)
    )
    found: dict[int, list[TaskEvent]] = defaultdict(list)
    for event in session.scalars(
        select(TaskEvent).where(TaskEvent.id.in_(newest)).order_by(TaskEvent.id)
    ):
        found[event.task_id].append(event)
    return found


def waiting_question(task: Task) -> str | None:
    """What the task asks, while it waits for a Decision (the Board's and the `task`
    event's `question`: the Dashboard shows it without reading the task)."""
    return task.question if task.state == TaskState.WAITING_FOR_INFO else None


def board_task(
    task: Task, last: TaskEvent | None, view: pull_view.PullView, news: Sequence[TaskEvent] = ()
) -> wire.BoardTask:
    """The board's shape of a task (docs/api.md, "Task lifecycle"); `news`: its latest
    review pickup and fix run events (`latest_news`)."""
    return wire.BoardTask(
        **_board_fields(task, last),
        **_pull_fields(view),
        question=waiting_question(task),
        **_news_fields(news),
    )


def event_view(event: TaskEvent) -> wire.TaskEvent:
    return wire.TaskEvent(
        id=event.id,
        kind=event.kind,
        from_=event.from_state,
        to=event.to_state,
        actor=event.actor,
        at=_iso(event.at),
        detail=event.detail,
        data=event.data,
    )


def thread_view(thread: ReviewThread) -> wire.ReviewThread:
    """A ledger row as the task JSON shows it (docs/api.md, "Review threads")."""
    return wire.ReviewThread(
        kind=thread.kind,  # type: ignore[arg-type]
        root_id=thread.root_id,
        pr_number=thread.pr_number,
        path=thread.path,
        line=thread.line,
        author=thread.author,
        state=thread.state,  # type: ignore[arg-type]
        commit=thread.commit,
        reason=thread.reason,
        url=thread.url,
        picked_at=_iso(thread.picked_at) if thread.picked_at else None,
        excerpt=excerpt(thread.text),  # untrusted: the reviewer's words, shown as text
        created_at=_iso(thread.created_at),
        updated_at=_iso(thread.updated_at),
    )


def blocked_view(found: egress_blocked.BlockedHost) -> wire.BlockedHost:
    return wire.BlockedHost(
        attempt=found.attempt,
        host=found.host,
        port=found.port,
        count=found.count,
        reason=found.reason,
        first_at=_iso(found.first_at),
    )


def board(
    session: Session, *, state: TaskState | None, archived: bool, limit: int
) -> list[wire.BoardTask]:
    """Tasks newest first; archived ones only when asked for."""
    query = select(Task).order_by(Task.updated_at.desc(), Task.id.desc()).limit(limit)
    if state is not None:
        query = query.where(Task.state == state)
    if not archived:
        query = query.where(Task.archived.is_(False))
    found = list(session.scalars(query))
    if not found:
        return []
    latest = (
        select(TaskEvent.task_id, func.max(TaskEvent.id).label("event_id"))
        .where(TaskEvent.task_id.in_([t.id for t in found]))
        .group_by(TaskEvent.task_id)
        .subquery()
    )
    last = {
        event.task_id: event
        for event in session.scalars(
            select(TaskEvent).join(latest, TaskEvent.id == latest.c.event_id)
        )
    }
    views = pull_view.views_of(session, found)  # PR state and ledger counts, per card
    news = latest_news(session, [t.id for t in found])
    return [
        board_task(task, last.get(task.id), views[task.id], news.get(task.id, ())) for task in found
    ]


def task_detail(session: Session, task_id: int) -> wire.TaskDetail:
    """One task with its whole event log, its limits so far and its lease if a run holds one."""
    task = tasks.get_task(session, task_id)
    log = tasks.events(session, task_id)
    lease = session.get(TaskLease, task_id)
    ledger = review_threads(session, task_id)
    view = pull_view.views_of(session, [task])[task.id]
    extra = leverage(session, task)  # its plan and budget hold (plan_store, budget_hold)
    return wire.TaskDetail(
        **_board_fields(task, log[-1] if log else None),
        **_pull_fields(view),
        question=task.question,  # the last question asked, whatever the state
        origin_session=task.origin_session,
        generation=task.generation,
        attempts=task.attempts,
        branch=task.branch,
        pr_number=task.pr_number,
        last_error=task.last_error,
        summary=task.summary,
        runtime_session=task.runtime_session,
        usage=wire.TaskUsage(
            tokens=task.tokens_used,
            cost_usd=task.cost_usd,
            runtime_seconds=round(task.runtime_seconds, 3),
        ),
        created_at=_iso(task.created_at),
        # What the runs' egress proxies refused, once per host per run.
        blocked=[blocked_view(b) for b in egress_blocked.of_task(session, task_id)],
        lease=None
        if lease is None
        else wire.Lease(
            holder=lease.holder,
            heartbeat_at=_iso(lease.heartbeat_at),
            expires_at=_iso(lease.expires_at),
        ),
        events=[event_view(e) for e in log],
        review_threads=[thread_view(thread) for thread in ledger],
        plan=extra.plan,
        held=extra.held,
        estimate=extra.estimate,
        offered=extra.offered,
        draft=extra.draft,
        ci=[
            msgspec.convert(fix, wire.CiFix, from_attributes=True)
            for fix in fix_history(session, task_id)
        ],
        **_news_fields(log),
    )


def _newest_event(session: Session, task_id: int) -> TaskEvent | None:
    return session.scalar(
        select(TaskEvent).where(TaskEvent.task_id == task_id).order_by(TaskEvent.id.desc()).limit(1)
    )


def focused_task(session: Session, repo: str, issue: int) -> wire.FocusedTask | None:
    """The task of (repo, issue) as Chat's context sees it (the focused issue's task)."""
    task = tasks.find_task(session, repo, issue)
    if task is None:
        return None
    return wire.FocusedTask(
        **_board_fields(task, _newest_event(session, task.id)),
        question=task.question,
        attempts=task.attempts,
    )


def run_logs(session: Session, task_id: int, *, limit: int = MAX_LOG_RUNS) -> wire.TaskLog:
    """The task's private runtime logs (already redacted), newest run last."""
    tasks.get_task(session, task_id)  # 404 for an unknown task
    rows = list(
        session.scalars(
            select(TaskLog)
            .where(TaskLog.task_id == task_id)
            .order_by(TaskLog.id.desc())
            .limit(limit)
        )
    )[::-1]
    runs = [
        wire.RunLog(
            generation=row.generation,
            attempt=row.attempt,
            status=row.status,
            at=_iso(row.at),
            text=row.text,
        )
        for row in rows
    ]
    return wire.TaskLog(task=task_id, runs=runs)


def archive_tx(session: Session, task_id: int, actor: str, clock: Clock = utcnow) -> None:
    """Hide a finished task from the board (idempotent); not a state change. A live task
    is refused from a plain read (its run may hold the row: a frozen work horse would make
    the refusal wait); a finished one is read again with its row held, so a pickup that
    brings it back commits before that read (a 409) or after the archive (and shows the
    task again), never in between."""
    for locked in (False, True):
        task = tasks.get_task(session, task_id, locked=locked)
        if task.state not in FINISHED:
            raise Conflict(
                f"task {task_id} is {task.state}; only finished tasks can be archived",
                detail=ErrorDetail(task=task_id, state=task.state),
            )
        if task.archived:
            return
    task.archived = True
    task.updated_at = clock()
    tasks.record(session, task, EventKind.ARCHIVED, actor=actor, detail="archived", clock=clock)


async def archive(
    db: Database, task_id: int, *, actor: str, clock: Clock = utcnow
) -> wire.TaskDetail:
    """Archive, then the task as it is now."""
    await db.run(archive_tx, task_id, actor, clock)
    return await db.run(task_detail, task_id)


def pull_left(session: Session, repo: str, issue: int) -> wire.PullLeft | None:
    """The task of (repo, issue) with its review thread ledger, for Chat's "what is left
    on #N?" (bot.chat.pull_left); None without a task."""
    task = tasks.find_task(session, repo, issue)
    if task is None:
        return None
    view = pull_view.views_of(session, [task])[task.id]
    return wire.PullLeft(
        task=board_task(
            task,
            _newest_event(session, task.id),
            view,
            latest_news(session, [task.id]).get(task.id, ()),
        ),
        threads=[thread_view(thread) for thread in review_threads(session, task.id)],
    )
