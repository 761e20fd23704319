"""A retry never overtakes an operator's recorded terminate: the requeue decides, under the
task's row lock and in its own transaction, to terminate as asked instead.

The race this pins down: a dead run's recovery read "no request", then waited on the task's
row, which a frozen process held; the operator's terminate gave up on that row and recorded
its request meanwhile; the row came free and the recovery requeued the task (a new attempt
ran before the request took effect: running -> queued -> running -> terminated)."""

from __future__ import annotations

import asyncio
import dataclasses

import psycopg
import pytest

from bot.db import Database
from bot.lifecycle import leases, terminate
from bot.lifecycle.finish import finish_failed
from bot.lifecycle.recovery import recover
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, apply
from tests.fakes.lifecycle import PATIENCE_SECONDS, Lifecycle, Make, wait_for
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture


async def _running(lc: Lifecycle) -> int:
    issue = await lc.open_issue("Make the widget blue")
    task_id = lc.task(issue).id
    lc.ctx.db.call(apply, task_id, Move(TaskState.RUNNING, actor="worker:test"))
    return task_id


def _since_running(lc: Lifecycle, task_id: int) -> list[tuple[str, str]]:
    """(state, actor) of every transition after the task started running."""
    moves = [(e.to_state, e.actor) for e in lc.events(task_id) if e.to_state]
    states = [state for state, _ in moves]
    return moves[states.index(TaskState.RUNNING) + 1 :]


def _waiting_on(monitor: psycopg.Connection, holder_pid: int) -> int:
    """How many backends wait for a lock the holder's backend has."""
    row = monitor.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
        (holder_pid,),
    ).fetchone()
    return int(row[0]) if row else 0


async def test_a_recovery_waiting_on_a_held_row_terminates_as_recorded_meanwhile(
    make: Make, pg_url: str
) -> None:
    lc = await make(database_url=pg_url)
    task_id = await _running(lc)  # its run is gone: no lease, nothing to kill
    jobs = lc.queued_jobs()
    # The worker's own context: its database waits on a row as long as it takes (the
    # service's, lc.ctx's, gives up after a bound).
    worker = dataclasses.replace(lc.ctx, db=Database.from_url(pg_url))
    libpq_url = pg_url.replace("postgresql+psycopg://", "postgresql://", 1)
    recovery: asyncio.Task[str] | None = None
    try:
        with (
            psycopg.connect(libpq_url) as holder,  # a frozen process, mid-write on the task
            psycopg.connect(libpq_url, autocommit=True) as monitor,
        ):
            holder.execute("UPDATE tasks SET updated_at = updated_at WHERE id = %s", (task_id,))
            recovery = asyncio.create_task(
                recover(worker, None, task_id, reason="test: the run died", dead_pid=None)
            )
            # The recovery found no request and now waits for the row.
            await wait_for(
                lambda: _waiting_on(monitor, holder.info.backend_pid) >= 1, within=PATIENCE_SECONDS
            )
            assert lc.ctx.db.call(terminate.requested_by, task_id) is None
            termination = await lc.terminations.terminate(task_id, actor="operator:late")
            assert not termination.applied  # the row was held: recorded for whoever is next
            holder.rollback()  # the frozen process dies; the recovery gets the row
            said = await asyncio.wait_for(recovery, PATIENCE_SECONDS)
    finally:
        if recovery is not None and not recovery.done():
            recovery.cancel()
        worker.db.dispose()
    assert said == "terminated as operator:late asked", said
    assert _since_running(lc, task_id) == [(TaskState.TERMINATED, "operator:late")]
    assert lc.ctx.db.call(terminate.pending) == []
    assert lc.queued_jobs() == jobs  # no new attempt was queued


@pytest.mark.parametrize("holds_lease", [True, False])
async def test_a_runs_own_retry_terminates_as_recorded_unless_it_lost_its_lease(
    make: Make, holds_lease: bool
) -> None:
    lc = await make()
    task_id = await _running(lc)
    holder = leases.Holder.this_process()
    assert leases.acquire(lc.ctx.db, task_id, holder, ttl=60.0, clock=lc.ctx.clock)
    if not holds_lease:
        leases.release(lc.ctx.db, task_id, holder)
    # Recorded while a frozen process held the task's row; the run fails after that.
    lc.ctx.db.call(terminate.record, task_id, "operator:first", lc.ctx.clock)
    jobs = lc.queued_jobs()
    said = await finish_failed(
        lc.ctx, None, task_id, "worker:test", error="boom", retry=True, fence=holder.id
    )
    assert lc.queued_jobs() == jobs  # never a new attempt
    if holds_lease:
        assert said == "terminated as operator:first asked"
        assert _since_running(lc, task_id) == [(TaskState.TERMINATED, "operator:first")]
        assert lc.ctx.db.call(terminate.pending) == []
    else:  # a run that lost its lease changes nothing; the request waits for the reconciler
        assert said == "stopped: lease lost"
        assert _since_running(lc, task_id) == []
        assert lc.ctx.db.call(terminate.pending) == [(task_id, "operator:first")]
