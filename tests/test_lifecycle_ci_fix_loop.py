"""A CI fix run does its database work off its event loop (`Database.run`, a worker thread),
as every run step does: a slow database must not stall the loop, which also carries the
run's termination watch and its GitHub calls. Checked on the real run: no statement executes
on a thread that runs an event loop while the fix run's module (`bot/lifecycle/ci_run.py`)
is on that thread's stack (`tests/fakes/loop_statements.py`), so the steps it shares with
every run count too (the prelude's lease check before the clone, the one before the push).
Three ends of a fix run: a pushed fix, a run that changed nothing, a run that failed
(retried, then failed for good)."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

import pytest

from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.loop_statements import statements_on_the_loop
from tests.fakes.pulls import delivered_pull
from tests.fakes.sandbox import exchange_dir
from tests.test_lifecycle_ci_fix import fail_head

FIX_RUN_MODULE = "bot/lifecycle/ci_run.py"


@pytest.mark.parametrize("end", ["pushed", "unchanged", "failed"])
async def test_a_fix_run_never_runs_a_statement_on_its_event_loop(
    make: Make, any_db_url: str, tmp_path: Path, end: str
) -> None:
    lc = await make(coding_command=command("echo"), database_url=any_db_url)
    issue, number = await delivered_pull(lc)
    fix_runtime = {
        "pushed": command("echo"),
        "unchanged": command("ci_idle"),
        "failed": command("fail", exchange_dir(tmp_path) / "runs.txt"),
    }[end]
    policy = dataclasses.replace(lc.ctx.policy, coding_command=tuple(shlex.split(fix_runtime)))
    lc.ctx = dataclasses.replace(lc.ctx, policy=policy)
    await fail_head(lc, number)
    assert lc.task(issue).state == TaskState.RUNNING  # its fix run is queued

    with statements_on_the_loop(lc.ctx.db.engine, FIX_RUN_MODULE) as on_the_loop:
        await lc.work()
    task = lc.task(issue)
    wanted = {
        "pushed": TaskState.DELIVERED,
        "unchanged": TaskState.WAITING_FOR_INFO,
        "failed": TaskState.FAILED,  # retried with the same fix, then out of attempts
    }[end]
    assert task.state == wanted, [(e.kind, e.to_state, e.detail) for e in lc.events(task.id)]
    assert on_the_loop == []
