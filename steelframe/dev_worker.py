"""The in-process lifecycle worker of `steelframe dev`: reconciles, then works the queue on a
background thread until stopped, reconciling every lease period beside it (as `steelframe
worker` does), so a retry lost in a restart is enqueued again instead of waiting forever."""

from __future__ import annotations

import logging
import threading

from bot.lifecycle.context import LifecycleContext
from bot.lifecycle.queue import rq_queue
from bot.lifecycle.reconcile import reconcile_until, run_reconcile
from bot.lifecycle.worker import InProcessWorker

log = logging.getLogger("steelframe.dev")


class WorkerThread:
    """An in-process worker on a background thread (`steelframe dev`): reconciles, then
    works the queue until `stop()`."""

    def __init__(self, ctx: LifecycleContext) -> None:
        self.ctx = ctx
        self.worker = InProcessWorker(
            [rq_queue(ctx.queue_name, ctx.redis)], connection=ctx.redis, lifecycle=ctx
        )
        self._thread = threading.Thread(target=self._run, name="lifecycle-worker", daemon=True)
        self._stop_reconciling = threading.Event()
        self._reconciler = threading.Thread(
            target=reconcile_until,
            args=(ctx, self._stop_reconciling),
            name="lifecycle-reconciler",
            daemon=True,
        )

    def start(self) -> None:
        self._thread.start()
        self._reconciler.start()

    def _run(self) -> None:
        try:
            run_reconcile(self.ctx, say=lambda line: None)
        except Exception:
            log.exception("worker: reconcile at start failed; working anyway")
        self.worker.work(with_scheduler=False, logging_level=None)

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the worker to stop after its current job; wait up to `timeout` for it."""
        self._stop_reconciling.set()
        self.worker.stop()
        self._thread.join(timeout)
        self._reconciler.join(timeout)  # a pass in progress finishes before its parts close
        if self._thread.is_alive():
            log.warning(
                "worker: still finishing a job; its lease expires and the next start "
                "recovers the task"
            )
