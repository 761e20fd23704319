"""One run per issue, and repairs: concurrent pickups, concurrent runs (the lease), expired
leases, lost jobs, an existing pull request, label drift, terminate and archive."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from bot.clock import utcnow
from bot.idempotency import EffectKind, SideEffect
from bot.lifecycle import leases, tasks
from bot.lifecycle import run as run_module
from bot.lifecycle.leases import Holder
from bot.lifecycle.models import EventKind, Task, TaskLease
from bot.lifecycle.queue import LifecycleQueue
from bot.lifecycle.reconcile import run_reconcile
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, apply
from tests.fakes.coding import command
from tests.fakes.lifecycle import PATIENCE_SECONDS, Make, a_lease_later, gone, wait_for
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir, host_pids


async def test_two_pickups_of_one_issue_at_once_make_one_task_and_one_job(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    issue = await lc.open_issue(pickup=False)
    results = await asyncio.gather(
        *(lc.pickups.pickup(lc.repo, issue, title="twice", cause=f"test-{n}") for n in range(4))
    )
    assert len({r.task_id for r in results}) == 1
    assert sorted(r.created for r in results) == [False, False, False, True]
    assert len(lc.queued_jobs()) == 1
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED
    assert len(await lc.pulls()) == 1


async def test_a_second_run_while_the_first_holds_the_lease_is_recorded_and_ignored(
    make: Make, tmp_path: Path
) -> None:
    # The first run works until told (not for a fixed second, which a loaded machine's
    # second worker could outlast), so it holds the lease while the second run tries.
    started, finish = exchange_dir(tmp_path) / "started.txt", exchange_dir(tmp_path) / "finish"
    lc = await make(coding_command=command("gated", finish, started))
    issue = await lc.open_issue()
    task = lc.task(issue)
    first = asyncio.ensure_future(asyncio.to_thread(lc.worker().work, burst=True, max_jobs=1))
    try:
        await wait_for(started.exists, within=PATIENCE_SECONDS)  # a sandboxed run's start
        LifecycleQueue(lc.ctx.redis, name=lc.ctx.queue_name).enqueue(task.id, job="duplicate-run")
        await asyncio.to_thread(lc.worker().work, burst=True, max_jobs=1)
        ignored = [e for e in lc.events(task.id) if e.kind == EventKind.TRIGGER_IGNORED]
        assert len(ignored) == 1 and "lease" in ignored[0].detail
    finally:
        finish.touch()  # the first run ends either way: a failure here is not a hang
        await first
    await lc.settle()
    assert lc.task(issue).state == TaskState.DELIVERED
    assert started.read_text().count("\n") == 1  # the runtime ran once
    assert len(await lc.pulls()) == 1


async def test_a_lease_renewed_by_its_heartbeat_outlives_its_ttl(
    make: Make, tmp_path: Path
) -> None:
    started, finish = exchange_dir(tmp_path) / "started.txt", exchange_dir(tmp_path) / "finish"
    # A TTL long enough that a loaded machine never misses a heartbeat (one every third of
    # it); the run lasts until the lease has visibly outlived its TTL, however long that is.
    ttl = 3.0
    lc = await make(coding_command=command("gated", finish, started), task_lease_seconds=ttl)
    issue = await lc.open_issue()
    task = lc.task(issue)
    run = asyncio.ensure_future(lc.work())
    await wait_for(started.exists, within=PATIENCE_SECONDS)
    first = lc.ctx.db.call(leases.current, task.id)
    assert first is not None

    def outlived() -> bool:
        lease = lc.ctx.db.call(leases.current, task.id)
        assert lease is not None and lease.holder == first.holder  # never lost or taken
        return lease.heartbeat_at > first.expires_at  # renewed after the first TTL ended

    await wait_for(outlived, within=PATIENCE_SECONDS)
    assert not leases.acquire(lc.ctx.db, task.id, Holder.this_process(), ttl=5)
    finish.touch()
    await run
    assert lc.task(issue).state == TaskState.DELIVERED
    assert lc.ctx.db.call(leases.current, task.id) is None


async def test_the_heartbeat_renews_by_the_clock_when_each_pass_is_slow(
    make: Make, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A loaded host: once the run works, every read of the task's state (one per pass of the
    # run's terminate check) takes longer than the heartbeat's period (1 s of a 3 s lease).
    # A heartbeat that counted those passes (as it once did) let the lease lapse; one that
    # reads the clock on a thread of its own (`leases.Heartbeat`) keeps it. (The run works in
    # RQ's forked work horse: the switch is a file, seen there.)
    ttl, slow = 3.0, 1.5
    started, finish = exchange_dir(tmp_path) / "started.txt", exchange_dir(tmp_path) / "finish"
    loaded = tmp_path / "loaded"

    class SlowReads:
        def __getattr__(self, name: str) -> object:
            return getattr(tasks, name)

        @staticmethod
        def get_task(session: Session, task_id: int) -> Task:
            if loaded.exists():
                time.sleep(slow)
            return tasks.get_task(session, task_id)

    monkeypatch.setattr(run_module, "tasks", SlowReads())
    # Its slow passes keep it running past two TTLs: no time limit may end it first.
    lc = await make(
        coding_command=command("gated", finish, started),
        task_lease_seconds=ttl,
        task_time_limit=int(10 * PATIENCE_SECONDS),
    )
    issue = await lc.open_issue()
    task = lc.task(issue)
    run = asyncio.ensure_future(lc.work())
    await wait_for(started.exists, within=PATIENCE_SECONDS)
    first = lc.ctx.db.call(leases.current, task.id)
    assert first is not None
    loaded.touch()

    def held_past_two_ttls() -> bool:
        # A lease let lapse is one another worker (or the reconciler) takes: try, every poll.
        assert not leases.acquire(lc.ctx.db, task.id, Holder.this_process(), ttl=ttl), (
            "the lease lapsed between two heartbeats"
        )
        lease = lc.ctx.db.call(leases.current, task.id)
        assert lease is not None and lease.holder == first.holder
        return lease.heartbeat_at > first.expires_at + timedelta(seconds=ttl)

    await wait_for(held_past_two_ttls, within=PATIENCE_SECONDS)
    loaded.unlink()
    finish.touch()
    await run
    assert lc.task(issue).state == TaskState.DELIVERED


async def test_a_running_task_whose_lease_expired_is_retried_by_the_reconciler(
    make: Make,
) -> None:
    lc = await make(coding_command=command("commit"))
    issue = await lc.open_issue()
    task = lc.task(issue)
    # A worker took the task and died: state running, its lease long expired, no job left.
    dead = Holder("elsewhere:1:dead", "elsewhere", 1)
    assert leases.acquire(lc.ctx.db, task.id, dead, ttl=0.01)
    LifecycleQueue(lc.ctx.redis, name=lc.ctx.queue_name).rq.empty()
    lc.ctx.db.call(
        apply, task.id, Move(TaskState.RUNNING, actor="dead-worker", changes={"attempts": 1})
    )
    await asyncio.sleep(0.05)
    report = await asyncio.to_thread(run_reconcile, lc.ctx, say=lambda line: None)
    assert report.recovered == [task.id]
    assert lc.task(issue).state == TaskState.QUEUED
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED and task.attempts == 2
    assert lc.ctx.db.call(lambda s: s.get(TaskLease, task.id)) is None


async def test_a_queued_task_whose_job_was_lost_is_enqueued_again(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    issue = await lc.open_issue()
    LifecycleQueue(lc.ctx.redis, name=lc.ctx.queue_name).rq.empty()  # Redis lost the job
    assert lc.queued_jobs() == []
    # A reconciler a lease period later (its clock, not a sleep: no timing to miss).
    later = a_lease_later(lc.ctx)
    report = await asyncio.to_thread(run_reconcile, later, say=lambda line: None)
    assert report.requeued == [lc.task(issue).id]
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED


async def test_a_task_whose_pull_request_exists_is_delivered_without_running_again(
    make: Make,
) -> None:
    lc = await make(coding_command=command("commit"))
    issue = await lc.open_issue()
    await lc.work()
    task = lc.task(issue)
    # A crash after the pull request was opened, before the state was written.
    lc.ctx.db.call(
        lambda s: s.execute(update(Task).where(Task.id == task.id).values(state="failed"))
    )
    report = await asyncio.to_thread(run_reconcile, lc.ctx, say=lambda line: None)
    assert report.delivered == [task.id]
    assert lc.task(issue).state == TaskState.DELIVERED
    assert len(await lc.pulls()) == 1
    delivered = [e for e in lc.events(task.id) if e.to_state == TaskState.DELIVERED]
    assert delivered[-1].actor == "reconciler"


async def test_label_drift_is_repaired_by_the_reconciler(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    issue = await lc.open_issue()
    await lc.work()
    drifted = {"steelframe:work-on-this", "steelframe:in-progress", "steelframe:failed"}
    await lc.github.remove_label(lc.repo, issue, "steelframe:delivered")
    await lc.github.add_labels(lc.repo, issue, ["steelframe:in-progress", "steelframe:failed"])
    # Within a lease period of the last transition, labels that lag are taken for that
    # transition's own label update on its way (a pass landing between its commit and its
    # labels): left alone, and nothing in the history says "repaired".
    early = await asyncio.to_thread(run_reconcile, lc.ctx, say=lambda line: None)
    task = lc.task(issue)
    assert early.labels_fixed == [] and await lc.labels(issue) == drifted
    assert not [e for e in lc.events(task.id) if e.kind == EventKind.RECONCILED]
    lc.age_history(issue)
    report = await asyncio.to_thread(run_reconcile, lc.ctx, say=lambda line: None)
    assert report.labels_fixed == [task.id]
    labels = await lc.labels(issue)
    assert {label for label in labels if label.startswith("steelframe:")} == {
        "steelframe:work-on-this",
        "steelframe:delivered",
    }
    repaired = [e for e in lc.events(task.id) if e.kind == EventKind.RECONCILED]
    assert "+steelframe:delivered" in repaired[-1].detail
    again = await asyncio.to_thread(run_reconcile, lc.ctx, say=lambda line: None)
    assert again.labels_fixed == []


async def test_terminating_a_running_task_kills_the_runtime_and_removes_the_worktree(
    make: Make, tmp_path: Path
) -> None:
    pids = exchange_dir(tmp_path) / "pids.txt"
    # A time limit no wait here reaches (the bench's 30 s would end the hanging run within
    # the wait for it below): only the terminate can have stopped it.
    lc = await make(
        coding_command=command("hang", pids), task_time_limit=int(10 * PATIENCE_SECONDS)
    )
    issue = await lc.open_issue()
    task = lc.task(issue)
    running = asyncio.ensure_future(lc.work())
    await wait_for(lambda: pids.exists() and pids.read_text().strip(), within=PATIENCE_SECONDS)
    started = host_pids(str(pids))
    assert len(started) >= 2  # the runtime and its grandchild, seen from the host
    (worktree,) = lc.ctx.worktrees.glob(f"task-{task.id}-*")
    assert (worktree / "repo" / ".git").is_dir()
    response = await lc.api.post(f"/api/operator/tasks/{task.id}/terminate")
    assert response.status == 200
    body = await response.json()
    assert body["state"] == "terminated"
    await asyncio.wait_for(running, PATIENCE_SECONDS)
    assert await gone(*started)
    assert not worktree.exists()
    assert lc.task(issue).state == TaskState.TERMINATED
    comments = [c["body"] for c in await lc.comments(issue)]
    assert len([b for b in comments if "terminated by operator:" in b]) == 1
    assert "steelframe:terminated" in await lc.labels(issue)
    assert lc.ctx.db.call(lambda s: s.get(TaskLease, task.id)) is None
    assert await lc.pulls() == []


async def test_terminating_a_queued_task_cancels_its_job(make: Make) -> None:
    from rq.job import JobStatus

    from bot.lifecycle.trusted_jobs import TrustedJob

    lc = await make(coding_command=command("commit"))
    issue = await lc.open_issue()
    task = lc.task(issue)
    response = await lc.api.post(f"/api/operator/tasks/{task.id}/terminate")
    assert response.status == 200
    assert (
        TrustedJob.fetch(str(task.job_id), connection=lc.ctx.redis).get_status()
        == JobStatus.CANCELED
    )
    await lc.work()
    assert lc.task(issue).state == TaskState.TERMINATED
    again = await lc.api.post(f"/api/operator/tasks/{task.id}/terminate")
    assert again.status == 409
    assert (await again.json())["detail"]["state"] == "terminated"


async def test_a_terminated_task_picked_up_again_starts_a_new_generation(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    issue = await lc.open_issue()
    task = lc.task(issue)
    await lc.api.post(f"/api/operator/tasks/{task.id}/terminate")
    result = await lc.pickups.pickup(lc.repo, issue, title="again", cause="test")
    assert (result.task_id, result.created, result.started) == (task.id, False, True)
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED and task.generation == 2


async def test_a_lease_that_expired_is_taken_over(make: Make) -> None:
    lc = await make()
    issue = await lc.open_issue()
    task = lc.task(issue)
    old = Holder("a:1:x", "a", 1)
    new = Holder("b:2:y", "b", 2)
    assert leases.acquire(lc.ctx.db, task.id, old, ttl=5)
    assert not leases.acquire(lc.ctx.db, task.id, new, ttl=5)

    # Its TTL later by the clock, not a sleep: a TTL short enough to sleep through, a loaded
    # machine could outlast between the first two calls.
    def later() -> datetime:
        return utcnow() + timedelta(seconds=6)

    assert leases.acquire(lc.ctx.db, task.id, new, ttl=5, clock=later)
    assert not leases.renew(lc.ctx.db, task.id, old, ttl=5, clock=later)  # the old holder lost it
    lease = lc.ctx.db.call(leases.current, task.id)
    assert lease is not None and lease.holder == new.id
    assert lease.expires_at - lease.heartbeat_at == timedelta(seconds=5)


def _side_effect(session: Session, key: str, at: datetime) -> None:
    row = SideEffect(key=key, kind=EffectKind.FILE_ISSUE, status="done", request={}, result={})
    row.created_at = row.updated_at = at
    session.add(row)


async def test_a_reconcile_pass_removes_idempotency_records_past_their_retention(
    make: Make,
) -> None:
    lc = await make(side_effect_retention_days=2)
    lc.ctx.db.call(_side_effect, "filing:old", utcnow() - timedelta(days=3))
    lc.ctx.db.call(_side_effect, "filing:recent", utcnow() - timedelta(days=1))
    report = await asyncio.to_thread(run_reconcile, lc.ctx, say=lambda line: None)
    assert report.side_effects_removed == 1 and not report.errors
    keys = lc.ctx.db.call(lambda s: list(s.scalars(select(SideEffect.key))))
    assert keys == ["filing:recent"]
