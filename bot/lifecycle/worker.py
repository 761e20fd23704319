"""RQ workers for the lifecycle queue: RQ's forking `Worker` for `steelframe worker`, and an
in-process `SimpleWorker` for `steelframe dev` (in a thread) and tests.

Both are RQ's own classes with four additions: they read and run only Steelframe's own jobs,
in JSON (`bot.lifecycle.trusted_jobs`: every job they fetch is a `TrustedJob`, and a refused
one fails with its reason in the log, nothing of it run); each is given the
`LifecycleContext` its entry point built and hands it to every job it runs (`LifecycleJob`:
a job is enqueued with only a task id, and its function is called with the context first);
a work horse that dies is recovered at once (`handle_work_horse_killed`); and the in-process
one can run off the main thread, stops on request within a second and moves due scheduled
jobs (retry backoff) itself. A stop signalled while the worker starts (`StopRequest`) is a
warm shutdown at the loop's first turn.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar, cast

from rq import Queue, SimpleWorker, Worker
from rq.job import Job
from rq.timeouts import TimerDeathPenalty
from rq.worker import BaseWorker

from bot.events.publisher import settle_owed
from bot.github.app_auth import KeptTokens, hand_over, take_over
from bot.heap_freeze import frozen_for_fork
from bot.lifecycle.context import AppClients, LifecycleContext
from bot.lifecycle.recovery import recover_dead_run
from bot.lifecycle.trusted_jobs import JOB_SERIALIZER, RefusedJob, TrustedJob, trusted_task_id
from bot.stop_request import STOP_SIGNALS, StopRequest

log = logging.getLogger(__name__)
IDLE_POLL_SECONDS = 1
# How long stopping waits for the command listener (it exits as soon as its read returns).
UNSUBSCRIBE_SECONDS = 10
SETTLE_OWED_SECONDS = 5.0  # after a job, trying to append the resyncs its events owe
SCHEDULER_STOP_SECONDS = 10.0  # then a scheduler process that has not stopped is killed
# A horse's tokens are written to the pipe at once only if they fit its buffer (64 KiB on
# Linux): the worker reads after the horse has exited, so a larger write would never end.
# A token is ~200 bytes: hundreds of scopes fit.
HANDBACK_MAX_BYTES = 60_000


def task_of(job: Job) -> int | None:
    """The task id a lifecycle job was enqueued with (None for any other job, and for a
    refused one: its task id is whatever its writer chose)."""
    return trusted_task_id(job)


class LifecycleJob(TrustedJob):
    """A job as a lifecycle worker fetches it: its function is called with the worker's
    context first, then the task id it was enqueued with. The context is a class attribute
    of the worker's own job class (`for_worker`), so every job that worker fetches carries
    it (the ones it runs and the abandoned ones its registry cleanup fails); it is never
    stored in Redis."""

    lifecycle: ClassVar[LifecycleContext | None] = None

    @classmethod
    def for_worker(cls, lifecycle: LifecycleContext) -> type[LifecycleJob]:
        return type(cls.__name__, (cls,), {"lifecycle": lifecycle, "__module__": __name__})

    @property
    def func(self) -> Callable[..., Any]:
        return partial(super().func, lifecycle_of(self))


def lifecycle_of(job: Job) -> LifecycleContext:
    """The context of the worker that fetched `job` (ready for this process: a forked work
    horse opens its own database connections)."""
    lifecycle = cast(LifecycleContext | None, getattr(job, "lifecycle", None))
    if lifecycle is None:
        raise RuntimeError(
            f"job {job.id} needs a lifecycle worker (`steelframe worker`), which gives it "
            "the lifecycle context; this worker gave none"
        )
    lifecycle.after_fork()
    return lifecycle


class _ContextGivingWorker(BaseWorker):
    """What both workers add to RQ's: the entry point's context, given to every job the
    worker fetches through its job class (its queues and their registries use it too)."""

    # How long stopping waits for the scheduler process, and how often it asks again.
    scheduler_stop_seconds: float = SCHEDULER_STOP_SECONDS
    scheduler_nudge_seconds: float = 0.5

    def __init__(
        self,
        queues: list[Queue],
        *,
        lifecycle: LifecycleContext,
        stop_request: StopRequest | None = None,
        jobs: type[LifecycleJob] = LifecycleJob,
        **kwargs: Any,
    ) -> None:
        job_class = jobs.for_worker(lifecycle)
        super().__init__(queues, job_class=job_class, serializer=JOB_SERIALIZER, **kwargs)
        for queue in self.queues:
            queue.job_class = job_class
            queue.serializer = JOB_SERIALIZER
        self.lifecycle = lifecycle
        self.stop_request = stop_request

    def _install_signal_handlers(self) -> None:
        """RQ's handlers, then any stop signalled before they were in: checked after them
        too, so a signal lands either in the request or in RQ's handler, never between.
        (RQ calls this just outside its loop's `try`, so nothing slow comes after them.)"""
        request = self.stop_request
        if request is not None and request.requested:
            self.log.info("Worker %s: %s while starting; stopping", self.name, request.signal_name)
            self._stop_requested = True
        super()._install_signal_handlers()  # type: ignore[no-untyped-call]  # RQ's, untyped
        if request is not None and request.requested:
            self._stop_requested = True

    def stop_scheduler(self) -> None:
        """RQ's sends the scheduler process one SIGTERM and waits for it without a bound. A
        scheduler forked moments before the stop (a worker stopped as it starts) loses a
        SIGTERM that reaches it before CPython's after-fork step has run (its process group's
        and this one alike): it then installs its handlers and schedules on, and the worker
        waited on it until killed. Asked again every `scheduler_nudge_seconds` until it has
        stopped; killed once `scheduler_stop_seconds` pass (it stops within a second of
        being asked once its handlers are in: its loop's interval)."""
        process = self.scheduler._process if self.scheduler is not None else None
        if process is None or process.pid is None:
            return
        deadline = time.monotonic() + self.scheduler_stop_seconds
        while process.is_alive() and time.monotonic() < deadline:
            with contextlib.suppress(OSError):  # gone meanwhile
                os.kill(process.pid, signal.SIGTERM)
            process.join(timeout=self.scheduler_nudge_seconds)
        if process.is_alive():
            self.log.warning(
                "Worker %s: the scheduler (PID %s) did not stop within %.0f s; killed",
                self.name,
                process.pid,
                self.scheduler_stop_seconds,
            )
            process.kill()
            process.join()

    def handle_exception(self, job: Job, *exc_info: Any) -> None:
        """A refused job is one line naming why (no traceback: nothing of it ran)."""
        if isinstance(exc_info[1], RefusedJob):
            self.log.error("Worker %s: refused job %s: %s", self.name, job.id, exc_info[1])
            return
        super().handle_exception(job, *exc_info)

    def unsubscribe(self) -> None:
        """Stop the command listener (RQ's pubsub thread, reading with a 60 s timeout) at
        once. RQ's order (unsubscribe, then stop the listener) races: the listener can read
        the unsubscribe reply and block in its next read before it is told to stop, and
        since redis-py 8.2 `stop()` waits for the thread, so every worker took up to 60 s to
        stop. Told first without waiting (`timeout=0`), the reply wakes it and it exits."""
        if self.pubsub_thread is None or self.pubsub is None:
            return
        self.pubsub_thread.stop(timeout=0)
        self.pubsub.unsubscribe()
        self.pubsub_thread.join(timeout=UNSUBSCRIBE_SECONDS)
        if not self.pubsub_thread.is_alive():
            self.pubsub.close()


class LifecycleWorker(_ContextGivingWorker, Worker):
    """RQ's forking worker; a killed work horse's task is retried or failed right away, and
    the installation tokens a work horse minted are handed back to the worker (`_handback`)."""

    # The pipe a work horse hands its tokens back through: the worker's read end, the
    # horse's write end (both O_CLOEXEC: no program a job runs inherits either).
    _handback: tuple[int, int] | None = None
    # The worker's signal mask before `fork_work_horse` blocked the stop signals.
    _mask_before_fork: set[int | signal.Signals] | None = None

    def fork_work_horse(self, job: Job, queue: Queue) -> None:
        """RQ's fork with SIGTERM and SIGINT blocked across it, until the horse has put in its
        own handlers (`setup_work_horse_signals`); the worker unblocks them as soon as the
        fork returns. Unblocked, the horse begins with the worker's handlers: one that
        arrived before CPython's after-fork step was dropped (the step clears what was
        caught), one after it ran RQ's `request_stop` in the horse, which writes the
        worker's shutdown into Redis or raises StopRequested out of the fork, so the horse
        went on as a second worker loop. Blocked, the kernel holds it for the horse's own
        handlers: SIGTERM ends the horse, SIGINT is ignored, as RQ means them to be."""
        before = self._mask_before_fork = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            self._fork_frozen(job, queue)
        finally:  # in the worker (the horse exits inside RQ's fork)
            signal.pthread_sigmask(signal.SIG_SETMASK, before)

    def setup_work_horse_signals(self) -> None:
        """In the horse: RQ's handlers, then the mask the worker had, so a stop held back
        across the fork is delivered to them."""
        super().setup_work_horse_signals()  # type: ignore[no-untyped-call]  # RQ's, untyped
        if self._mask_before_fork is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self._mask_before_fork)

    def _fork_frozen(self, job: Job, queue: Queue) -> None:
        kept = self._kept_tokens()
        if kept is None:
            with frozen_for_fork():  # the horse never leaves it: it exits inside RQ's fork
                super().fork_work_horse(job, queue)
            return
        self._handback = os.pipe()
        with frozen_for_fork():
            super().fork_work_horse(job, queue)
        os.close(self._handback[1])  # the worker's copy: EOF once the horse has exited

    def monitor_work_horse(self, *args: Any, **kwargs: Any) -> None:
        """After RQ's wait for the horse (its end, or its kill): take its tokens."""
        try:
            super().monitor_work_horse(*args, **kwargs)
        finally:
            self._take_handed_tokens()

    def perform_job(self, *args: Any, **kwargs: Any) -> bool:
        """In the work horse, which exits right after, and its timer threads with it: the
        resyncs its job's events still owe (Redis was down) are appended first, and its
        tokens handed to the worker."""
        try:
            return bool(super().perform_job(*args, **kwargs))
        finally:
            settle_owed(within=SETTLE_OWED_SECONDS)
            self._hand_tokens_back()

    def _kept_tokens(self) -> KeptTokens | None:
        github = self.lifecycle.github
        return github.kept if isinstance(github, AppClients) else None

    def _hand_tokens_back(self) -> None:
        """In the horse: its fresh tokens, in one write the worker reads once the horse has
        exited. A token minted here served one job and died with the horse; the next job's
        horse, forked from the worker, minted the same scope again (ten runs for one
        installation minted 81 tokens where one process minted 9)."""
        kept, handback = self._kept_tokens(), self._handback
        if kept is None or handback is None:
            return
        data = hand_over(kept, clock=time.time)
        try:
            os.close(handback[0])
            if len(data) <= HANDBACK_MAX_BYTES:
                os.set_blocking(handback[1], False)
                os.write(handback[1], data)
        except OSError as exc:  # nothing handed back: the next job mints, as before
            log.warning("work horse: could not hand its tokens back: %s", exc)
        finally:
            with contextlib.suppress(OSError):
                os.close(handback[1])

    def _take_handed_tokens(self) -> None:
        kept, handback = self._kept_tokens(), self._handback
        if kept is None or handback is None:
            return
        self._handback = None
        chunks = []
        try:
            os.set_blocking(handback[0], False)  # a horse's own child holding it: no wait
            while chunk := os.read(handback[0], 65536):
                chunks.append(chunk)
        except BlockingIOError:
            pass
        finally:
            os.close(handback[0])
        if chunks:
            take_over(kept, b"".join(chunks))

    def handle_work_horse_killed(self, job: Job, retpid: int, ret_val: int, rusage: Any) -> None:
        super().handle_work_horse_killed(job, retpid, ret_val, rusage)  # type: ignore[no-untyped-call]
        task_id = task_of(job)
        if task_id is None:
            return
        reason = f"the worker process running it died (wait status {ret_val})"
        recover_dead_run(self.lifecycle, task_id, reason=reason, dead_pid=retpid)


class InProcessWorker(_ContextGivingWorker, SimpleWorker):
    """RQ's SimpleWorker, usable from a background thread and stoppable with `stop()`."""

    # RQ's default job timeout uses SIGALRM, which only the main thread may set.
    death_penalty_class = TimerDeathPenalty

    def __init__(self, queues: list[Queue], *, lifecycle: LifecycleContext, **kwargs: Any) -> None:
        super().__init__(queues, lifecycle=lifecycle, **kwargs)
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
