"""A retry lost in a restart (its scheduled job gone with Redis, or never enqueued) does not
leave the task `queued` forever: the reconciler beside `dev`'s in-process worker enqueues it
again within about two lease periods, not only at the next start."""

from __future__ import annotations

import asyncio

from bot.lifecycle.queue import LifecycleQueue
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, apply
from steelframe.dev_worker import WorkerThread
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make, wait_for
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture


async def test_a_retry_whose_job_vanished_in_a_restart_runs_without_another_restart(
    make: Make,
) -> None:
    lc = await make(coding_command=command("commit"), task_lease_seconds=2.0)
    issue = await lc.open_issue()
    task = lc.task(issue)
    # The state a restart leaves: the task says "retrying in 30 s", its job is gone.
    lc.ctx.db.call(
        lambda s: apply(
            s,
            task.id,
            Move(TaskState.RUNNING, actor="worker:before-restart", changes={"attempts": 1}),
        )
    )
    lc.ctx.db.call(
        lambda s: apply(
            s,
            task.id,
            Move(
                TaskState.QUEUED,
                actor="worker:before-restart",
                detail="attempt 1 failed; retrying in 30 s",
            ),
        )
    )
    LifecycleQueue(lc.ctx.redis, name=lc.ctx.queue_name).rq.empty()
    assert lc.queued_jobs() == []
    worker = WorkerThread(lc.ctx)  # the restarted `dev`: its start-up pass is within grace
    worker.start()
    try:
        await wait_for(lambda: lc.task(issue).state == TaskState.DELIVERED, within=90)
    finally:
        # Off the event loop: the job may still be making its last GitHub calls, which the
        # sandbox on this loop must answer. Generous on a loaded machine: the worker's own
        # threads (RQ's command subscriber) must be gone before the test's Redis closes.
        await asyncio.to_thread(worker.stop, timeout=60)
    await lc.settle()
    assert len(await lc.pulls()) == 1
