"""Fenced finishes: every change a run makes carries its lease; a run that stalled past its
lease and wakes after another took the task over changes nothing."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from rq.job import Job

from bot.errors import Conflict
from bot.lifecycle import leases, tasks
from bot.lifecycle.finish import finish_delivered, finish_failed
from bot.lifecycle.leases import Holder
from bot.lifecycle.states import TaskState
from bot.lifecycle.tasks import LeaseLost
from tests.fakes.coding import command
from tests.fakes.lifecycle import Lifecycle, Make, gone, wait_for
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir, launcher_of, runtime_pids
from tests.fakes.workers import start_worker


async def _snapshot(lc: Lifecycle, issue: int) -> dict[str, Any]:
    task = lc.task(issue)
    return {
        "state": task.state,
        "attempts": task.attempts,
        "runtime_seconds": task.runtime_seconds,
        "cost": task.cost_usd,
        "pushed_at": task.pushed_at,
        "pr": task.pr_url,
        "summary": task.summary,
        "events": [(e.id, e.kind, e.to_state) for e in lc.events(task.id)],
        "comments": [(c["id"], c["body"]) for c in await lc.comments(issue)],
        "labels": await lc.labels(issue),
        "pulls": await lc.pulls(),
        "branch": lc.branch_file("LATE.md", f"steelframe/issue-{issue}"),
    }


def _lease_expired(lc: Lifecycle, task_id: int) -> bool:
    lease = lc.ctx.db.call(leases.current, task_id)
    return lease is not None and lease.expires_at < lc.ctx.clock()


@pytest.mark.slow
async def test_a_stalled_run_that_wakes_after_a_takeover_changes_nothing(
    make: Make, tmp_path: Path
) -> None:
    started, go = exchange_dir(tmp_path) / "started", exchange_dir(tmp_path) / "go"
    lc = await make(coding_command=command("wait_go", started, go), task_lease_seconds=1.0)
    issue = await lc.open_issue()
    task = lc.task(issue)
    worker = start_worker(lc, tmp_path / "worker.log")
    horse = None
    try:
        await wait_for(lambda: started.exists() and started.read_text().strip(), within=60)
        (runtime,) = runtime_pids(str(started))
        horse = launcher_of(runtime)
        # The whole worker stalls (a frozen VM, a GC pause): no heartbeat, no reconciler.
        os.killpg(worker.pid, signal.SIGSTOP)
        os.kill(horse, signal.SIGSTOP)
        await wait_for(lambda: _lease_expired(lc, task.id), within=30)
        # Another run takes the task over (its lease outlives this test).
        other = Holder.this_process()
        assert leases.acquire(lc.ctx.db, task.id, other, ttl=600, clock=lc.ctx.clock)
        before = await _snapshot(lc, issue)
        assert before["state"] == TaskState.RUNNING
        go.write_text("go\n")  # the runtime finishes its work while its worker sleeps
        assert await gone(runtime, within=30)
        os.kill(horse, signal.SIGCONT)
        os.killpg(worker.pid, signal.SIGCONT)
        # The job that ran it (the worker's start-up reconcile may have re-enqueued it).
        job = Job.fetch(str(lc.task(issue).job_id), connection=lc.ctx.redis)
        await wait_for(lambda: job.get_status(refresh=True) == "finished", within=60)
        assert job.return_value() == "stopped: lease lost"
        await lc.settle()
        assert await _snapshot(lc, issue) == before  # nothing at all changed
        assert lc.ctx.db.call(leases.current, task.id).holder == other.id
    finally:
        if horse is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(horse, signal.SIGCONT)
        os.killpg(worker.pid, signal.SIGCONT)
        os.killpg(worker.pid, signal.SIGTERM)
        await asyncio.to_thread(worker.wait, 30)


async def test_every_finish_of_a_run_that_lost_its_lease_is_refused(make: Make) -> None:
    lc = await make()
    issue = await lc.open_issue(pickup=False)
    result = await lc.service.pickup(lc.repo, issue, title="x", body="y", cause="test")
    first, second = Holder.this_process(), Holder.this_process()
    db, clock = lc.ctx.db, lc.ctx.clock
    assert leases.acquire(db, result.task_id, first, ttl=60, clock=clock)
    db.call(tasks.transition, result.task_id, TaskState.RUNNING, actor="t", fence=first.id)

    def expire(session: Any) -> None:
        lease = leases.current(session, result.task_id)
        lease.expires_at = clock() - timedelta(seconds=1)

    db.call(expire)
    # Expired and not taken over: still fenced out (a stalled run cannot finish late).
    with pytest.raises(LeaseLost):
        db.call(tasks.touch, result.task_id, clock, fence=first.id, summary="late")
    assert leases.acquire(db, result.task_id, second, ttl=60, clock=clock)
    assert isinstance(LeaseLost("x"), Conflict)
    async with lc.ctx.github() as github:  # type: ignore[misc]
        said = await finish_delivered(
            lc.ctx, github, result.task_id, "t", summary="late", fence=first.id
        )
        assert said == "stopped: lease lost"
        said = await finish_failed(
            lc.ctx, github, result.task_id, "t", error="late", retry=True, fence=first.id
        )
        assert said == "stopped: lease lost"
    task = lc.task(issue)
    assert task.state == TaskState.RUNNING and task.summary is None and task.last_error is None
    with pytest.raises(LeaseLost):
        leases.check(db, result.task_id, first, clock=clock)
    leases.check(db, result.task_id, second, clock=clock)  # the holder passes
