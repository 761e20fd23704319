"""Fenced finishes: every change a run makes carries its lease, and its push lands only
while its claim on the branch stands; a run that stalled past its lease and wakes after
another took the task over changes nothing, on the remote branch neither."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.errors import Conflict
from bot.lifecycle import ci_store, leases, plan_store, tasks, worktree
from bot.lifecycle.ci_models import CiFix, CiFixState, CiVerdict
from bot.lifecycle.finish import finish_delivered, finish_failed
from bot.lifecycle.leases import Holder
from bot.lifecycle.plan_store import PlanStatus
from bot.lifecycle.states import TaskState
from bot.lifecycle.tasks import LeaseLost
from bot.lifecycle.transition import Move, apply
from bot.lifecycle.trusted_jobs import TrustedJob
from tests.fakes.coding import command
from tests.fakes.git import held_push_git, remote_refs
from tests.fakes.lifecycle import PATIENCE_SECONDS, Lifecycle, Make, gone, wait_for
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir, launcher_of, the_runtime
from tests.fakes.workers import start_worker, stop_processes


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
        "refs": remote_refs(_git_path(lc)),  # every branch and fence ref of the remote
    }


def _git_path(lc: Lifecycle) -> Path:
    repo = lc.sandbox.sandbox.world.repo(lc.repo)
    assert repo is not None and repo.git_path is not None
    return repo.git_path


def _lease_expired(lc: Lifecycle, task_id: int) -> bool:
    lease = lc.ctx.db.call(leases.current, task_id)
    return lease is not None and lease.expires_at < lc.ctx.clock()


def _write_lock_free(lc: Lifecycle, *, within: float = 0.5) -> bool:
    """Whether a write transaction could start on the database within `within` seconds:
    SQLite has one writer at a time, and a process frozen inside a write holds the whole
    file (a running one lets it go once its write commits)."""
    url = lc.ctx.db.engine.url
    if url.get_backend_name() != "sqlite":
        return True
    connection = sqlite3.connect(str(url.database), timeout=within)
    try:
        connection.execute("BEGIN IMMEDIATE")
        connection.rollback()
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        connection.close()


async def _freeze(lc: Lifecycle, worker: int, horse: int) -> None:
    """Stop the worker's group and its work horse between two database writes. Frozen inside
    one (a heartbeat, a reconciler pass: likelier on a loaded machine), it would hold
    SQLite's write lock, and the takeover below would find the database locked, not the
    stalled run this test is about; then they run until that write has committed and are
    stopped again."""
    deadline = time.monotonic() + PATIENCE_SECONDS
    while True:
        os.killpg(worker, signal.SIGSTOP)
        os.kill(horse, signal.SIGSTOP)
        if await asyncio.to_thread(_write_lock_free, lc):
            return
        assert time.monotonic() < deadline, "the worker held the database's write lock"
        os.kill(horse, signal.SIGCONT)
        os.killpg(worker, signal.SIGCONT)
        # Until its write has committed (SQLite's busy wait lets this one in then).
        left = max(deadline - time.monotonic(), 0.5)
        assert await asyncio.to_thread(_write_lock_free, lc, within=left), "a write never ended"


async def _take_over(lc: Lifecycle, issue: int, folder: Path) -> Holder:
    """What another run does when it takes the task over: take the expired lease (for
    longer than this test), then claim the task's branch before it clones."""
    task = lc.task(issue)
    other = Holder.this_process()
    assert leases.acquire(lc.ctx.db, task.id, other, ttl=600, clock=lc.ctx.clock)
    await worktree.claim(
        folder,
        url=_git_path(lc).as_uri(),
        token=None,  # file:// in the sandbox: git over it needs none
        branch=f"steelframe/issue-{issue}",
        who="the run that took over",
    )
    return other


