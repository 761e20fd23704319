"""Once an operator's terminate is recorded, no new attempt of the task is enqueued or
started, and a run that fails for good ends `terminated` as asked (its failure kept in the
event).

The terminate records its request first (its own transaction) and then terminates; a retry,
a final failure and an attempt's start each read the request once they hold the task's row.
So a request is seen by every decision that takes the row after it, and a decision that took
the row first is followed by the terminate itself (`bot.lifecycle.terminate`)."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import threading
from typing import Any

import psycopg
import pytest
from sqlalchemy import event

from bot.db import Database
from bot.lifecycle import leases, tasks, terminate
from bot.lifecycle.finish import finish_failed
from bot.lifecycle.models import EventKind
from bot.lifecycle.queue import job_id
from bot.lifecycle.recovery import recover
from bot.lifecycle.states import TaskState
from bot.lifecycle.terminate import Terminations
from bot.lifecycle.transition import Move, apply
from tests.fakes.lifecycle import Lifecycle, Make, wait_for
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture


async def _running(lc: Lifecycle) -> int:
    issue = await lc.open_issue("Make the widget blue")
    task_id = lc.task(issue).id
    lc.ctx.db.call(apply, task_id, Move(TaskState.RUNNING, actor="worker:test"))
    return task_id


def _moves(lc: Lifecycle, task_id: int) -> list[tuple[str, str]]:
    """(state, actor) of every transition after the task was created."""
    return [(e.to_state, e.actor) for e in lc.events(task_id) if e.to_state][1:]


def _since_running(lc: Lifecycle, task_id: int) -> list[tuple[str, str]]:
    moves = _moves(lc, task_id)
    states = [state for state, _ in moves]
    return moves[states.index(TaskState.RUNNING) + 1 :]


def _waiting_on(monitor: psycopg.Connection, holder_pid: int) -> int:
    """How many backends wait for a lock the holder's backend has."""
    row = monitor.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
        (holder_pid,),
    ).fetchone()
    return int(row[0]) if row else 0


def _history(lc: Lifecycle, task_id: int) -> list[tuple[str, str | None, str, str]]:
    return [(e.kind, e.to_state, e.actor, e.detail) for e in lc.events(task_id)]


async def test_a_terminate_recorded_just_after_a_retry_read_ends_the_requeued_task(
    make: Make, pg_url: str
) -> None:
    """The old race: the terminate gave up on the row a frozen process held, the row came
    free, the retry took it and read "no request", and only then was the request recorded:
    the task stayed queued with a new job until the reconciler's next pass. Here the
    request's commit is held (a table lock on task_stop_requests) until the retry is done."""
    lc = await make(database_url=pg_url)
    task_id = await _running(lc)  # its run is gone: no lease, nothing to kill
    jobs = lc.queued_jobs()
    # Unbounded waits (a worker's database): the request's insert waits on the table lock
    # as long as the test holds it. The terminate's own transaction is bounded by itself.
    worker = dataclasses.replace(lc.ctx, db=Database.from_url(pg_url))
    operator = Terminations(db=worker.db, queue=lc.queue, github=None, clock=lc.ctx.clock)
    libpq_url = pg_url.replace("postgresql+psycopg://", "postgresql://", 1)
    pending: list[asyncio.Task[Any]] = []
    try:
        with (
            psycopg.connect(libpq_url) as frozen,  # a frozen process, mid-write on the task
            psycopg.connect(libpq_url) as requests,  # holds back the request's commit
            psycopg.connect(libpq_url, autocommit=True) as monitor,
        ):
            frozen.execute("UPDATE tasks SET updated_at = updated_at WHERE id = %s", (task_id,))
            requests.execute("LOCK TABLE task_stop_requests IN SHARE MODE")
            recovery = asyncio.create_task(
                recover(worker, None, task_id, reason="test: the run died", dead_pid=None)
            )
            pending.append(recovery)
            await wait_for(lambda: _waiting_on(monitor, frozen.info.backend_pid) >= 1, within=60)
            termination = asyncio.create_task(operator.terminate(task_id, actor="operator:late"))
            pending.append(termination)
            # The terminate is recording its request (after giving up on the row, before).
            await wait_for(lambda: _waiting_on(monitor, requests.info.backend_pid) >= 1, within=60)
            frozen.rollback()  # the frozen process dies: the retry takes the row, sees nothing
            said = await asyncio.wait_for(recovery, 60)
            assert said.startswith("retry:"), said
            requests.rollback()  # the request is recorded now, after the retry's read
            terminated = await asyncio.wait_for(termination, 60)
    finally:
        for step in pending:
            if not step.done():
                step.cancel()
        worker.db.dispose()
    history = _history(lc, task_id)
    assert terminated.applied, history  # ended by the terminate itself, not left queued
    assert _since_running(lc, task_id) == [
        (TaskState.QUEUED, "reconciler"),
        (TaskState.TERMINATED, "operator:late"),
    ], history
    assert lc.ctx.db.call(terminate.pending) == []
    assert lc.queued_jobs() == jobs  # the retry's job was cancelled with it
    await lc.work()
    assert _since_running(lc, task_id)[-1] == (TaskState.TERMINATED, "operator:late")
    assert lc.ctx.db.call(tasks.get_task, task_id).attempts == 0  # no attempt started


