"""The lifecycle bench's queue is the test's own: a worker a finished test leaked (same Redis
database, listening on the default queue or on that test's queue) cannot take this test's
job, and the service, the bench's worker and `start_worker` all use the one name."""

from __future__ import annotations

import asyncio

from bot.lifecycle.context import DEFAULT_QUEUE
from bot.lifecycle.queue import rq_queue
from bot.lifecycle.states import TaskState
from bot.lifecycle.worker import InProcessWorker
from tests.fakes.coding import command
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture


def leaked_worker(lc: Lifecycle, queue: str) -> InProcessWorker:
    """A worker as a finished test would have left it: on `queue`, with its own context."""
    return InProcessWorker(
        [rq_queue(queue, lc.ctx.redis)], connection=lc.ctx.redis, lifecycle=lc.ctx
    )


async def test_a_worker_on_another_queue_leaves_the_tests_job_alone(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    assert lc.queue.name == lc.ctx.queue_name != DEFAULT_QUEUE
    issue = await lc.open_issue()
    (job,) = lc.queued_jobs()  # the service enqueued on the test's queue
    earlier = f"{DEFAULT_QUEUE}-an-earlier-test"
    for queue in (DEFAULT_QUEUE, earlier):
        await asyncio.to_thread(leaked_worker(lc, queue).work, burst=True)
    assert lc.queued_jobs() == [job]
    assert lc.task(issue).state == TaskState.QUEUED
    await lc.work()  # the bench's own worker takes it
    assert lc.task(issue).state == TaskState.DELIVERED


async def test_each_bench_has_a_queue_of_its_own(make: Make) -> None:
    first, second = await make(), await make()
    assert first.ctx.queue_name != second.ctx.queue_name
    assert second.queue.name == second.ctx.queue_name
