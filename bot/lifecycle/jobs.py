"""The RQ job functions of the `steelframe-lifecycle` queue, and RQ's failure callbacks.

Top-level, importable by path, enqueued with only a task id. The lifecycle worker that runs
one calls it with its `LifecycleContext` first (`bot.lifecycle.worker.LifecycleJob`): the
context its entry point built once from the worker's settings. Each job opens its own
database sessions through it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from redis import Redis
from rq.job import Job

from bot.lifecycle.context import LifecycleContext
from bot.lifecycle.recovery import recover_dead_run
from bot.lifecycle.run import run_task
from bot.lifecycle.worker import lifecycle_of, task_of

log = logging.getLogger(__name__)


def task_lifecycle(lifecycle: LifecycleContext, task_id: int) -> str:
    """Run a queued task: mark it running, prepare the worktree, run the coding runtime,
    then deliver (branch + PR), ask (comment + `steelframe:needs_human`) or fail/retry.

    Run twice (a duplicate enqueue, a second pickup, RQ re-running it): the second run
    either finds the lease held and records a `trigger_ignored` event, or finds the task no
    longer queued and does nothing. Every GitHub step is idempotent (markers, stored ids),
    so a rerun after a crash never doubles a comment or a pull request.
    """
    return asyncio.run(run_task(lifecycle, task_id, continuation=False))


def task_continue(lifecycle: LifecycleContext, task_id: int) -> str:
    """Continue a task a Decision resumed: the same run, with the decision's text and the
    runtime session (or transcript) stored when the first run started.

    Run twice: as `task_lifecycle` (lease, then state check); a continuation whose task is
    no longer `running` does nothing.
    """
    return asyncio.run(run_task(lifecycle, task_id, continuation=True))


def on_job_failure(job: Job, connection: Redis, *exc_info: Any) -> None:
    """RQ's failure callback: the job raised (RQ's own timeout, a bug). The task is retried
    or failed now instead of waiting for its lease to expire. Called twice: the second call
    finds the task no longer running and does nothing."""
    task_id = task_of(job)
    if task_id is not None:
        reason = f"the worker job failed ({exc_info[0].__name__ if exc_info else 'error'})"
        recover_dead_run(lifecycle_of(job), task_id, reason=reason, dead_pid=None)


def on_job_stopped(job: Job, connection: Redis) -> None:
    """RQ's stopped callback (a stop-job command): the run is gone; if the task was not
    terminated (an operator stopped the job by hand), it is retried or failed."""
    task_id = task_of(job)
    if task_id is not None:
        recover_dead_run(
            lifecycle_of(job), task_id, reason="the worker job was stopped", dead_pid=None
        )
