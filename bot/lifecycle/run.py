"""One run of a task in a worker: lease, start, the run's steps, and what came of it.

`run_task` is what both RQ jobs call. Whatever happens, the lease is released and the
worktree removed at the end, and the task's results are delivered to its chat session.
The steps of a started run are in `bot.lifecycle.steps`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.orm import Session

from bot.github.errors import GitHubError
from bot.lifecycle import base_run, budget_hold, ci_run, leases, tasks, terminate, worktree
from bot.lifecycle.branch import let_go
from bot.lifecycle.context import LifecycleContext
from bot.lifecycle.delivery import deliver_pending
from bot.lifecycle.finish import finish_failed
from bot.lifecycle.leases import Heartbeat, Holder
from bot.lifecycle.models import EventKind, Task
from bot.lifecycle.recovery import recover
from bot.lifecycle.review_pickup import follow_up
from bot.lifecycle.review_run import wanted as review_wanted
from bot.lifecycle.review_run import work_review
from bot.lifecycle.run_log import keep_log
from bot.lifecycle.sandbox import SandboxUnavailable
from bot.lifecycle.scope import Run, RunStopped, Watch
from bot.lifecycle.seams import GitHubApi
from bot.lifecycle.states import FINAL, IllegalTransition, TaskState
from bot.lifecycle.steps import work
from bot.lifecycle.tasks import LeaseLost
from bot.lifecycle.transition import Move, publish
from bot.lifecycle.transition import apply as apply_move

log = logging.getLogger(__name__)
# How often a run checks whether its task ended under it (ENDED_UNDER_A_RUN; its lease is
# renewed by `Heartbeat`).
STOP_POLL_SECONDS = 1.0
LEASE_LOST = "stopped: lease lost"  # what a run that lost its lease says it did
# A task moved to one of these while a run works on it stops that run: an operator's
# terminate (or its issue closed), or its pull request merged or closed by a person.
ENDED_UNDER_A_RUN = frozenset({TaskState.TERMINATED, *FINAL})


@dataclass(frozen=True)
class Started:
    task: Task


@dataclass(frozen=True)
class Skipped:
    """Nothing to do: the task is not queued or running, or the run lost its lease (said in
    `reason`)."""

    reason: str


@dataclass(frozen=True)
class OutOfAttempts:
    """The task used its last attempt: it fails without running."""


StartResult = Started | Skipped | OutOfAttempts


async def run_task(ctx: LifecycleContext, task_id: int, *, continuation: bool) -> str:
    """Run the task once if this worker gets its lease; returns what happened, in words."""
    holder = Holder.this_process()
    actor = f"worker:{holder.host}:{holder.pid}"
    ttl, clock = ctx.policy.lease_seconds, ctx.clock
    if not await asyncio.to_thread(leases.acquire, ctx.db, task_id, holder, ttl=ttl, clock=clock):
        await ctx.db.run(_ignored, task_id, actor, ctx)
        log.info("lifecycle: task %s: a run holds the lease; trigger ignored", task_id)
        return "ignored: another run holds the lease"
    log.info("lifecycle: task %s %s by %s", task_id, "continues" if continuation else "runs", actor)
    folder = worktree.run_root(ctx.worktrees, task_id, holder.run)
    watch = Watch()
    heartbeat = _heartbeat(ctx, task_id, holder, watch).start()
    said: str | None = None  # None: the run raised
    try:
        said = await _leased(ctx, task_id, holder, actor, folder, watch)
        return said
    finally:
        await asyncio.to_thread(worktree.remove, folder)
        await asyncio.to_thread(heartbeat.stop)
        await asyncio.to_thread(leases.release, ctx.db, task_id, holder)
        if heartbeat.lost.is_set() or said == LEASE_LOST:
            await _hand_back(ctx, task_id, actor)
        await asyncio.to_thread(deliver_pending, ctx.db, task_id, clock=ctx.clock)
        await follow_up(ctx, task_id)  # review threads that came in while it ran


def _heartbeat(ctx: LifecycleContext, task_id: int, holder: Holder, watch: Watch) -> Heartbeat:
    """The run's lease renewed on a thread of its own from now until it is released; the
    run's watch told (on its loop) when a renewal finds the lease taken."""
    loop = asyncio.get_running_loop()

    def lost() -> None:
        with contextlib.suppress(RuntimeError):  # the loop ended: the run is over anyway
            loop.call_soon_threadsafe(watch.halt, "lease lost")

    return Heartbeat(
        ctx.db,
        task_id,
        holder,
        ttl=ctx.policy.lease_seconds,
        every=ctx.policy.heartbeat_seconds,
        on_lost=lost,
        clock=ctx.clock,
    )