async def test_on_sqlite_a_retry_reads_the_request_inside_its_write_transaction(
    make: Make,
) -> None:
    """SQLite has no row locks: a read made before a transaction's first write runs outside
    it. A request committed after the retry's read and before its write was overtaken.
    The retry's first write now comes before its read of the request."""
    lc = await make()  # SQLite
    task_id = await _running(lc)
    jobs = lc.queued_jobs()
    worker = dataclasses.replace(lc.ctx, db=Database.from_url(lc.settings.database_url))
    writes = threading.Event()

    @event.listens_for(worker.db.engine, "before_cursor_execute")
    def _seen(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE TASKS"):
            writes.set()

    database = lc.settings.database_url.removeprefix("sqlite:///")
    operator = sqlite3.connect(database, isolation_level=None, timeout=30)
    retry: asyncio.Task[str] | None = None
    try:
        # The operator's request, mid-commit: it holds SQLite's write lock.
        operator.execute("BEGIN IMMEDIATE")
        operator.execute(
            "INSERT INTO task_stop_requests (task_id, actor, requested_at) "
            "VALUES (?, 'operator:late', '2026-12-05 00:00:00.000000')",
            (task_id,),
        )
        retry = asyncio.create_task(
            recover(worker, None, task_id, reason="test: the run died", dead_pid=None)
        )
        # The retry's first write to the task waits for the lock; the request commits.
        await wait_for(writes.is_set, within=60)
        operator.execute("COMMIT")
        said = await asyncio.wait_for(retry, 60)
    finally:
        if retry is not None and not retry.done():
            retry.cancel()
        operator.close()
        worker.db.dispose()
    assert said == "terminated as operator:late asked", (said, _history(lc, task_id))
    assert _since_running(lc, task_id) == [(TaskState.TERMINATED, "operator:late")]
    assert lc.ctx.db.call(terminate.pending) == []
    assert lc.queued_jobs() == jobs


@pytest.fixture(params=["sqlite", "postgres"])
def bench_db(request: pytest.FixtureRequest) -> dict[str, str]:
    if request.param == "sqlite":
        return {}
    return {"database_url": str(request.getfixturevalue("pg_url"))}


@pytest.mark.parametrize("state", [TaskState.QUEUED, TaskState.RUNNING])
async def test_an_attempt_does_not_start_once_a_terminate_is_recorded(
    make: Make, bench_db: dict[str, str], state: TaskState
) -> None:
    """The request was recorded while a frozen process held the row (the terminate gave
    up); the task's job then starts: queued (a retry, a pickup) or running already (a
    resumed task's continuation, a rerun of a dead run). It ends the task as asked."""
    lc = await make(**bench_db)
    issue = await lc.open_issue("Make the widget blue")
    task = lc.task(issue)
    if state == TaskState.RUNNING:
        lc.ctx.db.call(apply, task.id, Move(TaskState.RUNNING, actor="worker:test"))
        job = job_id(task.id, task.generation, "c1")
        lc.queue.enqueue(task.id, job=job, continuation=True)
    assert lc.queued_jobs(), "the task's job is waiting"
    lc.ctx.db.call(terminate.record, task.id, "operator:first", lc.ctx.clock)
    await lc.work()
    history = _history(lc, task.id)
    moves = _moves(lc, task.id)
    assert moves[-1] == (TaskState.TERMINATED, "operator:first"), history
    if state == TaskState.QUEUED:
        assert moves == [(TaskState.TERMINATED, "operator:first")], history
    assert lc.task(issue).attempts == 0, history  # no attempt started
    assert lc.ctx.db.call(terminate.pending) == []
    assert lc.queued_jobs() == []
    assert "steelframe:terminated" in await lc.labels(issue)


@pytest.mark.parametrize("ending", ["last-attempt", "no-retry", "limit"])
async def test_a_run_failing_for_good_ends_terminated_as_recorded(
    make: Make, bench_db: dict[str, str], ending: str
) -> None:
    """The operator's terminate was recorded while the run (holding the row) went on; the
    run then fails for good: the task ends `terminated`, the failure in its event."""
    lc = await make(**bench_db)
    task_id = await _running(lc)
    holder = leases.Holder.this_process()
    assert leases.acquire(lc.ctx.db, task_id, holder, ttl=60.0, clock=lc.ctx.clock)
    if ending == "last-attempt":
        lc.ctx.db.call(tasks.touch, task_id, lc.ctx.clock, attempts=lc.ctx.policy.max_attempts)
    lc.ctx.db.call(terminate.record, task_id, "operator:first", lc.ctx.clock)
    jobs = lc.queued_jobs()
    said = await finish_failed(
        lc.ctx,
        None,
        task_id,
        "worker:test",
        error="boom",
        limit="tokens" if ending == "limit" else None,
        retry=ending == "last-attempt",
        fence=holder.id,
    )
    history = _history(lc, task_id)
    assert said == "terminated as operator:first asked", (said, history)
    assert _since_running(lc, task_id) == [(TaskState.TERMINATED, "operator:first")], history
    assert lc.queued_jobs() == jobs
    assert lc.ctx.db.call(terminate.pending) == []
    ended = lc.events(task_id)[-1] if ending != "limit" else lc.events(task_id)[-2]
    assert ended.to_state == TaskState.TERMINATED
    error = "stopped by" if ending == "limit" else "boom"
    assert error in ended.detail and error in str((ended.data or {}).get("error")), history
    assert error in str(lc.ctx.db.call(tasks.get_task, task_id).last_error)
    if ending == "limit":
        assert lc.events(task_id)[-1].kind == EventKind.LIMIT_EXCEEDED


async def test_a_final_failure_waiting_on_a_held_row_terminates_as_recorded_meanwhile(
    make: Make, pg_url: str
) -> None:
    """As a retry (tests/test_lifecycle_terminate_retry.py), for a run out of attempts: a
    recovery that read "no request" and then waited on a row a frozen process held."""
    lc = await make(database_url=pg_url)
    task_id = await _running(lc)
    lc.ctx.db.call(tasks.touch, task_id, lc.ctx.clock, attempts=lc.ctx.policy.max_attempts)
    worker = dataclasses.replace(lc.ctx, db=Database.from_url(pg_url))
    libpq_url = pg_url.replace("postgresql+psycopg://", "postgresql://", 1)
    recovery: asyncio.Task[str] | None = None
    try:
        with (
            psycopg.connect(libpq_url) as frozen,
            psycopg.connect(libpq_url, autocommit=True) as monitor,
        ):
            frozen.execute("UPDATE tasks SET updated_at = updated_at WHERE id = %s", (task_id,))
            recovery = asyncio.create_task(
                recover(worker, None, task_id, reason="test: the run died", dead_pid=None)
            )
            await wait_for(lambda: _waiting_on(monitor, frozen.info.backend_pid) >= 1, within=60)
            termination = await lc.terminations.terminate(task_id, actor="operator:late")
            assert not termination.applied  # the row was held: recorded for whoever is next
            frozen.rollback()
            said = await asyncio.wait_for(recovery, 60)
    finally:
        if recovery is not None and not recovery.done():
            recovery.cancel()
        worker.db.dispose()
    history = _history(lc, task_id)
    assert said == "terminated as operator:late asked", (said, history)
    assert _since_running(lc, task_id) == [(TaskState.TERMINATED, "operator:late")], history
    ended = lc.events(task_id)[-1]
    assert "the run died" in ended.detail, history
    assert lc.ctx.db.call(terminate.pending) == []
