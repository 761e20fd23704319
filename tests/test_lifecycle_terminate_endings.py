"""An operator's terminate recorded while a run went on (a frozen process held the task's row
past the terminate's bound) wins over the run's delivered or question ending, and over a
budget hold at the start: the task ends `terminated` as asked, decided under the task's row
lock like a retry, a final failure or a start (`bot.lifecycle.terminate`). A pull request
the run opened stays open, and the terminate's event and notice say so."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.lifecycle import leases, tasks, terminate
from bot.lifecycle.finish import finish_question
from bot.lifecycle.models import EventKind
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, apply
from tests.fakes.coding import command
from tests.fakes.lifecycle import PATIENCE_SECONDS, Lifecycle, Make, wait_for
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir


@pytest.fixture(params=["sqlite", "postgres"])
def bench_db(request: pytest.FixtureRequest) -> dict[str, str]:
    if request.param == "sqlite":
        return {}
    return {"database_url": str(request.getfixturevalue("pg_url"))}


def _moves(lc: Lifecycle, task_id: int) -> list[tuple[str, str]]:
    """(state, actor) of every transition after the task was created."""
    return [(e.to_state, e.actor) for e in lc.events(task_id) if e.to_state][1:]


def _since_running(lc: Lifecycle, task_id: int) -> list[tuple[str, str]]:
    moves = _moves(lc, task_id)
    states = [state for state, _ in moves]
    return moves[states.index(TaskState.RUNNING) + 1 :]


def _history(lc: Lifecycle, task_id: int) -> list[tuple[str, str | None, str, str]]:
    return [(e.kind, e.to_state, e.actor, e.detail) for e in lc.events(task_id)]


async def test_a_run_delivering_after_a_recorded_terminate_ends_terminated_its_pull_kept(
    make: Make, bench_db: dict[str, str], tmp_path: Path
) -> None:
    """The whole run in a worker: the terminate is recorded while the runtime works (as when
    the operator's terminate gave up on the row a frozen process held); the run then pushes
    and opens its pull request. The task ends terminated by the operator, not delivered;
    the pull request stays open, and the event and the notice name it."""
    exchange = exchange_dir(tmp_path)  # the runtime runs as nobody in its sandbox
    gate, started = exchange / "go", exchange / "started"
    lc = await make(coding_command=command("gated", gate, started), **bench_db)
    issue = await lc.open_issue("Make the widget blue")
    task_id = lc.task(issue).id
    working = asyncio.create_task(lc.work())
    try:
        await wait_for(started.exists, within=PATIENCE_SECONDS)
        assert lc.task(issue).state == TaskState.RUNNING
        lc.ctx.db.call(terminate.record, task_id, "operator:first", lc.ctx.clock)
        gate.write_text("go\n")
        await asyncio.wait_for(working, PATIENCE_SECONDS)
    finally:
        if not working.done():
            working.cancel()
    history = _history(lc, task_id)
    task = lc.task(issue)
    assert task.state == TaskState.TERMINATED, history
    assert _since_running(lc, task_id) == [(TaskState.TERMINATED, "operator:first")], history
    assert lc.ctx.db.call(terminate.pending) == []
    (pull,) = await lc.pulls()
    assert pull["state"] == "open"  # left as it is
    assert task.pr_url and task.pr_url.endswith(f"/pull/{pull['number']}")
    ended = lc.events(task_id)[-1]
    assert ended.data == {"pr_url": task.pr_url, "pr_number": pull["number"]}, history
    assert f"instead of: pull request {task.pr_url}" in ended.detail
    notices = [c["body"] for c in await lc.comments(issue) if "terminated by" in c["body"]]
    assert len(notices) == 1, notices
    assert "terminated by operator:first" in notices[0]
    assert f"Its pull request {task.pr_url} was already open" in notices[0]
    assert "steelframe:terminated" in await lc.labels(issue)
    assert lc.queued_jobs() == []


@pytest.mark.parametrize("opened", [False, True])
async def test_a_run_asking_a_question_after_a_recorded_terminate_ends_terminated(
    make: Make, bench_db: dict[str, str], opened: bool
) -> None:
    """A question ending as the delivered one: no question is asked, the task ends as the
    operator asked (a pull request already open, a fix run's, is named)."""
    lc = await make(**bench_db)
    issue = await lc.open_issue("Make the widget blue")
    task_id = lc.task(issue).id
    lc.ctx.db.call(apply, task_id, Move(TaskState.RUNNING, actor="worker:test"))
    pr_url = f"https://github.com/{lc.repo}/pull/7"
    if opened:
        lc.ctx.db.call(tasks.touch, task_id, lc.ctx.clock, pr_url=pr_url, pr_number=7)
    holder = leases.Holder.this_process()
    assert leases.acquire(lc.ctx.db, task_id, holder, ttl=60.0, clock=lc.ctx.clock)
    lc.ctx.db.call(terminate.record, task_id, "operator:first", lc.ctx.clock)
    assert lc.ctx.github is not None
    async with lc.ctx.github() as github:
        said = await finish_question(
            lc.ctx,
            github,
            lc.ctx.db.call(tasks.get_task, task_id),
            "worker:test",
            "Redis or SQLite?",
            fence=holder.id,
        )
    history = _history(lc, task_id)
    assert said == "terminated as operator:first asked", (said, history)
    assert _since_running(lc, task_id) == [(TaskState.TERMINATED, "operator:first")], history
    assert lc.ctx.db.call(terminate.pending) == []
    task = lc.ctx.db.call(tasks.get_task, task_id)
    assert task.question is None  # nobody is asked
    ended = lc.events(task_id)[-1]
    assert "instead of: the coding runtime asked a question" in ended.detail
    bodies = [c["body"] for c in await lc.comments(issue)]
    assert not any("Redis or SQLite?" in body for body in bodies), bodies
    (notice,) = [body for body in bodies if "terminated by operator:first" in body]
    assert (pr_url in notice) is opened and bool(ended.data) is opened


async def test_a_task_held_by_its_repository_budget_is_terminated_as_recorded_at_once(
    make: Make, bench_db: dict[str, str]
) -> None:
    """A queued task whose repository is over its budget, with a terminate recorded: its
    run terminates it as asked at once; it is not held (no note, no run for later)."""
    lc = await make(coding_command=command("commit"), repo_daily_max_tokens=100, **bench_db)
    first = await lc.open_issue("First change")
    await lc.work()
    assert lc.task(first).state == TaskState.DELIVERED  # 150 tokens: the day's budget spent
    second = await lc.open_issue("Second change")
    task_id = lc.task(second).id
    assert lc.queued_jobs(), "its run is waiting"
    lc.ctx.db.call(terminate.record, task_id, "operator:first", lc.ctx.clock)
    await lc.work()
    history = _history(lc, task_id)
    assert _moves(lc, task_id) == [(TaskState.TERMINATED, "operator:first")], history
    assert not [e for e in lc.events(task_id) if e.kind == EventKind.NOTE], history  # not held
    assert lc.ctx.db.call(terminate.pending) == []
    assert lc.task(second).attempts == 0
    assert lc.task(second).job_id is not None and "hold" not in lc.task(second).job_id
    assert lc.queued_jobs() == []
    assert "steelframe:terminated" in await lc.labels(second)


async def test_a_held_task_is_still_held_without_a_request(make: Make) -> None:
    """The hold itself, decided in the start's transaction now: noted once, run later."""
    lc = await make(coding_command=command("commit"), repo_daily_max_tokens=100)
    first = await lc.open_issue("First change")
    await lc.work()
    second = await lc.open_issue("Second change")
    await lc.work()
    task = lc.task(second)
    assert (task.state, task.attempts) == (TaskState.QUEUED, 0)
    assert task.job_id is not None and "-hold-" in task.job_id
    held = [e for e in lc.events(task.id) if e.kind == EventKind.NOTE and e.actor == "budget"]
    assert len(held) == 1 and "over its daily budget" in held[0].detail
    assert lc.task(first).state == TaskState.DELIVERED
