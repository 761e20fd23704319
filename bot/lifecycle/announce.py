"""Announce what a database transaction changed once it commits: task transitions, task
results written to a chat session, review pickups, fix runs and review ledger changes, as
the events stream's frames (bot.contracts.events).

The task event log and the chat turns are the truth; this mirrors each committed row onto
the operator events stream, so every path that changes a task (workers, the reconciler, a
webhook, an operator) is reported without each having to remember to. Rows are collected
after each flush and announced after the commit; a rollback drops them.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import asdict, dataclass, field
from datetime import datetime

from sqlalchemy import event, select
from sqlalchemy.orm import Session, UOWTransaction, sessionmaker

from bot.contracts.events import (
    EventFrame,
    FixRunFrame,
    LedgerCounts,
    LedgerFrame,
    ResultFrame,
    ResultKind,
    ReviewFrame,
    TaskFrame,
)
from bot.db import Database
from bot.events import OperatorEvents
from bot.lifecycle import pull_view
from bot.lifecycle.ci_models import FixRunFacts
from bot.lifecycle.delivery import posts_result
from bot.lifecycle.models import EventKind, ReviewThread, Task, TaskEvent
from bot.lifecycle.states import TaskState
from bot.models import ChatTurn

log = logging.getLogger(__name__)
INFO_KEY = "steelframe.events"
TASK_RESULT = "task_result"  # ChatTurn.meta["kind"] of a delivered task result
_STATE_EVENTS = frozenset({EventKind.CREATED.value, EventKind.TRANSITION.value})
# Session factories already watched: a worker context sharing the web service's Database
# (dev mode, tests) must not report every change twice.
_watched: weakref.WeakSet[sessionmaker[Session]] = weakref.WeakSet()


# Keyed by the state's text, as a result's ChatTurn.meta["state"] stores it.
RESULT_KIND: dict[str, ResultKind] = {
    TaskState.DELIVERED: ResultKind.DELIVERED,
    TaskState.WAITING_FOR_INFO: ResultKind.QUESTION,
    TaskState.FAILED: ResultKind.FAILED,
}
RESULT_TEXT_LIMIT = 4000


@dataclass(frozen=True)
class TaskChange:
    """One committed transition of a task (its event row), before the task is read."""

    task_id: int
    state: str
    reason: str
    at: datetime
    posts_result: bool = False  # its result goes to the task's chat session next


@dataclass(frozen=True)
class ReviewPick:
    """A review run took threads up (its `review_pickup` event row), before the task is read."""

    task_id: int
    threads: list[str]  # "comment:<id>" / "review:<id>"
    at: datetime


@dataclass
class _Pending:
    tasks: list[TaskChange] = field(default_factory=list)
    results: list[ResultFrame] = field(default_factory=list)
    reviews: list[ReviewPick] = field(default_factory=list)
    fix_runs: list[FixRunFrame] = field(default_factory=list)
    ledgers: set[int] = field(default_factory=set)  # tasks whose review threads changed


def watch_commits(db: Database, events: OperatorEvents) -> None:
    """Announce task transitions and delivered results committed through `db` (once per
    session factory, whoever calls this first)."""
    maker = db.sessions
    if maker in _watched:
        return
    _watched.add(maker)

    @event.listens_for(maker, "after_flush")
    def _collect(session: Session, _context: UOWTransaction) -> None:
        pending: _Pending | None = None
        for row in (*session.new, *session.dirty):
            if isinstance(row, ReviewThread):
                pending = pending or session.info.setdefault(INFO_KEY, _Pending())
                pending.ledgers.add(row.task_id)
        for row in session.new:
            found = _task_change(row) or _result(row) or _review(row) or _fix_run(row)
            if found is None:
                continue
            pending = pending or session.info.setdefault(INFO_KEY, _Pending())
            if isinstance(found, TaskChange):
                pending.tasks.append(found)
            elif isinstance(found, ReviewPick):
                pending.reviews.append(found)
            elif isinstance(found, FixRunFrame):
                pending.fix_runs.append(found)
            else:
                pending.results.append(found)

    @event.listens_for(maker, "after_commit")
    def _announce(session: Session) -> None:
        pending = session.info.pop(INFO_KEY, None)
        if pending is None:
            return
        try:
            if pending.tasks:
                events.tasks_changed(db.call(_task_frames, pending.tasks))
            events.results_delivered(pending.results)
            board: list[EventFrame] = []
            if pending.reviews or pending.ledgers:
                board += db.call(_board_frames, pending.reviews, pending.ledgers)
            events.to_everyone([*board, *pending.fix_runs])
        except Exception as exc:  # the change is committed; its notice is best-effort
            log.warning("events: committed changes not announced: %s", type(exc).__name__)
            events.missed(None)  # who missed it could not be read: everyone reloads

    @event.listens_for(maker, "after_rollback")
    def _forget(session: Session) -> None:
        session.info.pop(INFO_KEY, None)


def _task_change(row: object) -> TaskChange | None:
    if not isinstance(row, TaskEvent) or row.kind not in _STATE_EVENTS or not row.to_state:
        return None
    return TaskChange(row.task_id, str(row.to_state), row.detail or "", row.at, posts_result(row))


def _review(row: object) -> ReviewPick | None:
    if not isinstance(row, TaskEvent) or row.kind != EventKind.REVIEW_PICKUP.value:
        return None
    return ReviewPick(row.task_id, list((row.data or {}).get("threads", ())), row.at)


def _fix_run(row: object) -> FixRunFrame | None:
    if not isinstance(row, TaskEvent) or row.kind != EventKind.CI_FIX_RUN:
        return None
    return FixRunFrame(task_id=row.task_id, **asdict(FixRunFacts.of_event(row.data)))


def _result(row: object) -> ResultFrame | None:
    if not isinstance(row, ChatTurn) or (row.meta or {}).get("kind") != TASK_RESULT:
        return None
    meta = row.meta or {}
    state = str(meta.get("state") or "")
    return ResultFrame(
        session_id=row.session_id,
        task_id=int(meta.get("task_id") or 0),
        kind=RESULT_KIND.get(state, ResultKind.FAILED),
        text=row.content[:RESULT_TEXT_LIMIT],
        message_id=row.id,
    )


def _board_frames(
    session: Session, reviews: list[ReviewPick], ledgers: set[int]
) -> list[EventFrame]:
    """Review pickups and ledger changes as frames, each task read as it is now."""
    ids = {pick.task_id for pick in reviews} | ledgers
    rows = {
        t.id: t for t in session.scalars(select(Task).where(Task.id.in_(ids)).order_by(Task.id))
    }
    frames: list[EventFrame] = [
        ReviewFrame(
            task_id=task.id,
            repo=task.repo,
            issue=task.issue,
            pr_number=task.pr_number,
            pr_url=task.pr_url,
            threads=pick.threads,
            at=pick.at.isoformat(),
        )
        for pick in reviews
        if (task := rows.get(pick.task_id)) is not None
    ]
    changed = [rows[task_id] for task_id in sorted(ledgers) if task_id in rows]
    views = pull_view.views_of(session, changed)
    for task in changed:
        view = views[task.id]
        frames.append(
            LedgerFrame(
                task_id=task.id,
                repo=task.repo,
                issue=task.issue,
                title=task.title,
                state=task.state,
                pr_url=task.pr_url,
                pr_state=None if view.pr_state is None else view.pr_state.value,
                review=_counts(view),
                ready_for_review=view.ready_for_review,
            )
        )
    return frames


def _counts(view: pull_view.PullView) -> LedgerCounts:
    return LedgerCounts(
        open=view.review.open,
        addressed=view.review.addressed,
        declined=view.review.declined,
        needs_operator=view.review.needs_operator,
        summary=view.review.words(),
    )


def _task_frames(session: Session, changes: list[TaskChange]) -> list[TaskFrame]:
    """The frames of these changes, with each task as it is now (a task deleted since is
    left out) and its card's pull request loop, as the Board lists it."""
    ids = {change.task_id for change in changes}
    rows = {task.id: task for task in session.scalars(select(Task).where(Task.id.in_(ids)))}
    views = pull_view.views_of(session, list(rows.values()))
    return [
        task_frame(rows[change.task_id], change, views[change.task_id])
        for change in changes
        if change.task_id in rows
    ]


def task_frame(task: Task, change: TaskChange, view: pull_view.PullView) -> TaskFrame:
    return TaskFrame(
        task_id=task.id,
        repo=task.repo,
        issue=task.issue,
        title=task.title,
        state=change.state,
        pr_url=task.pr_url,
        cost_usd=task.cost_usd,
        tokens=task.tokens_used,
        reason=change.reason,
        updated_at=change.at.isoformat(),
        pr_state=None if view.pr_state is None else view.pr_state.value,
        review=_counts(view),
        ready_for_review=view.ready_for_review,
        # What it asks, while this change leaves it waiting (the Dashboard shows it).
        question=task.question if change.state == TaskState.WAITING_FOR_INFO else None,
        result_session=task.origin_session if change.posts_result else None,
    )