async def _hand_back(ctx: LifecycleContext, task_id: int, actor: str) -> None:
    """A run that lost its lease stops with its task `running`: unless another run holds
    the task now, it is retried (or failed, out of attempts) at once, in the run's own name,
    as the reconciler would a lease period later (and does, if this fails)."""
    reason = "the run lost its lease (its worker did not renew it in time)"
    try:
        if ctx.github is None:
            said = await recover(ctx, None, task_id, reason=reason, dead_pid=None, actor=actor)
        else:
            async with ctx.github() as github:
                said = await recover(
                    ctx, github, task_id, reason=reason, dead_pid=None, actor=actor
                )
        log.info("lifecycle: task %s after its lost lease: %s", task_id, said)
    except Exception:
        log.exception("lifecycle: task %s not handed back now; the reconciler will", task_id)


def _ignored(session: Session, task_id: int, actor: str, ctx: LifecycleContext) -> None:
    task = session.get(Task, task_id)
    if task is not None:
        tasks.record(
            session,
            task,
            EventKind.TRIGGER_IGNORED,
            actor=actor,
            detail="a run already holds this task's lease",
            clock=ctx.clock,
        )


async def _start(
    ctx: LifecycleContext, github: GitHubApi | None, task_id: int, holder: Holder, actor: str
) -> StartResult:
    """Move the task to running and count the attempt (fenced on the lease); Skipped when
    someone else moved the task meanwhile, the run lost its lease, or an operator's
    terminate was recorded (the task is then terminated as asked, not run)."""
    try:
        return await _begin_attempt(ctx, github, task_id, holder, actor)
    except IllegalTransition as exc:
        return Skipped(f"skipped: task is {exc.current}")
    except LeaseLost:
        return Skipped(LEASE_LOST)


async def _begin_attempt(
    ctx: LifecycleContext, github: GitHubApi | None, task_id: int, holder: Holder, actor: str
) -> StartResult:
    task = await ctx.db.run(tasks.get_task, task_id)
    if task.state not in (TaskState.QUEUED, TaskState.RUNNING):
        return Skipped(f"skipped: task is {task.state}")
    if task.attempts >= ctx.policy.max_attempts:
        return OutOfAttempts()
    move = Move(
        TaskState.RUNNING,
        actor=actor,
        detail=f"attempt {task.attempts + 1} started",
        expect=[TaskState(task.state)],
        changes={"attempts": task.attempts + 1},
        fence=holder.id,
    )
    running = task.state == TaskState.RUNNING
    decided = await ctx.db.run(_attempt, ctx, task_id, move, running=running)
    if isinstance(decided, budget_hold.Hold):  # the repository's budget: not now
        await asyncio.to_thread(budget_hold.enqueue, ctx, decided)
        return Skipped(decided.reason)
    if decided is not None and decided.terminated_by is not None:
        asked = decided.terminated_by
        log.info("lifecycle: task %s terminated as %s asked, not started", task_id, asked)
        await publish(ctx.db, github, decided.moved, create_progress=False, clock=ctx.clock)
        return Skipped(f"terminated as {asked} asked")
    # No GitHub here: the run's first step announces the attempt (steps._announce).
    return Started(await ctx.db.run(tasks.get_task, task_id))


def _attempt(
    session: Session, ctx: LifecycleContext, task_id: int, move: Move, *, running: bool
) -> terminate.Decided | budget_hold.Hold | None:
    """The attempt counted, or what stops it, decided under the task's row lock
    (`terminate.held_request`), in this order: an operator's recorded terminate (a request
    recorded while a frozen process held the row, or while the task waited for this job)
    ends the task here and the attempt never starts; a queued task of a repository over its
    budget is held (`budget_hold`: it stays queued, its run enqueued again after the commit).
    Otherwise, queued: `move` (`queued -> running`). Running already (a resumed task, or a
    run whose worker died; this run holds the lease, so no other is live): the attempt is
    counted on the row, no state change (None)."""
    clock = ctx.clock
    actor = terminate.held_request(session, task_id, fence=move.fence, clock=clock)
    if actor is not None:
        moved = terminate.terminate_instead(session, task_id, actor, move, clock)
        return terminate.Decided(moved, terminated_by=actor)
    if not running:
        if (held := budget_hold.hold(session, ctx, task_id)) is not None:
            return held
        return terminate.Decided(apply_move(session, task_id, move, clock))
    task = tasks.get_task(session, task_id)
    if task.state != TaskState.RUNNING:
        raise IllegalTransition(task_id, task.state, TaskState.RUNNING)
    tasks.touch(session, task_id, clock, **(move.changes or {}))
    return None


