"""A run's lease on a loaded worker: its heartbeat is not held up by the run's own work (its
event loop blocked, its thread pool busy), a run that lost its lease anyway hands its task
back at once, and the reconciler retries a task a stopped run left `running`.

Why: a CI run at load 20 lost its lease mid-run (its heartbeat, a task on the run's loop
renewing through the loop's default executor, did not renew within the 15 s lease), its
next fenced write was refused, and the task stayed `running` with no job and no lease."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session

from bot.lifecycle import leases
from bot.lifecycle import run as run_module
from bot.lifecycle.leases import Holder
from bot.lifecycle.models import Task, TaskLease
from bot.lifecycle.queue import LifecycleQueue
from bot.lifecycle.reconcile import run_reconcile
from bot.lifecycle.scope import Run
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, apply
from tests.fakes.coding import command
from tests.fakes.lifecycle import PATIENCE_SECONDS, Lifecycle, Make, wait_for
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir

Hold = Callable[[asyncio.AbstractEventLoop, threading.Event], None]


def _block_loop(loop: asyncio.AbstractEventLoop, released: threading.Event) -> None:
    """A synchronous call on the run's loop (a database call, a /proc scan) that lasts."""
    loop.call_soon_threadsafe(released.wait, PATIENCE_SECONDS)


def _busy_threads(loop: asyncio.AbstractEventLoop, released: threading.Event) -> None:
    """Every thread of the run loop's default executor busy with a long call (more calls
    than any default pool has threads), so whatever the run hands it waits its turn."""

    def fill() -> None:
        for _ in range(64):
            loop.run_in_executor(None, released.wait, PATIENCE_SECONDS)

    loop.call_soon_threadsafe(fill)


def _capture_loop(monkeypatch: pytest.MonkeyPatch) -> list[asyncio.AbstractEventLoop]:
    """The event loop each run's steps run on (the RQ job's own), as it starts them."""
    loops: list[asyncio.AbstractEventLoop] = []
    steps = run_module.work

    async def work(run: Run) -> str:
        loops.append(asyncio.get_running_loop())
        return await steps(run)

    monkeypatch.setattr(run_module, "work", work)
    return loops


async def _gated(lc_make: Make, tmp_path: Path, ttl: float) -> tuple[Lifecycle, Path, Path]:
    started, finish = exchange_dir(tmp_path) / "started.txt", exchange_dir(tmp_path) / "finish"
    lc = await lc_make(coding_command=command("gated", finish, started), task_lease_seconds=ttl)
    return lc, started, finish


@pytest.mark.parametrize("hold", [_block_loop, _busy_threads], ids=["loop-blocked", "pool-busy"])
async def test_a_run_whose_own_work_holds_up_its_loop_keeps_its_lease(
    make: Make, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hold: Hold
) -> None:
    # The run's loop (or its thread pool) is held for as long as it takes the lease to be
    # renewed past two TTLs; a heartbeat on that loop (or through that pool) renews nothing
    # meanwhile, and the lease lapses: another worker could take the task.
    ttl = 6.0  # a renewal every 2 s: the heartbeat thread keeps up on a loaded machine
    loops = _capture_loop(monkeypatch)
    lc, started, finish = await _gated(make, tmp_path, ttl)
    issue = await lc.open_issue()
    task = lc.task(issue)
    running = asyncio.ensure_future(lc.work())
    released = threading.Event()
    try:
        await wait_for(started.exists, within=PATIENCE_SECONDS)  # the runtime works
        first = lc.ctx.db.call(leases.current, task.id)
        assert first is not None and len(loops) == 1
        hold(loops[0], released)

        def held_past_two_ttls() -> bool:
            assert not leases.acquire(lc.ctx.db, task.id, Holder.this_process(), ttl=ttl), (
                "the lease lapsed while the run's loop was held up"
            )
            lease = lc.ctx.db.call(leases.current, task.id)
            assert lease is not None and lease.holder == first.holder
            return lease.heartbeat_at > first.expires_at + timedelta(seconds=ttl)

        await wait_for(held_past_two_ttls, within=PATIENCE_SECONDS)
    finally:
        released.set()  # the run goes on either way: a failure here is not a hang
        finish.touch()
        await running
    task = lc.task(issue)
    assert (task.state, task.attempts) == (TaskState.DELIVERED, 1)
    assert lc.ctx.db.call(leases.current, task.id) is None