@pytest.mark.slow
@pytest.mark.parametrize("stalls", ["while its runtime works", "between lease check and push"])
async def test_a_stalled_run_that_wakes_after_a_takeover_changes_nothing(
    make: Make, tmp_path: Path, stalls: str
) -> None:
    """The whole worker stalls (a frozen VM, a GC pause): no heartbeat, no reconciler; its
    lease expires and another run takes the task over. Then it wakes. Stalled while its
    runtime works, its next fenced step stops it; stalled after its last lease check, at
    the push itself (a `git` that holds the push while the worker is frozen), the remote
    refuses the push because the run that took over claimed the branch."""
    exchange = exchange_dir(tmp_path)
    started, go = exchange / "started", exchange / "go"
    held, push_go = tmp_path / "push-held", tmp_path / "push-go"
    at_push = stalls == "between lease check and push"
    if at_push:
        go.write_text("go\n")  # the runtime does its work at once; the push is held
    lc = await make(coding_command=command("wait_go", started, go), task_lease_seconds=1.0)
    issue = await lc.open_issue()
    task = lc.task(issue)
    path = f"{held_push_git(tmp_path, held, push_go)}{os.pathsep}{os.environ['PATH']}"
    worker = start_worker(lc, tmp_path / "worker.log", env={"PATH": path})
    horse = None
    try:
        if at_push:
            await wait_for(
                lambda: held.exists() and held.read_text().strip(), within=PATIENCE_SECONDS
            )
            horse = int(held.read_text())  # the process whose `git push` is held
        else:
            await wait_for(
                lambda: started.exists() and started.read_text().strip(), within=PATIENCE_SECONDS
            )
            runtime = await the_runtime(str(started))
            horse = launcher_of(runtime)
        await _freeze(lc, worker.pid, horse)
        await wait_for(lambda: _lease_expired(lc, task.id), within=PATIENCE_SECONDS)
        other = await _take_over(lc, issue, tmp_path / "other-run")
        before = await _snapshot(lc, issue)
        assert before["state"] == TaskState.RUNNING and before["branch"] is None
        if at_push:
            push_go.write_text("go\n")  # its push goes out as soon as it wakes
        else:
            go.write_text("go\n")  # the runtime finishes its work while its worker sleeps
            assert await gone(runtime)
        os.kill(horse, signal.SIGCONT)
        os.killpg(worker.pid, signal.SIGCONT)
        # The job that ran it (the worker's start-up reconcile may have re-enqueued it).
        job = TrustedJob.fetch(str(lc.task(issue).job_id), connection=lc.ctx.redis)
        await wait_for(lambda: job.get_status(refresh=True) == "finished", within=PATIENCE_SECONDS)
        assert job.return_value() == "stopped: lease lost"
        await lc.settle()
        assert await _snapshot(lc, issue) == before  # nothing at all changed, nor the branch
        assert lc.ctx.db.call(leases.current, task.id).holder == other.id
    finally:
        push_go.write_text("go\n")
        if horse is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(horse, signal.SIGCONT)
        await stop_processes([worker])


async def test_every_finish_of_a_run_that_lost_its_lease_is_refused(make: Make) -> None:
    lc = await make()
    issue = await lc.open_issue(pickup=False)
    result = await lc.pickups.pickup(lc.repo, issue, title="x", body="y", cause="test")
    first, second = Holder.this_process(), Holder.this_process()
    db, clock = lc.ctx.db, lc.ctx.clock
    assert leases.acquire(db, result.task_id, first, ttl=60, clock=clock)
    db.call(apply, result.task_id, Move(TaskState.RUNNING, actor="t", fence=first.id))

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


async def test_a_stalled_runs_records_are_refused_too(make: Make) -> None:
    """What a run records beside the task (its CI fix run's end, the Decision that settled
    its plan) carries its lease as every change of the task does: a run that stalled past
    it leaves both to the run that took the task over."""
    lc = await make()
    issue = await lc.open_issue(pickup=False)
    result = await lc.pickups.pickup(lc.repo, issue, title="x", body="y", cause="test")
    task_id, stalled, other = result.task_id, Holder.this_process(), Holder.this_process()
    db, clock = lc.ctx.db, lc.ctx.clock
    assert leases.acquire(db, task_id, stalled, ttl=60, clock=clock)
    db.call(apply, task_id, Move(TaskState.RUNNING, actor="t", fence=stalled.id))
    generation = lc.task(issue).generation

    def records(session: Any) -> int:
        plan_store.propose(session, task_id, generation, "Do it in two steps.", clock)
        now = clock()
        fix = CiFix(
            task_id=task_id,
            generation=generation,
            pr_number=1,
            head_sha="a" * 40,
            chain_sha="a" * 40,
            run_number=1,
            verdict=CiVerdict.FIX,
            state=CiFixState.QUEUED,
            created_at=now,
            updated_at=now,
        )
        session.add(fix)
        session.flush()
        lease = leases.current(session, task_id)
        lease.expires_at = now - timedelta(seconds=1)  # the run stalled past its lease
        return fix.id

    fix_id = db.call(records)
    assert leases.acquire(db, task_id, other, ttl=60, clock=clock)  # taken over

    def settle(session: Any, fence: str) -> plan_store.Plan | None:
        return plan_store.settle(
            session,
            task_id,
            generation,
            status=PlanStatus.APPROVED,
            brief="Do it in two steps.",
            comment_id=7,
            fence=fence,
            clock=clock,
        )

    def fix_state(session: Any) -> str:
        return session.get(CiFix, fix_id, populate_existing=True).state

    with pytest.raises(LeaseLost):
        db.call(ci_store.conclude, fix_id, CiFixState.PUSHED, clock, fence=stalled.id)
    with pytest.raises(LeaseLost):
        db.call(settle, stalled.id)
    assert db.call(fix_state) == CiFixState.QUEUED
    assert db.call(plan_store.current, task_id, generation).status == PlanStatus.PROPOSED
    # The run that holds the lease records both.
    db.call(ci_store.conclude, fix_id, CiFixState.ENDED, clock, fence=other.id)
    assert db.call(fix_state) == CiFixState.ENDED
    assert db.call(settle, other.id).status == PlanStatus.APPROVED
