"""`ledger` events: a task's review thread ledger changed (a thread recorded, addressed,
declined or handed to the operator), so the Board card's counts and "ready for review"
follow live (docs/api.md, "Events"). bot.events.commits collects the tasks whose ledger rows
a transaction wrote; this reads their views after the commit and tells every operator (the
Board is shared). Best-effort, as every event: the ledger itself is in the task JSON."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.events.publisher import EventType, OperatorEvents
from bot.lifecycle import pull_view
from bot.lifecycle.models import ReviewThread, Task
from bot.models import Operator


def ledger_task(row: object) -> int | None:
    """The task whose ledger `row` is a row of (None: not a ledger row)."""
    return row.task_id if isinstance(row, ReviewThread) else None


def announce(events: OperatorEvents, task_ids: set[int]) -> None:
    if not task_ids:
        return
    payloads, operators = events.db.call(_payloads, task_ids)
    for payload in payloads:
        events.append(operators, EventType.LEDGER, payload)


def _payloads(session: Session, task_ids: set[int]) -> tuple[list[dict[str, Any]], list[int]]:
    tasks = list(session.scalars(select(Task).where(Task.id.in_(task_ids)).order_by(Task.id)))
    views = pull_view.views_of(session, tasks)
    payloads = [
        {
            "task_id": task.id,
            "repo": task.repo,
            "issue": task.issue,
            "title": task.title,
            "state": task.state,
            "pr_url": task.pr_url,
            **views[task.id].as_json(),
        }
        for task in tasks
    ]
    return payloads, list(session.scalars(select(Operator.id)))
