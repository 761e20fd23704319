"""A run does its database work off its event loop (`Database.run`, a worker thread): the
loop carries the run's heartbeat, its termination watch and its GitHub calls, and a slow
database there would stall them. Every lifecycle bench test holds it to that
(`tests/fakes/lifecycle.py`: each `work()`, and the test's end, fail on a statement that
bot/lifecycle/ ran on a thread with a running event loop, the runs' loops and the service's
alike; `tests/fakes/loop_statements.py`).

Here, the paths of a run that no other bench test reaches, under that same rule: a CI fix
run that a person's push superseded before it cloned (`ci_run._superseded`), and one that
failed, was retried with the same fix, then failed for good (`ci_run._ended`)."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

import pytest

from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.git import commit_files
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import delivered_pull
from tests.fakes.sandbox import exchange_dir
from tests.test_lifecycle_ci_fix import fail_head


def _runtime(lc: Lifecycle, runtime: str) -> None:
    """The worker's coding command from now on (the service's stays as it was)."""
    policy = dataclasses.replace(lc.ctx.policy, coding_command=tuple(shlex.split(runtime)))
    lc.ctx = dataclasses.replace(lc.ctx, policy=policy)


@pytest.mark.parametrize("end", ["failed", "superseded"])
async def test_a_ci_fix_run_that_fails_or_finds_its_branch_moved_stays_off_its_loop(
    make: Make, tmp_path: Path, end: str
) -> None:
    lc = await make(coding_command=command("echo"))
    issue, number = await delivered_pull(lc)
    if end == "failed":
        _runtime(lc, command("fail", exchange_dir(tmp_path) / "runs.txt"))
    await fail_head(lc, number)
    assert lc.task(issue).state == TaskState.RUNNING  # its fix run is queued
    if end == "superseded":  # a person pushed before the fix run cloned: nothing to fix
        git_path = lc.sandbox.sandbox.world.repo(lc.repo).git_path
        commit_files(git_path, {"PERSON.md": "pushed\n"}, branch=str(lc.task(issue).branch))
    await lc.work()  # fails on a statement of bot/lifecycle/ run on an event loop
    task = lc.task(issue)
    history = [(e.kind, e.to_state, e.detail) for e in lc.events(task.id)]
    # "failed": retried with the same fix, then out of attempts.
    assert task.state == (TaskState.FAILED if end == "failed" else TaskState.DELIVERED), history
    assert ("The branch moved" in (task.summary or "")) is (end == "superseded")
