"""RQ workers for the lifecycle queue: RQ's forking `Worker` for `steelframe worker`, and an
in-process `SimpleWorker` for `steelframe dev` (in a thread) and tests.

Both are RQ's own classes with two additions: a work horse that dies is recovered at once
(`handle_work_horse_killed`), and the in-process one can run off the main thread, stops on
request within a second and moves due scheduled jobs (retry backoff) itself.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from rq import Queue, SimpleWorker, Worker
from rq.job import Job
from rq.timeouts import TimerDeathPenalty

from bot.lifecycle import context
from bot.lifecycle.recovery import recover_dead_run

log = logging.getLogger(__name__)
IDLE_POLL_SECONDS = 1


def _task_of(job: Job) -> int | None:
    args = job.args or ()
    return int(args[0]) if args and isinstance(args[0], int) else None


class LifecycleWorker(Worker):
    """RQ's forking worker; a killed work horse's task is retried or failed right away."""

    def handle_work_horse_killed(self, job: Job, retpid: int, ret_val: int, rusage: Any) -> None:
        super().handle_work_horse_killed(job, retpid, ret_val, rusage)
        task_id = _task_of(job)
        if task_id is None:
            return
        reason = f"the worker process running it died (wait status {ret_val})"
        recover_dead_run(context.current(), task_id, reason=reason, dead_pid=retpid)


class InProcessWorker(SimpleWorker):
    """RQ's SimpleWorker, usable from a background thread and stoppable with `stop()`."""

    # RQ's default job timeout uses SIGALRM, which only the main thread may set.
    death_penalty_class = TimerDeathPenalty

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stopping = threading.Event()

    def stop(self) -> None:
        """Finish the current job (if any), then leave `work()` within about a second."""
        self._stopping.set()

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is threading.main_thread():
            super()._install_signal_handlers()

    def _enqueue_due(self) -> None:
        """Move scheduled jobs that are due (retry backoff) onto their queue, as RQ's
        scheduler process would; only when there are any, so an idle worker stays quiet."""
        if any(q.scheduled_job_registry.get_jobs_to_schedule(chunk_size=1) for q in self.queues):
            self._start_scheduler(burst=True)

    def dequeue_job_and_maintain_ttl(
        self, timeout: int | None, max_idle_time: int | None = None
    ) -> tuple[Job, Queue] | None:
        if timeout is None:  # burst mode: one non-blocking look
            self._enqueue_due()
            return super().dequeue_job_and_maintain_ttl(None, max_idle_time)
        while not self._stopping.is_set():
            self._enqueue_due()
            found = super().dequeue_job_and_maintain_ttl(IDLE_POLL_SECONDS, IDLE_POLL_SECONDS)
            if found is not None:
                return found
        return None
