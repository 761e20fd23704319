"""The `steelframe-lifecycle` RQ queue, on an injected Redis connection.

Jobs are named by import path so enqueuing never imports the worker's code; job ids carry
the task, generation and attempt (plus a nonce: a re-enqueue never collides with an old
job still kept in a registry). Jobs are JSON and fetched as `TrustedJob`s
(`bot.lifecycle.trusted_jobs`): nothing read from Redis is unpickled or run unless it is one
of Steelframe's own jobs.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import timedelta

import redis
from rq import Callback, Queue
from rq.command import send_stop_job_command
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job, JobStatus

from bot.lifecycle.context import DEFAULT_QUEUE
from bot.lifecycle.trusted_jobs import (
    CONTINUE_JOB,
    JOB_SERIALIZER,
    LIFECYCLE_JOB,
    ON_FAILURE,
    ON_STOPPED,
    TrustedJob,
)

log = logging.getLogger(__name__)

# Beyond the coding runtime's own limit: clone, push and GitHub calls around it.
JOB_OVERHEAD_SECONDS = 600
RESULT_TTL_SECONDS = 24 * 3600
PENDING = frozenset({JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.DEFERRED, JobStatus.STARTED})


def job_id(task_id: int, generation: int, label: str) -> str:
    return f"task-{task_id}-g{generation}-{label}-{uuid.uuid4().hex[:6]}"


def rq_queue(name: str, connection: redis.Redis, job_class: type[Job] = TrustedJob) -> Queue:
    """RQ's queue `name` as every lifecycle process must open it: JSON jobs, fetched as
    `TrustedJob`s (a queue opened with RQ's defaults would unpickle what it reads)."""
    return Queue(name, connection=connection, job_class=job_class, serializer=JOB_SERIALIZER)


class LifecycleQueue:
    def __init__(
        self,
        connection: redis.Redis,
        *,
        name: str = DEFAULT_QUEUE,
        time_limit: float = 1800.0,
    ) -> None:
        self.connection = connection
        self.rq = rq_queue(name, connection)
        self.job_timeout = int(time_limit) + JOB_OVERHEAD_SECONDS

    @property
    def name(self) -> str:
        return self.rq.name

    def enqueue(
        self, task_id: int, *, job: str, continuation: bool = False, delay: float = 0.0
    ) -> str:
        """Enqueue the task's run as job id `job`, now or after `delay` seconds.

        Delayed jobs need a worker started with the scheduler (`steelframe worker` does)."""
        options = {
            "job_id": job,
            "job_timeout": self.job_timeout,
            "result_ttl": RESULT_TTL_SECONDS,
            "on_failure": Callback(ON_FAILURE),
            "on_stopped": Callback(ON_STOPPED),
            "description": f"task {task_id} ({'continue' if continuation else 'run'})",
        }
        func = CONTINUE_JOB if continuation else LIFECYCLE_JOB
        if delay > 0:
            self.rq.enqueue_in(timedelta(seconds=delay), func, task_id, **options)
        else:
            self.rq.enqueue(func, task_id, **options)
        log.info("lifecycle: enqueued %s for task %s (delay %.1fs)", job, task_id, delay)
        return job

    def status(self, job: str | None) -> JobStatus | None:
        """The job's RQ status, or None when Redis no longer knows it."""
        if not job:
            return None
        try:
            return TrustedJob.fetch(job, connection=self.connection).get_status(refresh=False)
        except NoSuchJobError:
            return None

    def is_pending(self, job: str | None) -> bool:
        return self.status(job) in PENDING

    def is_started(self, job: str | None) -> bool:
        return self.status(job) == JobStatus.STARTED

    def cancel_queued(self, job: str | None) -> bool:
        """Cancel the job if it has not started; False if it has (or is gone)."""
        if self.status(job) not in (JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.DEFERRED):
            return False
        try:
            TrustedJob.fetch(str(job), connection=self.connection).cancel()
        except (NoSuchJobError, InvalidJobOperation):
            return False
        return True

    def cancel(self, job: str | None) -> str:
        """Cancel a job that has not started; ask the worker to stop one that has.

        Returns what was done: "cancelled", "stop_sent" or "none"."""
        status = self.status(job)
        if job is None or status is None:
            return "none"
        if status in (JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.DEFERRED):
            try:
                TrustedJob.fetch(job, connection=self.connection).cancel()
                return "cancelled"
            except (NoSuchJobError, InvalidJobOperation):
                return "none"
        if status == JobStatus.STARTED:
            try:
                send_stop_job_command(self.connection, job)
                return "stop_sent"
            except (NoSuchJobError, InvalidJobOperation):
                return "none"
        return "none"


async def enqueue_committed(
    queue: LifecycleQueue | None, task_id: int, job: str, what: str
) -> None:
    """Enqueue `what` (a fix run, an update run) of a task already committed as `running`
    with job id `job`. No queue here, or Redis failing, is logged only: the reconciler
    recovers a running task whose job is gone."""
    if queue is None:
        log.warning("lifecycle: task %s: no queue; the reconciler runs the %s", task_id, what)
        return
    try:
        await asyncio.to_thread(queue.enqueue, task_id, job=job, continuation=True)
    except redis.RedisError as exc:
        log.warning("lifecycle: task %s %s not enqueued yet (%s)", task_id, what, exc)
