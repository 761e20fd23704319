"""Terminating a task, and the terminate intents recorded while a frozen worker held it.

`terminate_tx` is the one transaction that terminates (state + notice). It waits at most
TERMINATE_LOCK_SECONDS for the task's row: when a stuck work horse holds it, the operator's
request is recorded instead (`record`), and whoever next finds that run gone (RQ's handling
of the killed horse, or the reconciler, which stops the job first) applies it (`apply`).
"""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from bot.clock import Clock
from bot.db import Database, bound_lock_wait
from bot.lifecycle import progress, tasks
from bot.lifecycle.models import TaskStopRequest
from bot.lifecycle.outcomes import Change, publish
from bot.lifecycle.progress import Phase
from bot.lifecycle.seams import GitHubApi
from bot.lifecycle.states import LIVE, TaskState

# How long a terminate waits for a task row another process holds before recording the
# request instead (the operator's answer stays well inside a few seconds).
TERMINATE_LOCK_SECONDS = 2.0


def terminate_tx(session: Session, task_id: int, actor: str, clock: Clock) -> Change:
    """Terminate inside one transaction: the state and the notice saying so. Raises
    OperationalError (`bot.db.is_lock_timeout`) when the row stays locked too long."""
    bound_lock_wait(session, TERMINATE_LOCK_SECONDS)
    event = tasks.transition(
        session,
        task_id,
        TaskState.TERMINATED,
        actor=actor,
        detail=f"terminated by {actor}",
        expect=LIVE,
        clock=clock,
    )
    key = f"terminated-e{event.id}"
    text = f"Steelframe stopped working on this issue: terminated by {actor}."
    progress.add_notice(session, task_id, key, text, clock)
    forget(session, task_id)
    return Change(task_id, TaskState.TERMINATED, event.id, Phase.TERMINATED, "", key)


def record(session: Session, task_id: int, actor: str, clock: Clock) -> None:
    """Idempotent: a second request for the same task keeps the first."""
    if session.get(TaskStopRequest, task_id) is None:
        session.add(TaskStopRequest(task_id=task_id, actor=actor, requested_at=clock()))


def pending(session: Session) -> list[tuple[int, str]]:
    rows = session.execute(
        select(TaskStopRequest.task_id, TaskStopRequest.actor).order_by(TaskStopRequest.task_id)
    )
    return [(int(task_id), str(actor)) for task_id, actor in rows]


def requested_by(session: Session, task_id: int) -> str | None:
    row = session.get(TaskStopRequest, task_id)
    return None if row is None else row.actor


def forget(session: Session, task_id: int) -> None:
    session.execute(delete(TaskStopRequest).where(TaskStopRequest.task_id == task_id))


async def apply(
    db: Database, github: GitHubApi | None, task_id: int, actor: str, clock: Clock
) -> bool:
    """Apply a recorded request: True when the task is now terminated, False when it had
    already finished (the request is dropped either way). Raises on a still-locked row."""
    if db.call(tasks.get_task, task_id).state not in LIVE:
        db.call(forget, task_id)
        return False
    change = db.call(terminate_tx, task_id, actor, clock)
    await publish(db, github, change, create_progress=False, clock=clock)
    return True
