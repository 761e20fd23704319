"""A person merges or closes the task's pull request while a run works on it (a CI fix run
queued or running, a review run): the task ends as the pull request did, not `terminated`
by the issue's close that follows a merge, and the run stops without changing anything
more. What the run held (its pending fix, the review threads it took up) is let go, also
when the issue's close was delivered first and terminated the task. Real RQ workers, the
GitHub sandbox, bubblewrap."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bot.lifecycle import ci_store, tasks
from bot.lifecycle.ci_models import CiFix
from bot.lifecycle.models import ReviewThread
from bot.lifecycle.states import TaskState
from github_sandbox.operations import HookEvent
from tests.fakes.coding import command
from tests.fakes.lifecycle import PATIENCE_SECONDS, Lifecycle, Make, gone, wait_for
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull
from tests.fakes.sandbox import exchange_dir, the_runtime
from tests.test_lifecycle_ci_fix import fail_head
from tests.test_lifecycle_review_runs import _comment
from tests.test_lifecycle_terminate_pull import terminated_with_its_pull_open


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
    runtime = await the_runtime(str(started))
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


async def _merged_with_the_issue_close_first(lc: Lifecycle, number: int) -> None:
    """A maintainer merges; the issue's close ("Fixes #N") is delivered before the merge's
    `pull_request` `closed` (whose first delivery failed and was retried)."""
    hooks = lc.sandbox.sandbox.hooks
    url, secret, start = hooks.url, hooks.secret, len(hooks.sent)
    hooks.configure(None, secret)  # the merge's deliveries fail for now
    await as_person(lc, "maintainer", "PUT", f"/pulls/{number}/merge", {})
    hooks.configure(url, secret)
    sent = hooks.sent[start:]
    (merged,) = [d for d in sent if d.event == "pull_request"]
    (closed,) = [d for d in sent if (d.event, d.action) == ("issues", "closed")]
    for delivery in (closed, merged):
        hooks.enqueue([HookEvent(delivery.event, delivery.payload)])
        await lc.settle()


def _pending_fix(lc: Lifecycle, task_id: int) -> CiFix | None:
    generation = lc.ctx.db.call(lambda s: tasks.get_task(s, task_id).generation)
    found: CiFix | None = lc.ctx.db.call(ci_store.pending_fix, task_id, generation)
    return found


def _held_threads(lc: Lifecycle, task_id: int) -> list[str]:
    query = select(ReviewThread.picked_job).where(ReviewThread.task_id == task_id)
    return [job for job in lc.ctx.db.call(lambda s: list(s.scalars(query))) if job]


async def test_a_merge_delivered_after_the_issue_close_lets_go_of_the_queued_fix(
    make: Make,
) -> None:
    lc = await make(coding_command=command("echo"))
    issue, number = await delivered_pull(lc)
    await fail_head(lc, number)
    task_id = lc.task(issue).id
    assert lc.task(issue).state == TaskState.RUNNING and _pending_fix(lc, task_id) is not None
    await _merged_with_the_issue_close_first(lc, number)
    states = [e.to_state for e in lc.events(task_id)]
    assert states[-2:] == [TaskState.TERMINATED, TaskState.MERGED]
    assert _pending_fix(lc, task_id) is None


async def test_a_merge_delivered_after_the_issue_close_lets_go_of_the_review_threads(
    make: Make, tmp_path: Path
) -> None:
    run = await _review_run_working(make, tmp_path)
    lc, issue, number = run.lc, run.issue, run.number
    task_id = lc.task(issue).id
    assert _held_threads(lc, task_id)  # the review run took its thread up
    await _merged_with_the_issue_close_first(lc, number)
    assert await gone(run.runtime)
    await asyncio.wait_for(run.working, PATIENCE_SECONDS)
    assert lc.task(issue).state == TaskState.MERGED
    assert _held_threads(lc, task_id) == [] and await _answers(lc, number) == []


async def test_a_close_of_a_terminated_tasks_pull_request_lets_go_of_its_fix(
    make: Make,
) -> None:
    """Terminated by an operator while its fix run was queued, then its pull request closed
    without a merge: the task stays terminated, and the fix no run will conclude is ended."""
    lc = await make(coding_command=command("echo"))
    issue, number = await terminated_with_its_pull_open(lc)
    task_id = lc.task(issue).id
    assert _pending_fix(lc, task_id) is not None
    await as_person(lc, "maintainer", "PATCH", f"/pulls/{number}", {"state": "closed"})
    assert lc.task(issue).state == TaskState.TERMINATED
    assert _pending_fix(lc, task_id) is None
