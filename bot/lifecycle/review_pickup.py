"""Which review threads call for a run, and the run that takes them up.

A thread in the ledger that is `open` and no run has taken up (`picked_job` None) calls
for a review run. `request_review_run` moves a delivered (or failed) task with a pull
request and such threads back to `queued` with one job; the webhook that recorded the
thread calls it, and so do the end of every run (threads that came in while it ran: one
follow-up run, never a second run beside it) and the reconciler (a thread recorded by a
process that died before asking). Several comments of one review are one run: the first
webhook queues the task, the later ones find it queued (their threads are taken up when
the run starts), and redeliveries never get past the acknowledgement's record. The state
change is a compare-and-set, so two askers at once make one run. The job id names the
thread and generation plus a nonce, as every job's: it is each run's mark on its replies
(`thread_answers.answer_marker`), so a run for a thread answered before (a writer replied on
it) must not have the earlier run's id, whose reply it would take for its own.

`pick_up` is the run's first step: it takes every open thread (and, resumed by a Decision,
the threads that waited for one), pins each thread's text as the run is given it (the
root and the replies Steelframe acknowledged, i.e. writers'), and records the pickup.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

import redis
from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.db import Database
from bot.lifecycle import tasks
from bot.lifecycle.context import LifecycleContext
from bot.lifecycle.models import EventKind, ReviewAck, ReviewThread, Task, ThreadKind, ThreadState
from bot.lifecycle.queue import LifecycleQueue, job_id
from bot.lifecycle.reviews import PICKUP_ACTOR, pinned_text
from bot.lifecycle.seams import GitHubApi
from bot.lifecycle.states import IllegalTransition, TaskState
from bot.lifecycle.transition import Move, apply, publish

log = logging.getLogger(__name__)
# The states a task with a pull request is asked for a review run from (a failed task's
# pull request is still open for review).
ASKABLE = (TaskState.DELIVERED, TaskState.FAILED)
ACTOR = PICKUP_ACTOR


def review_job_id(task: Task, thread: ReviewThread) -> str:
    return job_id(task.id, task.generation, f"review-{thread.kind[0]}{thread.root_id}")


def _waiting(session: Session, task_id: int) -> list[ReviewThread]:
    """Open threads no run has taken up."""
    return list(
        session.scalars(
            select(ReviewThread)
            .where(
                ReviewThread.task_id == task_id,
                ReviewThread.state == ThreadState.OPEN,
                ReviewThread.picked_job.is_(None),
            )
            .order_by(ReviewThread.id)
        )
    )


def awaiting_run(session: Session) -> list[int]:
    """Tasks the reconciler asks a review run for."""
    waiting = exists().where(
        ReviewThread.task_id == Task.id,
        ReviewThread.state == ThreadState.OPEN,
        ReviewThread.picked_job.is_(None),
    )
    query = select(Task.id).where(
        Task.state.in_([str(s) for s in ASKABLE]),
        Task.archived.is_(False),
        Task.pr_number.is_not(None),
        waiting,
    )
    return list(session.scalars(query.order_by(Task.id)))


def has_review_work(session: Session, task_id: int) -> bool:
    """A run of this task is a review run: its pull request exists and threads are open
    (or, resumed by a Decision, wait for one)."""
    task = session.get(Task, task_id)
    if task is None or task.pr_number is None:
        return False
    states = [ThreadState.OPEN] + ([ThreadState.NEEDS_OPERATOR] if task.pending_decision else [])
    return bool(
        session.scalar(
            select(ReviewThread.id)
            .where(ReviewThread.task_id == task_id, ReviewThread.state.in_(states))
            .limit(1)
        )
    )


def _plan(session: Session, task_id: int) -> tuple[str, str] | None:
    """The job and the words of the pickup, when the task is one to ask a run of."""
    task = session.get(Task, task_id)
    if task is None or task.archived or task.pr_number is None or task.state not in ASKABLE:
        return None
    waiting = _waiting(session, task_id)
    if not waiting:
        return None
    who = ", ".join(sorted({f"@{thread.author}" for thread in waiting}))
    count = f"{len(waiting)} thread{'s' if len(waiting) != 1 else ''}"
    return review_job_id(task, waiting[0]), f"review by {who} picked up ({count})"


async def request_review_run(
    db: Database,
    github: GitHubApi | None,
    queue: LifecycleQueue | None,
    task_id: int,
    *,
    clock: Clock = utcnow,
    gather: float = 0.0,
) -> str | None:
    """Queue the task for a review run if threads wait for one; the job, or None. `gather`:
    seconds before the job starts (a review's other webhooks are on their way: they find
    the task queued and their threads are taken up by this run)."""
    if queue is None:
        return None
    plan = await db.run(_plan, task_id)
    if plan is None:
        return None
    job, detail = plan
    try:
        change = await db.run(
            apply,
            task_id,
            Move(
                TaskState.QUEUED,
                actor=ACTOR,
                detail=detail,
                expect=list(ASKABLE),
                changes={"attempts": 0, "job_id": job, "last_error": None},
                note=detail[:1].upper() + detail[1:] + ".",
            ),
            clock,
        )
    except IllegalTransition as exc:  # queued by another asker a moment ago, or moved
        log.info("lifecycle: task %s review run not asked: task is %s", task_id, exc.current)
        return None
    try:
        await asyncio.to_thread(queue.enqueue, task_id, job=job, continuation=True, delay=gather)
    except redis.RedisError as exc:
        # Committed as queued: the reconciler enqueues a queued task that has no job.
        log.warning("lifecycle: task %s review run not enqueued yet (%s)", task_id, exc)
    log.info("lifecycle: task %s %s", task_id, detail)
    await publish(db, github, change, clock=clock)
    return job


async def pick_up(
    db: Database, github: GitHubApi, task: Task, *, job: str, clock: Clock = utcnow
) -> list[ReviewThread]:
    """The threads this run answers, taken up and pinned (see the module's docstring)."""
    threads = await db.run(_threads_to_take, task.id, bool(task.pending_decision))
    if not threads:
        return []
    replies = await _acked_replies(db, github, task, threads)
    seen = {t.id: t.updated_at for t in threads}
    return await db.run(_take, task.id, seen, replies, job, clock)


def _threads_to_take(session: Session, task_id: int, decided: bool) -> list[ReviewThread]:
    states = [ThreadState.OPEN] + ([ThreadState.NEEDS_OPERATOR] if decided else [])
    return list(
        session.scalars(
            select(ReviewThread)
            .where(ReviewThread.task_id == task_id, ReviewThread.state.in_(states))
            .order_by(ReviewThread.id)
        )
    )


async def _acked_replies(
    db: Database, github: GitHubApi, task: Task, threads: list[ReviewThread]
) -> dict[int, list[str]]:
    """Writers' replies on each comment thread, as GitHub has them now (oldest first)."""
    roots = {t.root_id for t in threads if t.kind == ThreadKind.COMMENT}
    if not roots or task.pr_number is None:
        return {}
    comments = await github.list_review_comments(task.repo, task.pr_number)
    candidates = [c for c in comments if c.in_reply_to_id in roots]
    acked = await db.run(_acked_ids, [c.id for c in candidates])
    replies: dict[int, list[str]] = {}
    for comment in candidates:
        if comment.id in acked and comment.in_reply_to_id is not None:
            who = comment.user.login if comment.user else "someone"
            replies.setdefault(comment.in_reply_to_id, []).append(f"@{who}: {comment.body}")
    return replies


def _acked_ids(session: Session, ids: list[int]) -> set[int]:
    if not ids:
        return set()
    query = select(ReviewAck.github_id).where(
        ReviewAck.kind == ThreadKind.COMMENT, ReviewAck.github_id.in_(ids)
    )
    return set(session.scalars(query))


def _take(
    session: Session,
    task_id: int,
    seen: dict[int, datetime],
    replies: dict[int, list[str]],
    job: str,
    clock: Clock,
) -> list[ReviewThread]:
    """The threads `seen` (id: when each last changed, as listed) taken up by `job`, each
    only if it is as it was listed. One that changed since (dismissed, deleted, edited, a
    reply acknowledged after its replies were listed) is left for the next run, which
    reads it as it is now; its rows are held, so none changes while they are taken."""
    now = clock()
    taken = []
    rows = session.scalars(
        select(ReviewThread)
        .where(ReviewThread.id.in_(list(seen)))
        .order_by(ReviewThread.id)
        .with_for_update()
    )
    for thread in rows:
        if thread.updated_at != seen[thread.id]:
            continue
        said = replies.get(thread.root_id, []) if thread.kind == ThreadKind.COMMENT else []
        pinned = "\n\n".join([thread.text, *(f"Reply {reply}" for reply in said)])
        thread.pinned = pinned_text(pinned)
        thread.state, thread.reason = ThreadState.OPEN, None
        thread.picked_job, thread.picked_at, thread.updated_at = job, now, now
        taken.append(thread)
    task = tasks.get_task(session, task_id)
    keys = [f"{t.kind}:{t.root_id}" for t in taken]
    tasks.record(
        session,
        task,
        EventKind.REVIEW_PICKUP,
        actor=ACTOR,
        detail=f"review run took up {len(taken)} thread(s)",
        data={"threads": keys, "job": job},
        clock=clock,
    )
    session.flush()
    for thread in taken:
        session.expunge(thread)
    return taken


async def follow_up(ctx: LifecycleContext, task_id: int) -> None:
    """After a run of the task ended (its lease released): one review run for threads that
    came in meanwhile. Never raises: the reconciler asks again (`awaiting_run`)."""
    try:
        if ctx.github is None or await ctx.db.run(_plan, task_id) is None:
            return
        queue = LifecycleQueue(ctx.redis, name=ctx.queue_name, time_limit=ctx.policy.time_limit)
        async with ctx.github() as github:
            await request_review_run(ctx.db, github, queue, task_id, clock=ctx.clock)
    except Exception as exc:
        log.warning("lifecycle: task %s follow-up review run not asked: %r", task_id, exc)