async def _leased(
    ctx: LifecycleContext, task_id: int, holder: Holder, actor: str, folder: Path, watch: Watch
) -> str:
    if ctx.github is None:
        return await _without_github(ctx, task_id, holder, actor)
    async with ctx.github() as github:
        started = await _start(ctx, github, task_id, holder, actor)
        if isinstance(started, OutOfAttempts):
            return await finish_failed(
                ctx, github, task_id, actor, limit="attempts", retry=False, fence=holder.id
            )
        if isinstance(started, Skipped):
            return started.reason
        run = Run(ctx, github, started.task, holder, actor, watch, folder)
        async with _watching(ctx, task_id, run.watch):
            return await _guarded(run, github)


async def _guarded(run: Run, github: GitHubApi) -> str:
    """The run's steps, then its claim on the branch let go, however the run ended."""
    ended = await _ended(run, github)
    await let_go(run)
    return ended


async def _ended(run: Run, github: GitHubApi) -> str:
    """The run's steps; whatever they raise ends the run in the worker's own words."""
    task_id = run.task.id
    try:
        if (
            base_update := await asyncio.to_thread(base_run.pending, run)
        ) is not None:  # its pull request conflicts with its moved base
            return await base_run.update(run, base_update)
        if (
            ci_fix := await asyncio.to_thread(ci_run.pending, run)
        ) is not None:  # failing CI on its pull request
            return await ci_run.fix(run, ci_fix)
        return await (work_review(run) if await review_wanted(run) else work(run))
    except (RunStopped, LeaseLost) as stopped:
        reason = "lease lost" if isinstance(stopped, LeaseLost) else str(stopped)
        log.info("lifecycle: task %s run stopped (%s)", task_id, reason)
        return f"stopped: {reason}"  # LEASE_LOST for a lost lease
    except IllegalTransition as exc:
        # Someone else moved the task meanwhile (an operator terminated it).
        log.info("lifecycle: task %s became %s during the run", task_id, exc.current)
        return f"stopped: task became {exc.current}"
    except SandboxUnavailable as exc:
        # The command cannot run in the sandbox as configured: no retry will change that.
        log.error("lifecycle: task %s: coding run refused: %s", task_id, exc)
        error = f"this worker cannot run the coding command in its sandbox: {exc}"
        return await finish_failed(
            run.ctx, github, task_id, run.actor, error=error, retry=False, fence=run.fence
        )
    except Exception as exc:
        if run.watch.stop.is_set():
            return f"stopped: {run.watch.reason}"
        public = _failure_class(exc)
        private = run.ctx.redactor.redact(f"{type(exc).__name__}: {_describe(exc)}")
        log.warning("lifecycle: task %s attempt failed: %s", task_id, private)
        await asyncio.to_thread(keep_log, run, "error", f"[worker] {public}: {private}")
        return await finish_failed(
            run.ctx, github, task_id, run.actor, error=public, retry=True, fence=run.fence
        )


def _failure_class(exc: BaseException) -> str:
    """What a failure is called in public: its kind, never its message."""
    if isinstance(exc, worktree.WorktreeError):
        return "a git step of the worker failed"
    if isinstance(exc, GitHubError):
        return "a GitHub request of the worker failed"
    return "the worker hit an internal error"


async def _without_github(ctx: LifecycleContext, task_id: int, holder: Holder, actor: str) -> str:
    started = await _start(ctx, None, task_id, holder, actor)
    if isinstance(started, Skipped):
        return started.reason
    return await finish_failed(
        ctx,
        None,
        task_id,
        actor,
        error="the GitHub App is not configured on this worker (APP_ID, PRIVATE_KEY)",
        retry=False,
        fence=holder.id,
    )


def _describe(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return message[:1000]


@contextlib.asynccontextmanager
async def _watching(ctx: LifecycleContext, task_id: int, watch: Watch) -> AsyncIterator[None]:
    """Watch for the task's end under the run (ENDED_UNDER_A_RUN) while the body runs (the
    lease's heartbeat is a thread of its own, `leases.Heartbeat`: nothing here, slow or not,
    holds it up)."""

    async def poll() -> None:
        while not watch.stop.is_set():
            await asyncio.sleep(STOP_POLL_SECONDS)
            state = await asyncio.to_thread(ctx.db.call, lambda s: tasks.get_task(s, task_id).state)
            if state in ENDED_UNDER_A_RUN:
                watch.halt(state)
                return

    poller = asyncio.ensure_future(poll())
    try:
        yield
    finally:
        poller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await poller
