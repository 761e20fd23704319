"""Operator actions stay bounded when a worker is frozen (SIGSTOP) while it holds the task's
row lock: terminate answers within 5 s with the request recorded, and it takes effect once
the frozen job is stopped, with no retry in between."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from bot.lifecycle import terminate
from bot.lifecycle.reconcile import run_reconcile
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.lifecycle import PATIENCE_SECONDS, Lifecycle, Make, gone, wait_for
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir, launcher_of, the_runtime
from tests.fakes.workers import start_worker, stop_processes

# The bound is a deadline the operator sees, not a benchmark: generous for a loaded machine
# but far below "until the client gives up".
TERMINATE_DEADLINE = 5.0


@pytest.mark.slow
async def test_terminate_returns_within_5_s_with_the_horse_frozen_holding_the_row(
    make: Make, tmp_path: Path, pg_url: str
) -> None:
    pids = exchange_dir(tmp_path) / "pids.txt"
    libpq_url = pg_url.replace("postgresql+psycopg://", "postgresql://", 1)
    lc = await make(
        coding_command=command("hold_lock", pids, libpq_url),
        # The stand-in horse reaches the database from the sandbox: named, as a private host.
        egress_private=(urlsplit(libpq_url).netloc.rsplit("@", 1)[-1],),
        # A long lease: the worker's own periodic reconciler must not clear the frozen run
        # before the operator's request does.
        task_lease_seconds=60.0,
        database_url=pg_url,
    )
    issue = await lc.open_issue()
    task = lc.task(issue)
    worker = start_worker(lc, tmp_path / "worker.log")
    runtime = horse = 0
    try:
        await wait_for(lambda: pids.exists() and pids.read_text().strip(), within=PATIENCE_SECONDS)
        runtime = await the_runtime(str(pids))  # its host pid (the file has its namespace's)
        horse = launcher_of(runtime)
        os.kill(horse, signal.SIGSTOP)
        os.kill(runtime, signal.SIGSTOP)  # the whole run frozen, the row still locked

        response = await asyncio.wait_for(
            lc.api.post(f"/api/operator/tasks/{task.id}/terminate"), TERMINATE_DEADLINE
        )
        assert response.status == 202, await response.text()
        assert (await response.json())["state"] == TaskState.RUNNING
        operator = lc.ctx.db.call(terminate.requested_by, task.id)
        assert operator is not None and operator.startswith("operator:op-")
        # The frozen run's start: after it, the operator's terminate is the only move.
        frozen_run = max(e.id for e in lc.events(task.id) if e.to_state == TaskState.RUNNING)
        # Reads and the other actions answer too: none waits on the frozen row.
        board = await asyncio.wait_for(lc.api.get("/api/operator/board"), TERMINATE_DEADLINE)
        assert board.status == 200
        again = await asyncio.wait_for(
            lc.api.post(f"/api/operator/tasks/{task.id}/terminate"), TERMINATE_DEADLINE
        )
        assert again.status == 202  # still recorded once
        archive = await asyncio.wait_for(
            lc.api.post(f"/api/operator/tasks/{task.id}/archive"), TERMINATE_DEADLINE
        )
        assert archive.status == 409

        # The worker honours the request: the reconciler stops the frozen job, the killed
        # horse's recovery (or the next pass) terminates instead of retrying.
        reports: list[list[str]] = []

        async def terminated() -> bool:
            report = await asyncio.to_thread(run_reconcile, lc.ctx, say=lambda line: None)
            reports.append(report.lines())
            return lc.task(issue).state == TaskState.TERMINATED

        deadline = asyncio.get_running_loop().time() + PATIENCE_SECONDS
        while not await terminated():
            log = (tmp_path / "worker.log").read_text()[-3000:]
            assert asyncio.get_running_loop().time() < deadline, (
                f"{reports[:2]}\n{history(lc, task.id)}\n{log}"
            )
            await asyncio.sleep(0.5)
        assert await gone(horse, runtime)
    finally:
        for pid in (p for p in (runtime, horse) if p > 0):  # nothing stays frozen holding rows
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        await stop_processes([worker], within=10)
    # No retry of the frozen run, terminated as the operator asked. (An attempt before it
    # that failed on a loaded machine is not this test's subject: the history shows it.)
    moves = [(e.to_state, e.actor) for e in lc.events(task.id) if e.to_state and e.id > frozen_run]
    said = f"{history(lc, task.id)}\n{(tmp_path / 'worker.log').read_text()[-4000:]}"
    assert moves == [(TaskState.TERMINATED, operator)], said
    assert lc.ctx.db.call(terminate.pending) == []


def history(lc: Lifecycle, task_id: int) -> str:
    """The task's events, one a line: when, what, who and why, with the event's data (a
    retry's error is there): a failure's first clue."""
    return "\n".join(
        f"{e.at:%H:%M:%S.%f} {e.kind} {e.from_state or ''}->{e.to_state or ''} "
        f"by {e.actor}: {e.detail} {e.data or ''}"
        for e in lc.events(task_id)
    )


async def test_a_stale_terminate_request_never_stops_the_next_generation(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    issue = await lc.open_issue()
    task = lc.task(issue)
    assert (await lc.terminations.terminate(task.id, actor="operator:first")).applied
    # A request recorded while a frozen run held the row, left over when the task finished.
    lc.ctx.db.call(terminate.record, task.id, "operator:late", lc.ctx.clock)
    reopened = await lc.pickups.pickup(lc.repo, issue, title="again", cause="test:reopen")
    assert reopened.started
    assert lc.ctx.db.call(terminate.pending) == []
    report = await asyncio.to_thread(run_reconcile, lc.ctx, say=lambda line: None)
    assert report.terminated == []
    assert lc.task(issue).state == TaskState.QUEUED
