"""Report what a database transaction changed once it commits: task transitions, task
results written to a chat session, and review pickups (a review run took threads up).

The task event log and the chat turns are the truth; this mirrors each committed row onto
the operator events stream, so every path that changes a task (workers, the reconciler, a
webhook, an operator) is reported without each having to remember to. Rows are collected
after each flush and announced after the commit; a rollback drops them.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from bot.db import Database
from bot.events import ledger
from bot.events.publisher import (
    FixRunStarted,
    OperatorEvents,
    ResultMessage,
    ReviewPicked,
    TaskChange,
)
from bot.lifecycle.models import EventKind, TaskEvent
from bot.models import ChatTurn

log = logging.getLogger(__name__)
INFO_KEY = "steelframe.events"
TASK_RESULT = "task_result"  # ChatTurn.meta["kind"] of a delivered task result
_STATE_EVENTS = frozenset({EventKind.CREATED.value, EventKind.TRANSITION.value})
# Session factories already watched: a worker context sharing the web service's Database
# (dev mode, tests) must not report every change twice.
_watched: weakref.WeakSet[sessionmaker[Session]] = weakref.WeakSet()


@dataclass
class _Pending:
    tasks: list[TaskChange] = field(default_factory=list)
    results: list[ResultMessage] = field(default_factory=list)
    reviews: list[ReviewPicked] = field(default_factory=list)
    fix_runs: list[FixRunStarted] = field(default_factory=list)
    ledgers: set[int] = field(default_factory=set)  # tasks whose review threads changed


def watch_commits(db: Database, events: OperatorEvents) -> None:
    """Announce task transitions and delivered results committed through `db` (once per
    session factory, whoever calls this first)."""
    maker = db.sessions
    if maker in _watched:
        return
    _watched.add(maker)

    @event.listens_for(maker, "after_flush")
    def _collect(session: Session, _context: Any) -> None:
        pending: _Pending | None = None
        for row in (*session.new, *session.dirty):
            if (task_id := ledger.ledger_task(row)) is not None:
                pending = pending or session.info.setdefault(INFO_KEY, _Pending())
                pending.ledgers.add(task_id)
        for row in session.new:
            found = _task_change(row) or _result(row) or _review(row) or _fix_run(row)
            if found is None:
                continue
            pending = pending or session.info.setdefault(INFO_KEY, _Pending())
            if isinstance(found, TaskChange):
                pending.tasks.append(found)
            elif isinstance(found, ReviewPicked):
                pending.reviews.append(found)
            elif isinstance(found, FixRunStarted):
                pending.fix_runs.append(found)
            else:
                pending.results.append(found)

    @event.listens_for(maker, "after_commit")
    def _announce(session: Session) -> None:
        pending = session.info.pop(INFO_KEY, None)
        if pending is None:
            return
        try:
            events.tasks_changed(pending.tasks)
            events.results_delivered(pending.results)
            events.reviews_picked(pending.reviews)
            events.fix_runs_started(pending.fix_runs)
            ledger.announce(events, pending.ledgers)
        except Exception as exc:  # the change is committed; its notice is best-effort
            log.warning("events: committed changes not announced: %s", type(exc).__name__)
            events.missed(None)  # who missed it could not be read: everyone reloads

    @event.listens_for(maker, "after_rollback")
    def _forget(session: Session) -> None:
        session.info.pop(INFO_KEY, None)


def _task_change(row: object) -> TaskChange | None:
    if not isinstance(row, TaskEvent) or row.kind not in _STATE_EVENTS or not row.to_state:
        return None
    return TaskChange(row.task_id, str(row.to_state), row.detail or "", row.at)


def _review(row: object) -> ReviewPicked | None:
    if not isinstance(row, TaskEvent) or row.kind != EventKind.REVIEW_PICKUP.value:
        return None
    threads = (row.data or {}).get("threads") or []
    return ReviewPicked(row.task_id, [str(each) for each in threads], row.at)


def _fix_run(row: object) -> FixRunStarted | None:
    if not isinstance(row, TaskEvent) or row.kind != EventKind.CI_FIX_RUN:
        return None
    data = row.data or {}
    return FixRunStarted(
        task_id=row.task_id,
        pr_number=int(data.get("pr_number") or 0),
        head_sha=str(data.get("head_sha") or ""),
        checks=tuple(str(name) for name in data.get("checks") or ()),
        run=int(data.get("fix_run") or 0),
        of=int(data.get("fix_runs") or 0),
    )


def _result(row: object) -> ResultMessage | None:
    if not isinstance(row, ChatTurn) or (row.meta or {}).get("kind") != TASK_RESULT:
        return None
    meta = row.meta
    return ResultMessage(
        message_id=row.id,
        session_id=row.session_id,
        task_id=int(meta.get("task_id") or 0),
        state=str(meta.get("state") or ""),
        text=row.content,
    )
