"""A queued task of a repository over its daily or monthly budget waits (budget_ledger):
the reason recorded on the task once, and its run enqueued again for when the period
turns (looking again every ten minutes meanwhile, for a budget raised). Called by a run
before it starts, so the task stays `queued` and nothing runs."""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from bot.lifecycle import budget_ledger, tasks
from bot.lifecycle.context import LifecycleContext
from bot.lifecycle.leverage_view import HOLD_ACTOR
from bot.lifecycle.models import EventKind, Task
from bot.lifecycle.queue import LifecycleQueue, job_id
from bot.lifecycle.states import TaskState

log = logging.getLogger(__name__)
# A held task looks again this often, so a budget raised meanwhile (the workers restarted
# with the new setting) lets it start without waiting for the period to turn.
RECHECK_SECONDS = 600.0


def held(ctx: LifecycleContext, task: Task) -> str | None:
    """The reason `task` may not start now (its run enqueued again for later), or None."""
    if task.state != TaskState.QUEUED:
        return None  # a resumed or running task finishes its leg
    now = ctx.clock()
    found = ctx.db.call(budget_ledger.hold, ctx.settings, task.repo, now)
    if found is None:
        return None
    job = job_id(task.id, task.generation, "hold")
    ctx.db.call(_note, task.id, found.reason, job, ctx)
    delay = min(max((found.until - now).total_seconds(), 1.0), RECHECK_SECONDS)
    queue = LifecycleQueue(ctx.redis, name=ctx.queue_name, time_limit=ctx.policy.time_limit)
    queue.enqueue(task.id, job=job, delay=delay)
    log.info("lifecycle: task %s %s", task.id, found.reason)
    return found.reason


def _note(session: Session, task_id: int, reason: str, job: str, ctx: LifecycleContext) -> None:
    """The reason on the task once per hold (a run tried again says nothing new)."""
    task = tasks.get_task(session, task_id)
    tasks.touch(session, task_id, ctx.clock, job_id=job)
    last = tasks.events(session, task_id, limit=1)
    if last and last[0].kind == EventKind.NOTE and last[0].detail == reason:
        return
    tasks.record(session, task, EventKind.NOTE, actor=HOLD_ACTOR, detail=reason, clock=ctx.clock)