def _set_lease(lc: Lifecycle, task_id: int, **values: Any) -> None:
    def write(session: Session) -> None:
        session.execute(update(TaskLease).where(TaskLease.task_id == task_id).values(**values))

    lc.ctx.db.call(write)


def _expired(lc: Lifecycle, task_id: int) -> None:
    """The run stalled past its lease and nobody took it: the lease is still the run's, but
    its fenced writes are refused (the CI run's case)."""
    _set_lease(lc, task_id, expires_at=lc.ctx.clock() - timedelta(seconds=1))


def _taken_by_a_dead_run(lc: Lifecycle, task_id: int) -> None:
    """Another run took the lapsed lease over and died at once."""
    dead = {"holder": "elsewhere:1:dead", "host": "elsewhere", "pid": 1}
    _set_lease(lc, task_id, expires_at=lc.ctx.clock() - timedelta(seconds=1), **dead)


@pytest.mark.parametrize("lose", [_expired, _taken_by_a_dead_run], ids=["expired", "taken"])
async def test_a_run_that_lost_its_lease_hands_its_task_back_at_once(
    make: Make, tmp_path: Path, lose: Callable[[Lifecycle, int], None]
) -> None:
    # A long lease: the heartbeat (every third of it) does not renew while the test works.
    lc, started, finish = await _gated(make, tmp_path, ttl=600.0)
    issue = await lc.open_issue()
    task = lc.task(issue)
    running = asyncio.ensure_future(lc.work())
    try:
        await wait_for(started.exists, within=PATIENCE_SECONDS)
        lose(lc, task.id)
    finally:
        finish.touch()
        await running  # a burst: whatever the first run left queued runs too
    task = lc.task(issue)
    story = [(e.kind, e.to_state, e.detail) for e in lc.events(task.id)]
    assert (task.state, task.attempts) == (TaskState.DELIVERED, 2), story
    retried = [e for e in lc.events(task.id) if e.to_state == TaskState.QUEUED and e.id > 1]
    assert len(retried) == 1 and "lost its lease" in retried[0].data["error"], story
    # Retried by the run that found its lease gone, in its name, not the reconciler's.
    started_by = next(e.actor for e in lc.events(task.id) if e.to_state == TaskState.RUNNING)
    assert retried[0].actor == started_by != "reconciler", story
    assert lc.ctx.db.call(leases.current, task.id) is None


async def test_a_running_task_a_stopped_run_left_without_a_lease_is_retried_by_the_reconciler(
    make: Make,
) -> None:
    # What a run that stopped on a lost lease leaves if it could not hand the task back
    # (its worker died right after): `running`, no lease, no job. The reconciler leaves it
    # for a lease period after its last change (a run may be starting) and retries it then.
    ttl = 3.0
    lc = await make(coding_command=command("commit"), task_lease_seconds=ttl)
    issue = await lc.open_issue()
    task = lc.task(issue)
    LifecycleQueue(lc.ctx.redis, name=lc.ctx.queue_name).rq.empty()
    lc.ctx.db.call(
        apply, task.id, Move(TaskState.RUNNING, actor="stopped-run", changes={"attempts": 1})
    )
    assert lc.ctx.db.call(leases.current, task.id) is None
    report = await asyncio.to_thread(run_reconcile, lc.ctx, say=lambda line: None)
    assert report.recovered == [] and lc.task(issue).state == TaskState.RUNNING

    def a_lease_period_ago(session: Session) -> None:
        past = lc.ctx.clock() - timedelta(seconds=ttl + 1)
        session.execute(update(Task).where(Task.id == task.id).values(updated_at=past))

    lc.ctx.db.call(a_lease_period_ago)
    report = await asyncio.to_thread(run_reconcile, lc.ctx, say=lambda line: None)
    assert report.recovered == [task.id]
    assert lc.task(issue).state == TaskState.QUEUED
    await lc.work()
    task = lc.task(issue)
    assert (task.state, task.attempts) == (TaskState.DELIVERED, 2)
    retried = [e for e in lc.events(task.id) if e.to_state == TaskState.QUEUED and e.id > 1]
    assert len(retried) == 1 and "lease expired" in retried[0].data["error"]
