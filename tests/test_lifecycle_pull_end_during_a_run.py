"""A person merges or closes the task's pull request while a run works on it (a CI fix run
queued or running, a review run): the task ends as the pull request did, not `terminated`
by the issue's close that follows a merge, and the run stops without changing anything
more. Real RQ workers, the GitHub sandbox, bubblewrap."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.lifecycle import PATIENCE_SECONDS, Lifecycle, Make, gone, wait_for
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull
from tests.fakes.sandbox import exchange_dir, runtime_pids
from tests.test_lifecycle_ci_fix import fail_head
from tests.test_lifecycle_review_runs import _comment


async def _answers(lc: Lifecycle, number: int) -> list[str]:
    """The App's replies on the pull request's line comments."""
    comments = await lc.github.list_review_comments(lc.repo, number)
    return [c.body for c in comments if "steelframe-thread-answer" in c.body]


async def test_a_merge_while_a_ci_fix_run_is_queued_makes_the_task_merged(make: Make) -> None:
    lc = await make(coding_command=command("echo"))
    issue, number = await delivered_pull(lc)
    await fail_head(lc, number)
    assert lc.task(issue).state == TaskState.RUNNING  # its fix run claimed, not started
    await as_person(lc, "maintainer", "PUT", f"/pulls/{number}/merge", {})
    assert lc.task(issue).state == TaskState.MERGED
    await lc.work()  # the fix run finds the task merged and does nothing
    task = lc.task(issue)
    assert task.state == TaskState.MERGED
    labels = await lc.labels(issue)
    assert "steelframe:merged" in labels and "steelframe:in-progress" not in labels
    assert (await lc.github.get_issue(lc.repo, issue)).state == "closed"  # "Fixes #N"


@dataclass
class ReviewRunWorking:
    lc: Lifecycle
    issue: int
    number: int
    runtime: int  # the review run's coding runtime, waiting to be told to go on
    go: Path  # what tells a review run's runtime to go on
    working: asyncio.Future[Any]  # the worker, until the run ends


async def _review_run_working(make: Make, tmp_path: Path) -> ReviewRunWorking:
    """A delivered task whose review run's runtime is working (and never told to go on)."""
    started, go = exchange_dir(tmp_path) / "started", exchange_dir(tmp_path) / "go"
    lc = await make(coding_command=command("review", "fix", started, go))
    issue, number = await delivered_pull(lc)
    await _comment(lc, "maintainer", number, "write")
    working = asyncio.ensure_future(lc.work())
    await wait_for(started.exists, within=PATIENCE_SECONDS)
    (runtime,) = runtime_pids(str(started))
    return ReviewRunWorking(lc, issue, number, runtime, go, working)


async def test_a_merge_during_a_review_run_stops_it_and_makes_the_task_merged(
    make: Make, tmp_path: Path
) -> None:
    run = await _review_run_working(make, tmp_path)
    lc, issue, number, runtime, working = (run.lc, run.issue, run.number, run.runtime, run.working)
    await as_person(lc, "maintainer", "PUT", f"/pulls/{number}/merge", {})
    assert lc.task(issue).state == TaskState.MERGED
    assert await gone(runtime)  # stopped, as a terminate stops a run: never told to go on
    await asyncio.wait_for(working, PATIENCE_SECONDS)
    task = lc.task(issue)
    assert task.state == TaskState.MERGED
    assert await _answers(lc, number) == []  # it replied to nothing
    assert "steelframe:merged" in await lc.labels(issue)
    assert not [e for e in lc.events(task.id) if e.to_state == TaskState.TERMINATED]


async def test_a_close_during_a_review_run_stops_it_and_a_reopen_delivers_again(
    make: Make, tmp_path: Path
) -> None:
    run = await _review_run_working(make, tmp_path)
    lc, issue, number, runtime, working = (run.lc, run.issue, run.number, run.runtime, run.working)
    await as_person(lc, "maintainer", "PATCH", f"/pulls/{number}", {"state": "closed"})
    assert lc.task(issue).state == TaskState.CLOSED
    assert await gone(runtime)
    await asyncio.wait_for(working, PATIENCE_SECONDS)
    assert lc.task(issue).state == TaskState.CLOSED and await _answers(lc, number) == []
    await as_person(lc, "maintainer", "PATCH", f"/pulls/{number}", {"state": "open"})
    # The review the stopped run held is answered by the run the reopen asks for.
    assert lc.task(issue).state == TaskState.QUEUED
    run.go.write_text("go")
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED and len(await _answers(lc, number)) == 1
