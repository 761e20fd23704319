"""A run does its database work off its event loop (`Database.run`, a worker thread): the
loop carries the run's termination watch and its GitHub calls, and a slow database there
would stall them. Checked on real runs through an RQ worker: no statement executes on a
thread that runs an event loop while any module of `bot/lifecycle/` is on that thread's
stack (`tests/fakes/loop_statements.py`), so a synchronous call from any of the run's
coroutines counts, however deep (the lease check before the clone, the push and the pull
request, `Run.check_lease`; a plan-first task's plan read, stored, settled and estimated,
`plan_flow`). The runs: an issue's run delivered, one that asks (its work in progress
pushed), a review run (a push, then its replies), and a plan-first task (an ordinary run
that reads the estimate, a plan run, the approved plan's coding run). SQLite and
PostgreSQL, the GitHub sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.lifecycle import DECISION, Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.loop_statements import statements_on_the_loop
from tests.fakes.pulls import as_person, delivered_pull
from tests.fakes.sandbox import exchange_dir

LIFECYCLE = "bot/lifecycle/"


async def _watched(lc: Lifecycle) -> list[str]:
    """The queue run dry by a worker; what of bot/lifecycle/ ran on an event loop."""
    with statements_on_the_loop(lc.ctx.db.engine, LIFECYCLE) as on_the_loop:
        await lc.work()
    return on_the_loop


def _history(lc: Lifecycle, issue: int) -> list[tuple[str, str | None, str | None]]:
    return [(e.kind, e.to_state, e.detail) for e in lc.events(lc.task(issue).id)]


@pytest.mark.parametrize("end", ["delivered", "asked"])
async def test_an_issues_run_never_runs_a_statement_on_its_event_loop(
    make: Make, any_db_url: str, end: str
) -> None:
    runtime = command("commit") if end == "delivered" else command("question")
    lc = await make(coding_command=runtime, database_url=any_db_url)
    issue = await lc.open_issue()
    on_the_loop = await _watched(lc)
    task = lc.task(issue)
    if end == "delivered":  # cloned, pushed, its pull request opened
        assert task.state == TaskState.DELIVERED, _history(lc, issue)
        assert len(await lc.pulls()) == 1
    else:  # cloned, its work in progress pushed, the question asked
        assert task.state == TaskState.WAITING_FOR_INFO, _history(lc, issue)
        assert lc.branch_file("NOTES.md", str(task.branch)) == "half done\n"
    assert on_the_loop == []


async def test_a_review_run_never_runs_a_statement_on_its_event_loop(
    make: Make, any_db_url: str
) -> None:
    lc = await make(coding_command=command("review", "fix"), database_url=any_db_url)
    issue, number = await delivered_pull(lc)
    pull = await lc.github.get_pull(lc.repo, number)
    review = {"body": "Blue is too loud.", "commit_id": pull.head.sha, "path": "CHANGE.md"}
    await as_person(lc, "maintainer", "POST", f"/pulls/{number}/comments", {**review, "line": 1})
    assert lc.task(issue).state == TaskState.QUEUED
    on_the_loop = await _watched(lc)
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED, _history(lc, issue)
    assert "calmer blue" in (lc.branch_file("CHANGE.md", str(task.branch)) or "")  # pushed
    replies = [c for c in await lc.github.list_review_comments(lc.repo, number) if c.in_reply_to_id]
    assert len(replies) == 1  # its thread answered
    assert on_the_loop == []


async def test_a_plan_first_task_never_runs_a_statement_on_its_event_loop(
    make: Make, any_db_url: str, tmp_path: Path
) -> None:
    lc = await make(
        coding_command=command("planner", exchange_dir(tmp_path)),
        approve_above_usd=0.02,
        database_url=any_db_url,
    )
    first = await lc.open_issue("First change")
    on_the_loop = await _watched(lc)  # no history to estimate from: an ordinary run
    assert lc.task(first).state == TaskState.DELIVERED, _history(lc, first)
    second = await lc.open_issue("Second change")
    on_the_loop += await _watched(lc)  # likely 0.05 USD, over 0.02: a plan run
    task = lc.task(second)
    assert task.state == TaskState.WAITING_FOR_INFO, _history(lc, second)
    assert "Proposed plan" in (task.question or "") and "~0.05 USD" in (task.question or "")
    await lc.comment_as("maintainer", second, f"{DECISION}\nGo ahead.", "write")
    on_the_loop += await _watched(lc)  # the plan approved, then followed
    assert lc.task(second).state == TaskState.DELIVERED, _history(lc, second)
    bodies = [p["body"] for p in await lc.pulls()]
    assert len(bodies) == 2 and sum("### Approved plan" in body for body in bodies) == 1
    assert on_the_loop == []
