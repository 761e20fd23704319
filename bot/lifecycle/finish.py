"""How a run ends: delivered, a question asked, or failed (retried with backoff, or for
good with a comment naming what failed or which limit was reached).

Every text given here is public already (the worker's own words and redacted runtime
text, see `bot.lifecycle.redact`): it goes into comments, task events and chat results.
A run passes its lease holder as `fence`: a run that lost its lease changes nothing. An
operator's terminate recorded while the run went on wins over every ending (the task ends
`terminated`, bot.lifecycle.terminate)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace

from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from bot.db import is_lock_timeout
from bot.lifecycle import tasks, terminate
from bot.lifecycle.ci_intake import recheck_after_delivery
from bot.lifecycle.context import LifecycleContext
from bot.lifecycle.models import EventKind, Task
from bot.lifecycle.progress import Phase
from bot.lifecycle.queue import LifecycleQueue, job_id
from bot.lifecycle.seams import GitHubApi
from bot.lifecycle.states import IllegalTransition, TaskState
from bot.lifecycle.tasks import LeaseLost
from bot.lifecycle.transition import Move, Transitioned, publish

log = logging.getLogger(__name__)
LIMIT_NAMES = {
    "time": "the wall-clock time limit of {time:g} s per task (STEELFRAME_TASK_TIME_LIMIT)",
    "tokens": "the token limit of {tokens} tokens per task (STEELFRAME_TASK_MAX_TOKENS)",
    "cost": "the cost limit of {cost} USD per task (STEELFRAME_TASK_MAX_COST_USD)",
    "attempts": "the limit of {attempts} attempts per task (STEELFRAME_TASK_MAX_ATTEMPTS)",
    "turns": "the coding agent's limit of {turns} turns per run (STEELFRAME_CODING_MAX_TURNS)",
}


def _moved(task_id: int, exc: IllegalTransition) -> str:
    """Someone else moved the task meanwhile (an operator terminated it): leave it be."""
    log.info("lifecycle: task %s became %s; the run's result is dropped", task_id, exc.current)
    return f"stopped: task became {exc.current}"


def _fenced_out(task_id: int) -> str:
    log.info("lifecycle: task %s: the run lost its lease; its result is dropped", task_id)
    return "stopped: lease lost"


async def finish_move(
    ctx: LifecycleContext, github: GitHubApi | None, task_id: int, move: Move
) -> Transitioned | str:
    """Move the run's task to where the run ended (delivered, a question asked), or
    terminate it instead when an operator's terminate was recorded while the run went on
    (a frozen worker held the row past the terminate's bound): decided under the task's row
    lock, as a retry or a final failure is (`decide`). The run's words instead of a change
    when the task is no longer the run's to move, or was terminated as asked."""
    decided = await decide(ctx, github, task_id, move)
    if isinstance(decided, str):
        return decided
    if decided.terminated_by is not None:
        return f"terminated as {decided.terminated_by} asked"
    published = await publish(ctx.db, github, decided.moved, clock=ctx.clock)
    return replace(decided.moved, published=published)


def limit_text(ctx: LifecycleContext, name: str) -> str:
    policy = ctx.policy
    return LIMIT_NAMES[name].format(
        time=policy.time_limit,
        tokens=policy.max_tokens,
        cost=policy.max_cost_usd,
        attempts=policy.max_attempts,
        turns=policy.max_turns,
    )


async def finish_delivered(
    ctx: LifecycleContext,
    github: GitHubApi,
    task_id: int,
    actor: str,
    *,
    summary: str,
    fence: str | None = None,
    draft: bool = False,
) -> str:
    task = await ctx.db.run(tasks.get_task, task_id)
    move = Move(
        TaskState.DELIVERED,
        actor=actor,
        detail=f"pull request {task.pr_url}",
        # `draft`: the pull request was opened as one (bot.lifecycle.pull_view reads it).
        data={
            "pr_url": task.pr_url,
            "pr_number": task.pr_number,
            "summary": summary,
            "draft": draft,
        },
        expect=[TaskState.RUNNING],  # a run only finishes its own running task
        changes={"summary": summary or None, "last_error": None, "pending_decision": None},
        note=summary,
        fence=fence,
    )
    change = await finish_move(ctx, github, task_id, move)
    if isinstance(change, str):
        return change
    # A failure on the head reported while no run could take it (the task waited for a
    # person) is taken now, if this run left the head as it was.
    await recheck_after_delivery(ctx, github, task_id)
    return f"delivered: {task.pr_url}"


async def finish_question(
    ctx: LifecycleContext,
    github: GitHubApi,
    task: Task,
    actor: str,
    question: str,
    *,
    fence: str | None = None,
) -> str:
    text = (
        f"Steelframe needs information to go on with this issue:\n\n{question}\n\n"
        "Answer by publishing a Decision on this issue (from Steelframe's Chat, or a Decision "
        "comment by someone with write access); the task resumes with it."
    )
    move = Move(
        TaskState.WAITING_FOR_INFO,
        actor=actor,
        detail="the coding runtime asked a question",
        data={"question": question},
        expect=[TaskState.RUNNING],
        changes={"question": question, "pending_decision": None},
        notice=text,
        fence=fence,
    )
    change = await finish_move(ctx, github, task.id, move)
    if isinstance(change, str):
        return change
    return "waiting_for_info: question asked"


async def finish_failed(
    ctx: LifecycleContext,
    github: GitHubApi | None,
    task_id: int,
    actor: str,
    *,
    error: str = "",
    limit: str | None = None,
    retry: bool,
    fence: str | None = None,
) -> str:
    """Schedule the next attempt (backoff) or fail the task with a comment saying why."""
    task = await ctx.db.run(tasks.get_task, task_id)
    if retry and task.attempts < ctx.policy.max_attempts:
        return await _retry_later(ctx, github, task, actor, error=error, fence=fence)
    if limit is not None:
        error = f"stopped by {limit_text(ctx, limit)}"
    else:
        error = error or "unknown error"
        if retry:
            error = f"{error} (after {task.attempts} attempts)"
    move = Move(
        TaskState.FAILED,
        actor=actor,
        detail=error[:500],
        data={"error": error, "limit": limit},
        expect=[TaskState.QUEUED, TaskState.RUNNING],  # before or during its own run
        changes={"last_error": error},
        notice=f"Steelframe could not finish this issue: {error}.",
        note=f"Failed: {error}",
        fence=fence,
    )

    def limit_event(session: Session, _moved: Transitioned) -> None:
        if limit is not None:
            _limit_event(session, task_id, actor, limit, ctx)

    # An operator's terminate recorded meanwhile wins: the task ends as they asked, with
    # this failure in its event (bot.lifecycle.terminate.terminate_instead).
    decided = await decide(ctx, github, task_id, move, within=limit_event)
    if isinstance(decided, str):
        return decided
    if decided.terminated_by is not None:
        return f"terminated as {decided.terminated_by} asked"
    await publish(ctx.db, github, decided.moved, clock=ctx.clock)
    return f"failed: {error}"


async def decide(
    ctx: LifecycleContext,
    github: GitHubApi | None,
    task_id: int,
    move: Move,
    *,
    within: Callable[[Session, Transitioned], None] | None = None,
) -> terminate.Decided | str:
    """An ending that an operator's recorded terminate overrides (delivered, a question, a
    retry, a failure): decided under the task's row lock, in one transaction. The terminate is
    shown on GitHub here; the caller's own move is the caller's to show (a retry enqueues
    its job first)."""

    def unit(session: Session) -> terminate.Decided:
        decided = terminate.unless_requested(session, task_id, move, ctx.clock)
        if within is not None:
            within(session, decided.moved)
        return decided

    try:
        decided = await ctx.db.run(unit)
    except IllegalTransition as exc:
        return _moved(task_id, exc)
    except LeaseLost:
        return _fenced_out(task_id)
    if decided.terminated_by is not None:
        asked = decided.terminated_by
        log.info("lifecycle: task %s terminated as %s asked, not %s", task_id, asked, move.wanted)
        await publish(ctx.db, github, decided.moved, create_progress=False, clock=ctx.clock)
    return decided


async def _retry_later(
    ctx: LifecycleContext,
    github: GitHubApi | None,
    task: Task,
    actor: str,
    *,
    error: str,
    fence: str | None,
) -> str:
    """Queue the running task's next attempt after its backoff, saying so on the issue; or,
    when an operator's terminate was recorded for it, terminate it as asked instead."""
    task_id = task.id
    delay = ctx.policy.backoff(task.attempts)
    job = job_id(task.id, task.generation, f"a{task.attempts + 1}")
    move = Move(
        TaskState.QUEUED,
        actor=actor,
        detail=f"attempt {task.attempts} failed; retrying in {delay:g} s",
        data={"error": error, "retry_in": delay},
        # Only a running task is retried: a terminated one stays terminated.
        expect=[TaskState.RUNNING],
        changes={"last_error": error, "job_id": job},
        phase=Phase.RETRYING,
        note=(
            f"Attempt {task.attempts} of {ctx.policy.max_attempts} failed: {error}\n"
            f"Retrying in {delay:g} s."
        ),
        fence=fence,
    )

    decided = await decide(ctx, github, task_id, move)
    if isinstance(decided, str):
        return decided
    if decided.terminated_by is not None:
        return f"terminated as {decided.terminated_by} asked"
    # Committed as queued before any request was recorded. An operator's terminate since
    # (it waited on this retry's row) is not overtaken by the job: a task it terminated
    # gets none, and a request still recorded is applied first.
    now = await ctx.db.run(tasks.get_task, task_id)
    if now.state != TaskState.QUEUED or now.job_id != job:
        log.info("lifecycle: task %s became %s; retry %s not enqueued", task_id, now.state, job)
        return f"stopped: task became {now.state}"
    if (asked := await ctx.db.run(terminate.requested_by, task_id)) is not None:
        return await _terminate_queued(ctx, github, task_id, asked)
    queue = LifecycleQueue(ctx.redis, name=ctx.queue_name, time_limit=ctx.policy.time_limit)
    await asyncio.to_thread(queue.enqueue, task_id, job=job, delay=delay)
    await publish(ctx.db, github, decided.moved, clock=ctx.clock)
    return f"retry: {error}"


async def _terminate_queued(
    ctx: LifecycleContext, github: GitHubApi | None, task_id: int, actor: str
) -> str:
    """The recorded terminate of a task this retry queued, applied now (its job never
    enqueued); left to the reconciler while a frozen process holds the row."""
    try:
        if await terminate.apply(ctx.db, github, task_id, actor, ctx.clock):
            return f"terminated as {actor} asked"
    except OperationalError as exc:
        if not is_lock_timeout(exc):
            raise
        log.warning("lifecycle: task %s not enqueued: terminate by %s pending", task_id, actor)
    return f"stopped: {actor} asked to terminate"


def _limit_event(
    session: Session, task_id: int, actor: str, limit: str, ctx: LifecycleContext
) -> None:
    tasks.record(
        session,
        tasks.get_task(session, task_id),
        EventKind.LIMIT_EXCEEDED,
        actor=actor,
        detail=limit_text(ctx, limit),
        data={"limit": limit},
        clock=ctx.clock,
    )
