"""The reconciler: repairs what crashes and races leave behind (`steelframe reconcile`,
also at every worker start and periodically inside `steelframe worker`).

* a `running` task whose lease expired (its worker died): orphan killed, retried or failed;
* a `queued` task whose RQ job is gone (Redis lost it, a crash before enqueue): re-enqueued;
* a task whose branch was pushed and whose pull request exists: `delivered`;
* labels that disagree with the state (live tasks and those finished in the last week),
  a lease period after the task's last state change;
* a terminate recorded while a frozen worker held the task: its job stopped, then applied;
* a terminated task's job still running a lease period later: RQ is told to stop it;
* notices whose poster died, results not yet delivered to their chat session;
* worktrees no live run owns;
* idempotency records of Decisions and filings past their retention (bot/idempotency.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import func, or_, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from bot import idempotency
from bot.contracts.tasks import EventData
from bot.db import Database, is_lock_timeout
from bot.events import OperatorEvents, RedisEventLog
from bot.lifecycle import ci_store, leases, progress, tasks, terminate, worktree
from bot.lifecycle.base_intake import reconcile_bases
from bot.lifecycle.context import LifecycleContext, announce_commits
from bot.lifecycle.delivery import deliver_all_pending
from bot.lifecycle.models import EventKind, Task, TaskEvent
from bot.lifecycle.queue import LifecycleQueue, job_id
from bot.lifecycle.recovery import clean_orphans, recover
from bot.lifecycle.review_pickup import awaiting_run, has_review_work, request_review_run
from bot.lifecycle.seams import GitHubApi
from bot.lifecycle.states import FINISHED, LIVE, TaskState
from bot.lifecycle.transition import Move, transition
from bot.redis_lease import held

log = logging.getLogger(__name__)
LABEL_WINDOW = timedelta(days=7)
RECONCILE_LOCK_SECONDS = 10.0
ACTOR = "reconciler"


@dataclass
class ReconcileReport:
    recovered: list[int] = field(default_factory=list)
    requeued: list[int] = field(default_factory=list)
    delivered: list[int] = field(default_factory=list)
    labels_fixed: list[int] = field(default_factory=list)
    stopped: list[int] = field(default_factory=list)
    conflicts: list[int] = field(default_factory=list)  # an update run, or a person asked
    terminated: list[int] = field(default_factory=list)
    notices_posted: int = 0
    chat_results: int = 0
    worktrees_removed: int = 0
    resyncs_paid: int = 0
    side_effects_removed: int = 0
    errors: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [
            f"recovered running tasks: {self.recovered or 'none'}",
            f"re-enqueued queued tasks: {self.requeued or 'none'}",
            f"delivered (pull request found): {self.delivered or 'none'}",
            f"labels repaired: {self.labels_fixed or 'none'}",
            f"pull requests conflicting with their base: {self.conflicts or 'none'}",
            f"jobs of terminated tasks stopped: {self.stopped or 'none'}",
            f"recorded terminate requests applied: {self.terminated or 'none'}",
            f"notices posted: {self.notices_posted}",
            f"chat results delivered: {self.chat_results}",
            f"stale worktrees removed: {self.worktrees_removed}",
            f"operators told to reload after missed events: {self.resyncs_paid}",
            f"idempotency records past retention removed: {self.side_effects_removed}",
            *(f"error: {e}" for e in self.errors),
        ]


@dataclass(frozen=True)
class _Pass:
    """What every check of one reconcile pass works with: the queue, how long a task may
    look stuck before it is repaired (a lease period), and the report being written."""

    ctx: LifecycleContext
    github: GitHubApi | None
    queue: LifecycleQueue
    grace: timedelta
    report: ReconcileReport


def _ids(session: Session, *states: TaskState) -> list[int]:
    return list(session.scalars(select(Task.id).where(Task.state.in_(states)).order_by(Task.id)))


def _label_candidates(session: Session, since: object) -> list[int]:
    return list(
        session.scalars(
            select(Task.id)
            .where(
                Task.archived.is_(False),
                or_(Task.state.in_(list(LIVE)), Task.updated_at >= since),
            )
            .order_by(Task.id)
        )
    )


async def reconcile(
    ctx: LifecycleContext,
    github: GitHubApi | None,
    *,
    say: Callable[[str], None] = lambda line: None,
) -> ReconcileReport:
    report = ReconcileReport()
    queue = LifecycleQueue(ctx.redis, name=ctx.queue_name, time_limit=ctx.policy.time_limit)
    grace = timedelta(seconds=ctx.policy.lease_seconds)
    this = _Pass(ctx, github, queue, grace, report)
    say("applying terminate requests ...")
    requested = dict(await ctx.db.run(terminate.pending))
    for task_id, actor in requested.items():
        await _guard(report, task_id, _apply_stop_request(this, task_id, actor))
    say("checking running tasks ...")
    for task_id in await ctx.db.run(_ids, TaskState.RUNNING):
        if task_id in requested:
            continue  # being terminated: never retried meanwhile
        await _guard(report, task_id, _check_running(this, task_id))
    say("checking queued tasks ...")
    for task_id in await ctx.db.run(_ids, TaskState.QUEUED):
        if task_id in requested:
            continue  # being terminated: never given a new job meanwhile
        await asyncio.to_thread(_check_queued, this, task_id)
    if github is not None:
        say("looking for pull requests of pushed branches ...")
        for task_id in await ctx.db.run(_ids, TaskState.QUEUED, TaskState.FAILED):
            await _guard(report, task_id, _check_pull(ctx, github, task_id, report))
        for task_id in await ctx.db.run(awaiting_run):  # review threads no run was asked for
            asked = request_review_run(ctx.db, github, queue, task_id, clock=ctx.clock)
            await _guard(report, task_id, _dropped(asked))
        say("checking delivered pull requests against their bases ...")
        for outcome in await reconcile_bases(ctx, github, queue):
            if outcome.verdict in ("update run", "needs human") and outcome.task_id:
                report.conflicts.append(outcome.task_id)
        candidates = await ctx.db.run(_label_candidates, ctx.clock() - LABEL_WINDOW)
        say(f"checking labels of {len(candidates)} tasks ...")
        for task_id in candidates:
            await _guard(report, task_id, _check_labels(this, github, task_id))
        try:
            report.notices_posted = await progress.post_pending(
                ctx.db, github, grace=ctx.policy.lease_seconds, clock=ctx.clock
            )
        except Exception as exc:
            report.errors.append(f"notices: {exc}")
    say("checking jobs of terminated tasks ...")
    for task_id in await ctx.db.run(_recently, TaskState.TERMINATED, ctx.clock() - LABEL_WINDOW):
        await asyncio.to_thread(_stop_leftover_job, this, task_id)
    say("delivering results to chat sessions ...")
    report.chat_results = await asyncio.to_thread(deliver_all_pending, ctx.db, clock=ctx.clock)
    report.worktrees_removed = await asyncio.to_thread(_sweep_worktrees, ctx)
    say("removing idempotency records past retention ...")
    await asyncio.to_thread(_expire_side_effects, ctx, report)
    say("paying resyncs owed to operators ...")
    try:
        report.resyncs_paid = await asyncio.to_thread(_pay_owed_resyncs, ctx)
    except Exception as exc:  # the log or the database is down: the debts stay recorded
        report.errors.append(f"owed resyncs: {type(exc).__name__}: {exc}")
    return report


def _expire_side_effects(ctx: LifecycleContext, report: ReconcileReport) -> None:
    """Idempotency records of Decisions and filings untouched for the retention window go
    (bot/idempotency.py, `expire_all`: concurrent passes and retries are safe)."""
    retention = timedelta(days=ctx.settings.side_effect_retention_days)
    try:
        report.side_effects_removed = idempotency.expire_all(ctx.db, before=ctx.clock() - retention)
    except OperationalError as exc:  # a lock wait or the database: the next pass sweeps
        report.errors.append(f"idempotency records: {type(exc).__name__}: {exc}")


def _pay_owed_resyncs(ctx: LifecycleContext) -> int:
    """The resyncs processes recorded and have not paid yet: above all those of processes
    that died owing them, which nobody else would pay."""
    return len(OperatorEvents(RedisEventLog(ctx.redis), ctx.db).pay_recorded())


async def _apply_stop_request(this: _Pass, task_id: int, actor: str) -> None:
    """A terminate recorded while a frozen worker held the task's row: terminate now, or,
    while the row is still held, stop the job holding it (its death frees the row; RQ's
    handling of the killed horse, or the next pass, then terminates)."""
    ctx, queue, report = this.ctx, this.queue, this.report
    job = (await ctx.db.run(tasks.get_task, task_id)).job_id
    try:
        if await terminate.apply(ctx.db, this.github, task_id, actor, ctx.clock):
            await asyncio.to_thread(queue.cancel_queued, job)
            report.terminated.append(task_id)
            log.info("reconcile: task %s terminated as %s asked", task_id, actor)
        return
    except OperationalError as exc:
        if not is_lock_timeout(exc):
            raise
    if await asyncio.to_thread(queue.is_started, job):
        done = await asyncio.to_thread(queue.cancel, job)
        # This run is being stopped on purpose: its runtime group goes with its horse (RQ
        # does not report a stopped job as a killed horse), and its lease with them.
        lease = await ctx.db.run(leases.current, task_id)
        holder = lease.pid if lease is not None else None
        await asyncio.to_thread(clean_orphans, ctx, task_id, dead_pid=holder)
        report.stopped.append(task_id)
        log.warning("reconcile: task %s: stopped the job holding its row: %s", task_id, done)


def _recently(session: Session, state: TaskState, since: object) -> list[int]:
    return list(
        session.scalars(
            select(Task.id).where(Task.state == state, Task.updated_at >= since).order_by(Task.id)
        )
    )


def _stop_leftover_job(this: _Pass, task_id: int) -> None:
    """A terminated task's job that still runs after a lease period did not notice (a
    stuck work horse): ask RQ to stop it, and kill what it left on this host."""
    ctx = this.ctx
    task = ctx.db.call(tasks.get_task, task_id)
    if task.updated_at > ctx.clock() - this.grace or not this.queue.is_started(task.job_id):
        return
    done = this.queue.cancel(task.job_id)
    clean_orphans(ctx, task_id, dead_pid=None)

    detail = f"the job of the terminated task still ran: {done}"
    ctx.db.call(_note_repair, ctx, task_id, detail, {"job_id": task.job_id, "action": done})
    this.report.stopped.append(task_id)


async def _dropped(step: Awaitable[object]) -> None:
    await step


async def _guard(report: ReconcileReport, task_id: int, step: Awaitable[None]) -> None:
    try:
        await step
    except Exception as exc:
        message = getattr(exc, "message", None) or str(exc)
        report.errors.append(f"task {task_id}: {type(exc).__name__}: {message}"[:300])
        log.warning("reconcile: task %s: %s", task_id, message)


async def _check_running(this: _Pass, task_id: int) -> None:
    ctx = this.ctx
    now = ctx.clock()
    lease = await ctx.db.run(leases.current, task_id)
    if leases.is_live(lease, now):
        return
    task = await ctx.db.run(tasks.get_task, task_id)
    if lease is None:
        # Resumed and waiting for its continuation, or just started: not dead yet.
        if await asyncio.to_thread(this.queue.is_pending, task.job_id):
            return
        if task.updated_at > now - this.grace:
            return
        if task.pending_decision:
            # Resumed while Redis was unreachable: no run has started, so nothing failed.
            await asyncio.to_thread(_enqueue_again, this, task, "resumed without a job")
            return
    reason = "the worker running it stopped (its lease expired)"
    result = await recover(ctx, this.github, task_id, reason=reason, dead_pid=None)
    if not result.startswith(("live", "nothing")):
        this.report.recovered.append(task_id)
        log.warning("reconcile: task %s recovered: %s", task_id, result)


def _check_queued(this: _Pass, task_id: int) -> None:
    ctx = this.ctx
    task = ctx.db.call(tasks.get_task, task_id)
    if this.queue.is_pending(task.job_id) or task.updated_at > ctx.clock() - this.grace:
        return
    _enqueue_again(this, task, "queued without a job")


def _enqueue_again(this: _Pass, task: Task, why: str) -> None:
    """A new job for a task whose job Redis never got or lost (noted on the task)."""
    ctx = this.ctx
    job = job_id(task.id, task.generation, f"r{task.attempts + 1}")

    def note(session: Session) -> None:
        tasks.touch(session, task.id, ctx.clock, job_id=job)
        detail = f"{why}; enqueued again"
        _note_repair(session, ctx, task.id, detail, {"job_id": job, "lost_job": task.job_id})

    ctx.db.call(note)
    this.queue.enqueue(task.id, job=job, continuation=bool(task.pending_decision))
    this.report.requeued.append(task.id)


async def _check_pull(
    ctx: LifecycleContext, github: GitHubApi, task_id: int, report: ReconcileReport
) -> None:
    task = await ctx.db.run(tasks.get_task, task_id)
    if task.pushed_at is None or await ctx.db.run(has_review_work, task_id):
        return  # not pushed, or queued for a review run (not delivered by it yet)
    if await ctx.db.run(ci_store.pending_fix, task_id, task.generation) is not None:
        return  # queued again for a fix of its pull request's CI, not waiting for one
    if leases.is_live(await ctx.db.run(leases.current, task_id), ctx.clock()):
        return
    branch = task.branch or tasks.branch_name(task.issue)
    pulls = await github.list_pulls(task.repo, head=branch, state="open")
    if not pulls:
        return
    pull = pulls[0]
    url = pull.html_url
    move = Move(
        TaskState.DELIVERED,
        actor=ACTOR,
        detail=f"pull request {url} already exists",
        data={"pr_url": url, "pr_number": pull.number, "summary": ""},
        expect=[TaskState.QUEUED, TaskState.FAILED],
        changes={"pr_url": url, "pr_number": pull.number, "last_error": None},
    )
    await transition(ctx.db, github, task_id, move, clock=ctx.clock)
    report.delivered.append(task_id)


def _last_moved_at(session: Session, task_id: int) -> datetime | None:
    """When the task last changed state (or was created): the commit its labels follow."""
    return session.scalar(
        select(func.max(TaskEvent.at)).where(
            TaskEvent.task_id == task_id,
            TaskEvent.kind.in_([EventKind.TRANSITION, EventKind.CREATED]),
        )
    )


async def _check_labels(this: _Pass, github: GitHubApi, task_id: int) -> None:
    ctx, report = this.ctx, this.report
    moved_at = await ctx.db.run(_last_moved_at, task_id)
    if moved_at is not None and moved_at > ctx.clock() - this.grace:
        # A transition commits its state first and sets the labels after (`transition.show`):
        # labels that lag a change younger than a lease period are most likely that update
        # on its way, not drift. Repairing them then is harmless but says "repaired" in the
        # task's history for a run that went as planned; a real drift waits one pass more.
        return
    task = await ctx.db.run(tasks.get_task, task_id)
    state = TaskState(task.state)
    if progress.labels_match(await github.get_issue(task.repo, task.issue), state):
        return
    changes = await progress.sync_labels(github, task.repo, task.issue, state)
    if not changes:
        return

    detail = f"labels repaired ({' '.join(changes)})"
    await ctx.db.run(_note_repair, ctx, task_id, detail, {"labels": changes})
    report.labels_fixed.append(task_id)
    if state in FINISHED or state == TaskState.WAITING_FOR_INFO:
        log.info("reconcile: task %s labels repaired: %s", task_id, changes)


def _sweep_worktrees(ctx: LifecycleContext) -> int:
    """Remove run folders of tasks no live run holds (a run removes its own when it ends)."""
    root = ctx.worktrees
    if not root.is_dir():
        return 0
    now = ctx.clock()
    removed = 0
    for path in root.iterdir():
        task_id = worktree.task_of(path)
        if task_id is None:
            continue
        if leases.is_live(ctx.db.call(leases.current, task_id), now):
            continue
        worktree.remove(path)
        removed += 1
    return removed


# The reconciler lease lapses this long after its holder stops renewing it (a crash).
RECONCILER_LEASE_SECONDS = 30.0


def reconciler_lease_name(queue: str) -> str:
    return f"steelframe:reconciler:{queue}"


def reconcile_if_leader(
    ctx: LifecycleContext, say: Callable[[str], None]
) -> ReconcileReport | None:
    """One reconcile pass if no other process is reconciling (None when one is): each pass
    first takes a Redis lease, so any number of workers reconcile one at a time."""
    name = reconciler_lease_name(ctx.queue_name)
    with held(ctx.redis, name, ttl=RECONCILER_LEASE_SECONDS) as leader:
        if not leader:
            return None
        return run_reconcile(ctx, say=say)


def reconcile_as_leader(
    ctx: LifecycleContext,
    say: Callable[[str], None],
    *,
    within: float = RECONCILER_LEASE_SECONDS,
    every: float = 0.5,
    pause: Callable[[float], bool] | None = None,
) -> ReconcileReport | None:
    """`reconcile_if_leader`, waiting for the lease (at most `within`) when another process
    holds it. A worker starting after a crash relies on its first pass to recover what the
    dead one was running; if that one died holding the lease, skipping would leave the
    tasks to a later pass (never, for `--burst`). `pause(seconds)` waits between two tries
    and says whether to give up (a stop was asked for). None if the lease stayed taken or
    the wait was given up."""
    deadline = time.monotonic() + within
    pause = pause or _sleep
    while True:
        report = reconcile_if_leader(ctx, say)
        if report is not None or time.monotonic() >= deadline:
            return report
        if pause(every):  # the holder's pass or its lease's expiry, whichever comes first
            return None


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return False


def reconcile_until(ctx: LifecycleContext, stop: threading.Event) -> None:
    """Beside a worker (`steelframe worker`, `dev`'s in-process one), until `stop` is set: a
    pass every lease period, so expired leases, lost jobs and a retry whose scheduled job
    vanished in a restart are repaired within about two lease periods, not at next start."""
    with lock_bounded(ctx) as bounded:
        _reconcile_every_lease(bounded, stop)


@contextmanager
def lock_bounded(ctx: LifecycleContext) -> Iterator[LifecycleContext]:
    """`ctx` on its own engine whose row-lock waits are bounded: a frozen work horse holding
    a task's row makes that task's repair fail this pass (and come back next), never hangs
    the periodic loop. Its commits are announced like the worker's own."""
    db = Database.from_url(ctx.settings.database_url, lock_timeout=RECONCILE_LOCK_SECONDS)
    announce_commits(db, ctx.redis)
    try:
        yield dataclasses.replace(ctx, db=db)
    finally:
        db.dispose()


def _reconcile_every_lease(ctx: LifecycleContext, stop: threading.Event) -> None:
    while not stop.wait(ctx.policy.lease_seconds):
        try:
            report = reconcile_if_leader(ctx, say=lambda line: None)
            if report is None:
                log.debug("reconcile: another worker holds the reconciler lease; skipped")
            elif report.recovered or report.requeued or report.labels_fixed or report.terminated:
                log.info("reconcile: %s", "; ".join(report.lines()[:5]))
            if report is not None and report.errors:
                log.warning("reconcile: periodic pass: %s", "; ".join(report.errors))
        except Exception:
            log.exception("reconcile: periodic pass failed; trying again later")


def run_reconcile(ctx: LifecycleContext, *, say: Callable[[str], None] = print) -> ReconcileReport:
    """One reconcile pass from synchronous code (a worker start, its periodic thread)."""

    async def main() -> ReconcileReport:
        if ctx.github is None:
            return await reconcile(ctx, None, say=say)
        async with ctx.github() as github:
            return await reconcile(ctx, github, say=say)

    return asyncio.run(main())


def _note_repair(
    session: Session, ctx: LifecycleContext, task_id: int, detail: str, data: EventData
) -> None:
    """Record on the task what the reconciler repaired (a `reconciled` event)."""
    tasks.record(
        session,
        tasks.get_task(session, task_id),
        EventKind.RECONCILED,
        actor=ACTOR,
        detail=detail,
        data=data,
        clock=ctx.clock,
    )
