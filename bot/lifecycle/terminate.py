"""Terminate: an operator stops a live task; and the requests recorded while a frozen
worker held it.

`terminate` is the one way to terminate (state + notice, through `transition`). The
operator's terminate (`Terminations.terminate`) first records its request (`record`, its own
committed transaction, which never waits on the task's row), then terminates, waiting at most
TERMINATE_LOCK_SECONDS for the task's row; that transaction forgets the request. When a stuck
work horse holds the row past the bound, or the database fails after the request was
committed, the request stays recorded (the operator is told so: `Termination.applied` is
False, HTTP 202) and whoever next takes the task's row applies it: the run's own ending, its
recovery (RQ's handling of the killed horse), a retry, the next attempt's start, or the
reconciler, which stops a job still holding the row first (`apply`).

Nothing a run would do next overtakes a recorded request: a run's ending (delivered, a
question asked, a retry, a final failure) and an attempt's start (a budget hold included)
each decide under the task's row lock, in their own transaction, whether to go on or to
terminate as asked (`unless_requested`, `held_request`; the terminate itself is
`terminate_instead`, the one state change of that decision). A task whose pull request is
already open keeps it, and every terminate's event and notice say so (`terminate_move`).
The order is the row: a request committed before a decider took the row is seen by it; a
decider that took the row first committed before the operator's terminate gets the row, and
that terminate then ends what the decider left (a queued or waiting task is terminated at
once, a queued job cancelled; a delivered one is finished, the request dropped, 409). A
check made before that lock is stale: a recovery could read "no request", wait on the row a
frozen horse held, and requeue after the request was recorded.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

import msgspec
import redis
from sqlalchemy import delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.contracts.errors import ErrorDetail
from bot.contracts.tasks import EventData, TaskDetail
from bot.db import Database, bound_lock_wait, is_lock_timeout
from bot.errors import Conflict
from bot.lifecycle import base_store, ci_store, tasks
from bot.lifecycle.board import task_detail
from bot.lifecycle.ci_models import CiFixState
from bot.lifecycle.models import Task, TaskStopRequest
from bot.lifecycle.progress import Phase
from bot.lifecycle.queue import LifecycleQueue
from bot.lifecycle.seams import GitHubApi
from bot.lifecycle.states import LIVE, IllegalTransition, TaskState
from bot.lifecycle.transition import Move, Transitioned, publish
from bot.lifecycle.transition import apply as apply_move

log = logging.getLogger(__name__)
# How long a terminate waits for a task row another process holds before recording the
# request instead (the operator's answer stays well inside a few seconds).
TERMINATE_LOCK_SECONDS = 2.0


@dataclass(frozen=True)
class Termination:
    """The task after a terminate; `applied` is False when its request stays recorded, to be
    applied later: a frozen worker held the task's row, or the database failed after the
    request was committed."""

    detail: TaskDetail
    applied: bool


def terminate_move(actor: str, task: Task) -> Move:
    """An operator's terminate of `task` (read once this transaction holds its row): only a
    live task, with a notice saying who stopped it. Every terminate's move is built here, the
    operator's own (`terminate`) and one in place of a run's step (`terminate_instead`).

    A task whose pull request is already open (a run that delivered, a fix run on its pull
    request, a task waiting for a person after its CI failed) says so in the event
    (`pr_url`, `pr_number`) and the notice, and the pull request is left as it is. It is not
    closed: the terminate stops Steelframe's work on the issue, it does not judge work
    already shown; had a run ended a moment before the terminate, the task would be
    `delivered` with the same pull request open (a terminate then answers 409), so either
    side of that race leaves the same pull request; and closing it would throw away what a
    reviewer may already be reading, while the person who wants it gone closes it in one
    click (the notice links it). Merged later, it makes the task `merged` after all
    (`bot.lifecycle.pull_end`)."""
    notice = f"Steelframe stopped working on this issue: terminated by {actor}."
    data: EventData | None = None
    if task.pr_url:
        data = {"pr_url": task.pr_url, "pr_number": task.pr_number}
        notice = f"{notice} Its pull request {task.pr_url} was already open; it is left as it is."
    return Move(
        TaskState.TERMINATED,
        actor=actor,
        detail=f"terminated by {actor}",
        data=data,
        expect=LIVE,
        notice=notice,
        phase=Phase.TERMINATED,
    )


async def terminate(
    db: Database,
    github: GitHubApi | None,
    task_id: int,
    actor: str,
    clock: Clock,
    *,
    cancel_job: Callable[[str | None], Awaitable[None]] | None = None,
) -> Transitioned:
    """Terminate: the state and its notice in one transaction that waits at most
    TERMINATE_LOCK_SECONDS for the task's row (OperationalError, `bot.db.is_lock_timeout`,
    when it stays locked), a recorded request forgotten with it, then GitHub. `cancel_job`
    is given the task's job as that transaction saw it (a retry that took the row first set
    a new one), after the commit. An existing progress comment is edited, none is started
    (a task terminated before it ran)."""

    def unit(session: Session) -> tuple[Transitioned, str | None]:
        bound_lock_wait(session, TERMINATE_LOCK_SECONDS)
        # The row first, then the task as the move reads it (its pull request): a run
        # recording its pull request cannot slip in between.
        hold_row(session, task_id)
        task = tasks.get_task(session, task_id)
        waiting = task.state == TaskState.WAITING_FOR_INFO
        moved = apply_move(session, task_id, terminate_move(actor, task), clock)
        if waiting:  # no run holds its fix or update run (it asked a question): none will end it
            ci_store.end_pending(session, task_id, clock, state=CiFixState.ENDED)
            base_store.end_pending(session, task_id, clock)
        forget(session, task_id)
        return moved, tasks.get_task(session, task_id).job_id

    moved, job = await db.run(unit)
    if cancel_job is not None:
        await cancel_job(job)
    published = await publish(db, github, moved, create_progress=False, clock=clock)
    return replace(moved, published=published)


def record(session: Session, task_id: int, actor: str, clock: Clock) -> None:
    """Idempotent: a second request for the same task keeps the first (one statement, so
    two operators recording at once do not collide on the key)."""
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    session.execute(
        insert(TaskStopRequest)
        .values(task_id=task_id, actor=actor, requested_at=clock())
        .on_conflict_do_nothing()
    )


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


def hold_row(session: Session, task_id: int) -> None:
    """Take the task's row for the rest of this transaction: a write that changes nothing.
    On PostgreSQL it row-locks it against every other writer (a state change, a terminate);
    on SQLite (no row locks) it takes the database's write lock, as a FOR UPDATE read does
    there (bot/db.py), so a request committed after it cannot go unseen."""
    session.execute(
        update(Task)
        .where(Task.id == task_id)
        .values(updated_at=Task.updated_at)
        .execution_options(synchronize_session=False)
    )


def held_request(
    session: Session, task_id: int, *, fence: str | None = None, clock: Clock = utcnow
) -> str | None:
    """Who asked to terminate the task (None: nobody), read once this transaction holds
    the task's row (`hold_row`; the run's lease row first when fenced, as every run takes
    them): a request committed before that is seen; a terminate that tries while the row
    is held waits, then finds what this transaction did."""
    if fence is not None:
        tasks.hold(session, task_id, fence, clock)
    hold_row(session, task_id)
    return requested_by(session, task_id)


def terminate_instead(
    session: Session, task_id: int, actor: str, move: Move, clock: Clock
) -> Transitioned:
    """The recorded terminate in place of `move`, and the request's removal. It keeps the
    move's `expect` and `fence` (it moves only what `move` would have moved), and its event
    keeps what `move` would have logged: its words after "instead of", and a failure's
    `error` and `limit` (the error stays the task's `last_error` too). A pull request
    already open is named as every terminate names it (`terminate_move`)."""
    asked = terminate_move(actor, tasks.get_task(session, task_id))
    kept: EventData = asked.data.copy() if asked.data else {}
    if move.data is not None:
        if "error" in move.data:
            kept["error"] = move.data["error"]
        if "limit" in move.data:
            kept["limit"] = move.data["limit"]
    changes: tasks.TaskChanges | None = None
    if "error" in kept:
        changes = {"last_error": kept["error"]}
    instead = replace(
        asked,
        detail=f"{asked.detail}, instead of: {move.detail or move.wanted}"[:500],
        data=kept or None,
        expect=move.expect,
        fence=move.fence,
        changes=changes,
    )
    moved = apply_move(session, task_id, instead, clock)
    forget(session, task_id)
    return moved


@dataclass(frozen=True)
class Decided:
    """What `unless_requested` committed: the caller's move, or (`terminated_by` set) the
    terminate an operator had recorded, in its place."""

    moved: Transitioned
    terminated_by: str | None = None


def unless_requested(session: Session, task_id: int, move: Move, clock: Clock) -> Decided:
    """`move` (a run's ending, an attempt's start), or the recorded terminate in
    its place (`terminate_instead`), decided in this transaction once it holds the task's
    row (`held_request`)."""
    actor = held_request(session, task_id, fence=move.fence, clock=clock)
    if actor is None:
        return Decided(apply_move(session, task_id, move, clock))
    return Decided(terminate_instead(session, task_id, actor, move, clock), terminated_by=actor)


async def apply(
    db: Database, github: GitHubApi | None, task_id: int, actor: str, clock: Clock
) -> bool:
    """Apply a recorded request: True when the task is now terminated by it, False when it
    had already finished, or someone terminated it first (the request is dropped either way:
    a terminate forgets it in its own transaction). Raises on a still-locked row."""
    if (await db.run(tasks.get_task, task_id)).state not in LIVE:
        await db.run(forget_finished, task_id)
        return False
    try:
        await terminate(db, github, task_id, actor, clock)
    except IllegalTransition:
        await db.run(forget_finished, task_id)
        return False
    return True


def forget_finished(session: Session, task_id: int) -> None:
    """Drop the task's request once it is moot: the task is no longer live."""
    if tasks.get_task(session, task_id).state not in LIVE:
        forget(session, task_id)


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

        Bounded: the request is recorded first; when the terminate cannot be applied now,
        it stays recorded (`applied=False`) and the run's ending, its recovery, the retry,
        the next attempt's start or the reconciler applies it, whichever takes the row
        first. That is a frozen worker holding the task's row past the lock bound
        (`TERMINATE_LOCK_SECONDS`), or any database failure after the request was
        committed (the database went away): the answer says what is true, recorded and to
        be applied, never a failure for a request that stands. A failure before the request
        is committed raises (nothing recorded; the operator retries)."""
        before = await self.db.run(task_detail, task_id)
        if before.state not in LIVE:
            raise Conflict(
                f"task {task_id} is {before.state}; only queued, running or waiting tasks "
                "can be terminated",
                detail=ErrorDetail(task=task_id, state=before.state),
            )

        # The request first, in its own committed transaction (it never waits on the
        # task's row): from here on nothing that would start a new attempt passes it
        # (`unless_requested`), and the terminate below forgets it with the state change.
        await self.db.run(record, task_id, actor, self.clock)

        async def cancel_job(job: str | None) -> None:
            try:
                cancelled: bool | str = await asyncio.to_thread(self.queue.cancel_queued, job)
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
            await terminate(self.db, self.github, task_id, actor, self.clock, cancel_job=cancel_job)
        except IllegalTransition as exc:
            # It finished meanwhile, or its request was applied first (the reconciler, a
            # retry or an attempt's start terminating as asked): the latter is this answer.
            await self.db.run(forget_finished, task_id)
            if exc.current != TaskState.TERMINATED:
                raise
        except SQLAlchemyError as exc:
            _not_applied(task_id, actor, exc)
            return await self._answer(task_id, before, terminated=False)
        return await self._answer(task_id, before, terminated=True)

    async def _answer(self, task_id: int, before: TaskDetail, *, terminated: bool) -> Termination:
        """The task as it is now (`applied` when it is terminated); when the database does
        not answer that read, as this terminate left it (`before`, terminated or not)."""
        try:
            now = await self.db.run(task_detail, task_id)
        except SQLAlchemyError as exc:
            log.warning("lifecycle: task %s not read again (%s)", task_id, type(exc).__name__)
            now = (
                msgspec.structs.replace(before, state=TaskState.TERMINATED)
                if terminated
                else before
            )
        return Termination(now, applied=now.state == TaskState.TERMINATED)


def _not_applied(task_id: int, actor: str, exc: SQLAlchemyError) -> None:
    """Why an operator's recorded terminate stays recorded for now."""
    if is_lock_timeout(exc):
        log.warning(
            "lifecycle: task %s is locked by a worker that does not answer; terminate by %s "
            "recorded for the reconciler",
            task_id,
            actor,
        )
    else:
        log.warning(
            "lifecycle: task %s: terminate by %s recorded, not applied (%s); the reconciler "
            "applies it once the database answers",
            task_id,
            actor,
            type(exc).__name__,
        )
