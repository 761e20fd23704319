"""Terminate: an operator stops a live task; and the requests recorded while a frozen
worker held it.

`terminate` is the one way to terminate (state + notice, through `transition`). It waits at most
TERMINATE_LOCK_SECONDS for the task's row: when a stuck work horse holds it, the operator's
request is recorded instead (`record`), and whoever next finds that run gone (RQ's handling
of the killed horse, or the reconciler, which stops the job first) applies it (`apply`).

A retry (running -> queued) never overtakes a recorded request: `unless_requested` decides,
under the task's row lock and in the retry's own transaction, whether to requeue or to
terminate as asked. A check made before that lock is stale: the recovery of a dead run could
read "no request", wait on the row a frozen horse held, and requeue after the operator's
request was recorded meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

import redis
from sqlalchemy import delete, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.contracts.tasks import TaskDetail
from bot.db import Database, is_lock_timeout
from bot.errors import Conflict
from bot.lifecycle import tasks
from bot.lifecycle.board import task_detail
from bot.lifecycle.models import Task, TaskStopRequest
from bot.lifecycle.progress import Phase
from bot.lifecycle.queue import LifecycleQueue
from bot.lifecycle.seams import GitHubApi
from bot.lifecycle.states import LIVE, TaskState
from bot.lifecycle.transition import Move, Transitioned, transition
from bot.lifecycle.transition import apply as apply_move

log = logging.getLogger(__name__)
# How long a terminate waits for a task row another process holds before recording the
# request instead (the operator's answer stays well inside a few seconds).
TERMINATE_LOCK_SECONDS = 2.0


@dataclass(frozen=True)
class Termination:
    """The task after a terminate; `applied` is False when it was recorded for the
    reconciler because a frozen worker held the task's row."""

    detail: TaskDetail
    applied: bool


def terminate_move(actor: str) -> Move:
    """An operator's terminate: only a live task, with a notice saying who stopped it."""
    return Move(
        TaskState.TERMINATED,
        actor=actor,
        detail=f"terminated by {actor}",
        expect=LIVE,
        notice=f"Steelframe stopped working on this issue: terminated by {actor}.",
        phase=Phase.TERMINATED,
    )


async def terminate(
    db: Database,
    github: GitHubApi | None,
    task_id: int,
    actor: str,
    clock: Clock,
    *,
    after_commit: Callable[[Transitioned], Awaitable[None]] | None = None,
) -> Transitioned:
    """Terminate: the state and its notice in one transaction that waits at most
    TERMINATE_LOCK_SECONDS for the task's row (OperationalError, `bot.db.is_lock_timeout`,
    when it stays locked), a recorded request forgotten with it, then GitHub. An existing
    progress comment is edited, none is started (a task terminated before it ran)."""
    return await transition(
        db,
        github,
        task_id,
        terminate_move(actor),
        clock=clock,
        create_progress=False,
        lock_wait=TERMINATE_LOCK_SECONDS,
        within=lambda session, _moved: forget(session, task_id),
        after_commit=after_commit,
    )


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


@dataclass(frozen=True)
class Decided:
    """What `unless_requested` committed: the caller's move, or (`terminated_by` set) the
    terminate an operator had recorded, in its place."""

    moved: Transitioned
    terminated_by: str | None = None


def unless_requested(session: Session, task_id: int, move: Move, clock: Clock) -> Decided:
    """`move` (a retry), or the recorded terminate in its place (its event, notice and the
    request's removal), decided in this transaction once it holds the task's row: a request
    committed before that is seen; a terminate that tries while it is held waits and then
    finds the outcome. The terminate keeps the move's `expect` and `fence`: it moves only
    what the retry would have moved."""
    if move.fence is not None:
        tasks.hold(session, task_id, move.fence, clock)  # the lease row first, as every run does
    session.execute(select(Task.id).where(Task.id == task_id).with_for_update())
    actor = requested_by(session, task_id)
    if actor is None:
        return Decided(apply_move(session, task_id, move, clock))
    instead = replace(terminate_move(actor), expect=move.expect, fence=move.fence)
    moved = apply_move(session, task_id, instead, clock)
    forget(session, task_id)
    return Decided(moved, terminated_by=actor)


async def apply(
    db: Database, github: GitHubApi | None, task_id: int, actor: str, clock: Clock
) -> bool:
    """Apply a recorded request: True when the task is now terminated, False when it had
    already finished (the request is dropped either way). Raises on a still-locked row."""
    if (await db.run(tasks.get_task, task_id)).state not in LIVE:
        await db.run(forget, task_id)
        return False
    await terminate(db, github, task_id, actor, clock)
    return True


@dataclass(frozen=True, kw_only=True)
class Terminations:
    """Operators' terminates (built once by the composition root)."""

    db: Database
    queue: LifecycleQueue
    github: GitHubApi | None
    clock: Clock = utcnow

    async def terminate(self, task_id: int, *, actor: str) -> Termination:
        """Stop a queued, running or waiting task: the state first (a running job notices
        within a second, kills its runtime and removes its worktree; the reconciler asks RQ
        to stop a job that does not), a queued job cancelled, a comment, the labels.

        Bounded: when a frozen worker holds the task's row past the lock bound
        (`TERMINATE_LOCK_SECONDS`), the request is recorded instead
        (`applied=False`); the run's recovery or the reconciler applies it."""
        task = await self.db.run(tasks.get_task, task_id)
        if task.state not in LIVE:
            raise Conflict(
                f"task {task_id} is {task.state}; only queued, running or waiting tasks "
                "can be terminated",
                detail={"task": task_id, "state": task.state},
            )

        async def cancel_job(_moved: Transitioned) -> None:
            try:
                cancelled: bool | str = await asyncio.to_thread(
                    self.queue.cancel_queued, task.job_id
                )
            except redis.RedisError as exc:
                # The state change is what stops the task: a job that runs later finds the
                # task terminated and does nothing, so the cancel is only a tidy-up.
                cancelled = f"no, Redis unreachable ({type(exc).__name__}); the job will skip it"
            log.info(
                "lifecycle: task %s terminated by %s (queued job cancelled: %s)",
                task_id,
                actor,
                cancelled,
            )

        try:
            await terminate(
                self.db, self.github, task_id, actor, self.clock, after_commit=cancel_job
            )
        except OperationalError as exc:
            if not is_lock_timeout(exc):
                raise
            await self.db.run(record, task_id, actor, self.clock)
            log.warning(
                "lifecycle: task %s is locked by a worker that does not answer; terminate by "
                "%s recorded for the reconciler",
                task_id,
                actor,
            )
            return Termination(await self.db.run(task_detail, task_id), applied=False)
        return Termination(await self.db.run(task_detail, task_id), applied=True)
