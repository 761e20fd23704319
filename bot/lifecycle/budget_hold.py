"""A queued task of a repository over its daily or monthly budget waits (budget_ledger):
the reason recorded on the task once, and its run enqueued again for when the period
turns (looking again every ten minutes meanwhile, for a budget raised). Decided by a run
before it starts, in the transaction that starts it once it holds the task's row
(`run._attempt`): an operator's recorded terminate comes first (the task is terminated, not
held), a hold next (the task stays `queued` and nothing runs), the attempt last."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from rq.job import JobStatus
from sqlalchemy.orm import Session

from bot.lifecycle import budget_ledger, tasks
from bot.lifecycle.context import LifecycleContext
from bot.lifecycle.leverage_view import HOLD_ACTOR
from bot.lifecycle.models import EventKind
from bot.lifecycle.queue import LifecycleQueue, job_id
from bot.lifecycle.states import TaskState

log = logging.getLogger(__name__)
# A held task looks again this often, so a budget raised meanwhile (the workers restarted
# with the new setting) lets it start without waiting for the period to turn.
RECHECK_SECONDS = 600.0


@dataclass(frozen=True)
class Hold:
    """Why the task may not start now, and its run for later (`enqueue` it after the
    commit)."""

    task_id: int
    reason: str
    job: str
    delay: float
    # False: a re-check of the task waits already (`job`, another run's): none is added.
    enqueue: bool = True


def hold(session: Session, ctx: LifecycleContext, task_id: int) -> Hold | None:
    """In the caller's transaction, which holds the task's row: the hold on a queued task
    (its reason noted, its job id set), or None."""
    task = tasks.get_task(session, task_id)
    if task.state != TaskState.QUEUED:
        return None  # a resumed or running task finishes its leg
    now = ctx.clock()
    found = budget_ledger.hold(session, ctx.settings, task.repo, now)
    if found is None:
        return None
    # Two runs of a held task (two workers' jobs for it) each enqueued a re-check, and each
    # re-check enqueued the next: two chains for good. The one already waiting is kept.
    waiting = _queue(ctx).status(task.job_id) == JobStatus.SCHEDULED
    job = str(task.job_id) if waiting else job_id(task.id, task.generation, "hold")
    _note(session, task.id, found.reason, job, ctx)
    delay = min(max((found.until - now).total_seconds(), 1.0), RECHECK_SECONDS)
    return Hold(task.id, found.reason, job, delay, enqueue=not waiting)


def _queue(ctx: LifecycleContext) -> LifecycleQueue:
    return LifecycleQueue(ctx.redis, name=ctx.queue_name, time_limit=ctx.policy.time_limit)


def enqueue(ctx: LifecycleContext, held: Hold) -> None:
    """The held task's run, enqueued again for later (after the hold is committed), unless
    a re-check of it waits already."""
    if held.enqueue:
        _queue(ctx).enqueue(held.task_id, job=held.job, delay=held.delay)
    log.info("lifecycle: task %s %s", held.task_id, held.reason)


def _note(session: Session, task_id: int, reason: str, job: str, ctx: LifecycleContext) -> None:
    """The reason on the task once per hold (a run tried again says nothing new)."""
    task = tasks.get_task(session, task_id)
    tasks.touch(session, task_id, ctx.clock, job_id=job)
    last = tasks.events(session, task_id, limit=1)
    if last and last[0].kind == EventKind.NOTE and last[0].detail == reason:
        return
    tasks.record(session, task, EventKind.NOTE, actor=HOLD_ACTOR, detail=reason, clock=ctx.clock)
