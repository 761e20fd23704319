"""Recorded terminate intents: what an operator asked while a frozen worker held the row.

`TaskService.terminate` records one when the task's row lock is not granted within its
bound; the reconciler (every lease period in each worker) stops the job still holding it
and applies the termination once the row is free, then forgets the request.
"""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from bot.clock import Clock
from bot.lifecycle.models import TaskStopRequest


def record(session: Session, task_id: int, actor: str, clock: Clock) -> None:
    """Idempotent: a second request for the same task keeps the first."""
    if session.get(TaskStopRequest, task_id) is None:
        session.add(TaskStopRequest(task_id=task_id, actor=actor, requested_at=clock()))


def pending(session: Session) -> list[tuple[int, str]]:
    rows = session.execute(
        select(TaskStopRequest.task_id, TaskStopRequest.actor).order_by(TaskStopRequest.task_id)
    )
    return [(int(task_id), str(actor)) for task_id, actor in rows]


def forget(session: Session, task_id: int) -> None:
    session.execute(delete(TaskStopRequest).where(TaskStopRequest.task_id == task_id))
