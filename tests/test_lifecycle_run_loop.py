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
PostgreSQL, the GitHub sandbox.

Then the rarer paths a run's loop reaches, each under the same rule: a run that lost its
lease (found at its lease check, or by its heartbeat) and hands its task back
(`run._hand_back`, `recovery.recover`); a retried delivery that finds the pull request it
opened before it broke (`steps.work`, `pulls.existing_pull`); CI fix runs (pushed,
unchanged, failed, superseded by a person's push); an operator's terminate during a run,
recorded while it works (its ending terminates instead) or before it starts; budget stops
(crossed, zero) and a repository's budget hold; no runtime, no GitHub App; a memory task;
a failed, timed-out, unchanged, too large or badly set up run, a setup that ran, red tests
(a draft), the sandbox off (its warning noted); a task out of attempts; a lease another run
holds (the trigger ignored); a rejected plan; a question a past Decision answers
(`auto_resume`); review runs that ask, change nothing, find their threads answered
meanwhile, or see a review come in while they work (the follow-up run,
`review_pickup.follow_up`)."""

from __future__ import annotations

import asyncio
import dataclasses
import shlex
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session

from bot.filing import MEMORY_LABEL, memory_issue_body, memory_path
from bot.lifecycle import leases, review_run, steps, tasks, terminate
from bot.lifecycle.finish import finish_delivered
from bot.lifecycle.leases import Holder
from bot.lifecycle.models import EventKind, ReviewThread, Task, TaskLease, TaskLog, ThreadState
from bot.lifecycle.plan_flow import PLAN_LABEL
from bot.lifecycle.repo_config import CONFIG_PATH as CONFIG
from bot.lifecycle.review_pickup import pick_up
from bot.lifecycle.sandbox import OFF_WARNING
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, apply
from tests.fakes.coding import command
from tests.fakes.git import commit_files
from tests.fakes.lifecycle import (
    DECISION,
    PATIENCE_SECONDS,
    PICKUP,
    Lifecycle,
    Make,
    wait_for,
)
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.loop_statements import statements_on_the_loop
from tests.fakes.pulls import as_person, delivered_pull
from tests.fakes.sandbox import exchange_dir
from tests.test_lifecycle_ci_fix import fail_head

LIFECYCLE = "bot/lifecycle/"
MIB = 1024 * 1024
AUTO_RESUME = "decisions:\n  auto_resume: true\n  min_score: 0.9\n"
# A runtime that reports its work done and commits nothing.
IDLE = shlex.join(
    [
        sys.executable,
        "-c",
        "import sys; sys.stdin.read(); "
        'print(\'{"type": "result", "status": "done", "summary": "Nothing to change."}\')',
    ]
)


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


# The rarer paths a run's loop reaches, each under the same rule.


def _runtime(lc: Lifecycle, runtime: str) -> None:
    """The worker's coding command from now on (the service's stays as it was)."""
    policy = dataclasses.replace(lc.ctx.policy, coding_command=tuple(shlex.split(runtime)))
    lc.ctx = dataclasses.replace(lc.ctx, policy=policy)


def _set_lease(session: Session, /, task_id: int, **values: Any) -> None:
    session.execute(update(TaskLease).where(TaskLease.task_id == task_id).values(**values))


def _lose_lease(lc: Lifecycle, task_id: int, how: str) -> None:
    """The run stalled past its lease: still its own but expired, or taken over by a run
    that died at once."""
    past = lc.ctx.clock() - timedelta(seconds=1)
    taken = {"holder": "elsewhere:1:dead", "host": "elsewhere", "pid": 1} if how == "taken" else {}
    lc.ctx.db.call(_set_lease, task_id, expires_at=past, **taken)


def _handed_back(lc: Lifecycle, task_id: int) -> bool:
    return any("lost its lease" in str((e.data or {}).get("error")) for e in lc.events(task_id))


@pytest.mark.parametrize("how", ["expired", "taken", "noticed"])
async def test_a_run_that_lost_its_lease_hands_its_task_back_off_its_loop(
    make: Make, any_db_url: str, tmp_path: Path, how: str
) -> None:
    # "expired", "taken": a long lease, which its heartbeat (every third of it) renews not
    # while the test works: the run finds it lost at its lease check before the push.
    # "noticed": taken, and the heartbeat (every 2 s) finds it so while the runtime works,
    # which the run then stops.
    started, finish = exchange_dir(tmp_path) / "started.txt", exchange_dir(tmp_path) / "finish"
    lc = await make(
        coding_command=command("gated", finish, started),
        task_lease_seconds=6.0 if how == "noticed" else 600.0,
        database_url=any_db_url,
    )
    issue = await lc.open_issue()
    task_id = lc.task(issue).id
    with statements_on_the_loop(lc.ctx.db.engine, LIFECYCLE) as on_the_loop:
        running = asyncio.ensure_future(lc.work())
        try:
            await wait_for(started.exists, within=PATIENCE_SECONDS)
            await asyncio.to_thread(
                _lose_lease, lc, task_id, "expired" if how == "expired" else "taken"
            )
            if how == "noticed":  # the first attempt stopped without its runtime's end
                await wait_for(lambda: _handed_back(lc, task_id), within=PATIENCE_SECONDS)
        finally:
            finish.touch()  # the run goes on either way: a failure here is not a hang
            await running  # the burst runs the retry its hand-back queued too
    task = lc.task(issue)
    assert (task.state, task.attempts) == (TaskState.DELIVERED, 2), _history(lc, issue)
    retried = [e for e in lc.events(task_id) if e.to_state == TaskState.QUEUED and e.id > 1]
    assert len(retried) == 1 and "lost its lease" in retried[0].data["error"]
    assert on_the_loop == []


async def test_a_retried_delivery_finds_the_pull_request_it_opened_off_its_loop(
    make: Make, any_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first attempt opens its pull request, then breaks before the task is delivered
    # (as a worker that lost its database there would): the retry finds the pull request
    # open for its pushed branch and delivers it without running the runtime again.
    lc = await make(coding_command=command("commit"), database_url=any_db_url)
    broke: list[str] = []

    async def breaks_once(*args: Any, **kwargs: Any) -> str:
        if not broke:
            broke.append("once")
            raise ConnectionError("the database went away after the pull request was opened")
        return await finish_delivered(*args, **kwargs)

    monkeypatch.setattr(steps, "finish_delivered", breaks_once)
    issue = await lc.open_issue()
    on_the_loop = await _watched(lc)
    task = lc.task(issue)
    assert (task.state, task.attempts) == (TaskState.DELIVERED, 2), _history(lc, issue)
    assert broke == ["once"] and len(await lc.pulls()) == 1
    logs = lc.ctx.db.call(lambda s: s.query(TaskLog).filter(TaskLog.task_id == task.id).count())
    assert logs == 2  # the runtime's log and the failure's: the retry ran no runtime
    assert on_the_loop == []


@pytest.mark.parametrize("end", ["pushed", "unchanged", "failed", "superseded"])
async def test_a_ci_fix_run_never_runs_a_statement_on_its_event_loop(
    make: Make, any_db_url: str, tmp_path: Path, end: str
) -> None:
    lc = await make(coding_command=command("echo"), database_url=any_db_url)
    issue, number = await delivered_pull(lc)
    _runtime(
        lc,
        {
            "pushed": command("echo"),
            "unchanged": command("ci_idle"),
            "failed": command("fail", exchange_dir(tmp_path) / "runs.txt"),
            "superseded": command("echo"),
        }[end],
    )
    await fail_head(lc, number)
    assert lc.task(issue).state == TaskState.RUNNING  # its fix run is queued
    if end == "superseded":  # a person pushed before the fix run cloned: nothing to fix
        git_path = lc.sandbox.sandbox.world.repo(lc.repo).git_path
        commit_files(git_path, {"PERSON.md": "pushed\n"}, branch=str(lc.task(issue).branch))
    on_the_loop = await _watched(lc)
    wanted = {
        "pushed": TaskState.DELIVERED,
        "unchanged": TaskState.WAITING_FOR_INFO,
        "failed": TaskState.FAILED,  # retried with the same fix, then out of attempts
        "superseded": TaskState.DELIVERED,
    }[end]
    task = lc.task(issue)
    assert task.state == wanted, _history(lc, issue)
    assert ("The branch moved" in (task.summary or "")) is (end == "superseded")
    assert on_the_loop == []


async def test_a_run_terminated_while_it_runs_stops_off_its_loop(
    make: Make, any_db_url: str, tmp_path: Path
) -> None:
    pids = exchange_dir(tmp_path) / "pids.txt"
    lc = await make(
        coding_command=command("hang", pids),
        task_time_limit=int(10 * PATIENCE_SECONDS),  # only the terminate stops it
        database_url=any_db_url,
    )
    issue = await lc.open_issue()
    task_id = lc.task(issue).id
    with statements_on_the_loop(lc.ctx.db.engine, LIFECYCLE) as on_the_loop:
        running = asyncio.ensure_future(lc.work())
        try:
            await wait_for(
                lambda: pids.exists() and pids.read_text().strip(), within=PATIENCE_SECONDS
            )
            response = await lc.api.post(f"/api/operator/tasks/{task_id}/terminate")
            assert response.status == 200, await response.text()
        finally:
            await asyncio.wait_for(running, PATIENCE_SECONDS)
    assert lc.task(issue).state == TaskState.TERMINATED, _history(lc, issue)
    assert on_the_loop == []


async def test_a_terminate_recorded_while_a_run_works_ends_it_off_its_loop(
    make: Make, any_db_url: str, tmp_path: Path
) -> None:
    # A terminate recorded while a frozen worker held the row: the run's ending terminates
    # the task as asked instead of delivering it (`terminate.unless_requested`).
    started, finish = exchange_dir(tmp_path) / "started.txt", exchange_dir(tmp_path) / "finish"
    lc = await make(coding_command=command("gated", finish, started), database_url=any_db_url)
    issue = await lc.open_issue()
    task_id = lc.task(issue).id
    with statements_on_the_loop(lc.ctx.db.engine, LIFECYCLE) as on_the_loop:
        running = asyncio.ensure_future(lc.work())
        try:
            await wait_for(started.exists, within=PATIENCE_SECONDS)
            await asyncio.to_thread(lc.ctx.db.call, terminate.record, task_id, "op", lc.ctx.clock)
        finally:
            finish.touch()
            await running
    task = lc.task(issue)
    assert task.state == TaskState.TERMINATED, _history(lc, issue)
    assert "instead of" in (lc.events(task_id)[-1].detail or "")
    assert on_the_loop == []


async def test_a_terminate_recorded_before_the_run_starts_ends_it_off_its_loop(
    make: Make, any_db_url: str
) -> None:
    lc = await make(coding_command=command("commit"), database_url=any_db_url)
    issue = await lc.open_issue()
    lc.ctx.db.call(terminate.record, lc.task(issue).id, "op", lc.ctx.clock)
    on_the_loop = await _watched(lc)
    task = lc.task(issue)
    assert (task.state, task.attempts) == (TaskState.TERMINATED, 0), _history(lc, issue)
    assert on_the_loop == []


@pytest.mark.parametrize("how", ["crossed", "zero"])
async def test_a_budget_stop_never_runs_a_statement_on_its_event_loop(
    make: Make, any_db_url: str, how: str
) -> None:
    if how == "crossed":
        runtime, limits = command("spend_after_commit"), {"task_max_tokens": 2500}
    else:
        runtime, limits = command("commit"), {}
    lc = await make(coding_command=runtime, database_url=any_db_url, **limits)
    if how == "zero":
        commit_files(
            lc.sandbox.sandbox.world.repo(lc.repo).git_path, {CONFIG: "budget:\n  tokens: 0\n"}
        )
    issue = await lc.open_issue("Spend tokens")
    on_the_loop = await _watched(lc)
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO, _history(lc, issue)
    assert (task.question or "").startswith("budget reached: spent ")
    assert on_the_loop == []


async def test_a_task_held_by_its_repositorys_budget_never_runs_a_statement_on_its_loop(
    make: Make, any_db_url: str
) -> None:
    lc = await make(
        coding_command=command("commit"), repo_daily_max_tokens=100, database_url=any_db_url
    )
    first = await lc.open_issue("First change")
    on_the_loop = await _watched(lc)  # 150 tokens: the day's budget spent
    assert lc.task(first).state == TaskState.DELIVERED, _history(lc, first)
    second = await lc.open_issue("Second change")
    on_the_loop += await _watched(lc)  # held: queued again for later
    task = lc.task(second)
    assert (task.state, task.attempts) == (TaskState.QUEUED, 0), _history(lc, second)
    assert task.job_id is not None and "-hold-" in task.job_id
    assert on_the_loop == []


async def test_a_run_without_a_runtime_never_runs_a_statement_on_its_event_loop(
    make: Make, any_db_url: str
) -> None:
    lc = await make(database_url=any_db_url)  # no coding runtime configured
    issue = await lc.open_issue()
    on_the_loop = await _watched(lc)
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO, _history(lc, issue)
    assert "no coding runtime" in (task.question or "")
    assert on_the_loop == []


async def test_a_memory_task_never_runs_a_statement_on_its_event_loop(
    make: Make, any_db_url: str
) -> None:
    lc = await make(database_url=any_db_url)  # a memory task needs no runtime
    title = "Remember the deploy day"
    created = await lc.github.create_issue(
        lc.repo,
        title=title,
        body=memory_issue_body(title, "we deploy on Tuesdays"),
        labels=[PICKUP, MEMORY_LABEL],
    )
    await lc.settle()
    on_the_loop = await _watched(lc)
    task = lc.task(created.number)
    assert task.state == TaskState.DELIVERED, _history(lc, created.number)
    assert lc.branch_file(memory_path(title), str(task.branch)) == "we deploy on Tuesdays\n"
    assert on_the_loop == []


@pytest.mark.parametrize(
    "end",
    [
        "failed",
        "timed-out",
        "unchanged",
        "too-large",
        "setup-failed",
        "setup-ran",
        "red-tests",
        "sandbox-off",
    ],
)
async def test_a_runs_other_endings_never_run_a_statement_on_its_event_loop(
    make: Make, any_db_url: str, tmp_path: Path, end: str
) -> None:
    exchange = exchange_dir(tmp_path)
    runtime, settings, config = {
        # Retried once (the bench's two attempts), then failed for good.
        "failed": (command("fail", exchange / "runs.txt"), {}, None),
        "timed-out": (command("hang", exchange / "pids.txt"), {"task_time_limit": 1}, None),
        "unchanged": (IDLE, {}, None),  # done, and nothing committed
        "too-large": (
            command("large", f"data/big.bin:{4 * MIB}"),
            {"push_max_file_bytes": MIB, "push_max_bytes": 2 * MIB},
            None,
        ),
        "setup-failed": (command("commit"), {"task_max_attempts": 1}, "setup:\n  - 'exit 7'\n"),
        "setup-ran": (command("commit"), {}, "setup:\n  - 'true'\n"),
        # Delivered, with the worker's warning that nothing isolates the runtime noted.
        "sandbox-off": (command("commit"), {"coding_sandbox": "off"}, None),
        # Red after the runtime and after its second run: a draft pull request.
        "red-tests": (command("commit"), {}, "test: 'exit 3'\n"),
    }[end]
    lc = await make(coding_command=runtime, database_url=any_db_url, **settings)
    if config is not None:
        commit_files(lc.sandbox.sandbox.world.repo(lc.repo).git_path, {CONFIG: config})
    issue = await lc.open_issue()
    on_the_loop = await _watched(lc)
    task = lc.task(issue)
    delivered = ("setup-ran", "red-tests", "sandbox-off")
    wanted = TaskState.DELIVERED if end in delivered else TaskState.FAILED
    assert task.state == wanted, _history(lc, issue)
    if end == "red-tests":
        assert [p["draft"] for p in await lc.pulls()] == [True]
    if end == "setup-ran":
        assert "setup: ran 1 command" in [e.detail for e in lc.events(task.id)]
    if end == "sandbox-off":
        assert any(e.detail == OFF_WARNING for e in lc.events(task.id))
    assert on_the_loop == []


async def test_a_run_out_of_attempts_never_runs_a_statement_on_its_event_loop(
    make: Make, any_db_url: str
) -> None:
    lc = await make(coding_command=command("commit"), database_url=any_db_url)
    issue = await lc.open_issue()
    task_id = lc.task(issue).id
    used = lc.ctx.policy.max_attempts
    lc.ctx.db.call(
        lambda s: s.execute(update(Task).where(Task.id == task_id).values(attempts=used))
    )
    on_the_loop = await _watched(lc)
    task = lc.task(issue)
    assert task.state == TaskState.FAILED, _history(lc, issue)
    assert "attempts" in (task.last_error or "")
    assert on_the_loop == []


async def test_a_run_whose_lease_another_run_holds_never_runs_a_statement_on_its_loop(
    make: Make, any_db_url: str
) -> None:
    lc = await make(coding_command=command("commit"), database_url=any_db_url)
    issue = await lc.open_issue()
    task_id = lc.task(issue).id
    live = Holder("elsewhere:1:live", "elsewhere", 1)
    assert leases.acquire(lc.ctx.db, task_id, live, ttl=600.0)
    on_the_loop = await _watched(lc)
    assert lc.task(issue).state == TaskState.QUEUED, _history(lc, issue)
    assert [e.kind for e in lc.events(task_id)][-1] == EventKind.TRIGGER_IGNORED
    assert on_the_loop == []


async def test_a_rejected_plan_never_runs_a_statement_on_its_event_loop(
    make: Make, any_db_url: str, tmp_path: Path
) -> None:
    lc = await make(
        coding_command=command("planner", exchange_dir(tmp_path)), database_url=any_db_url
    )
    issue = await lc.github.create_issue(
        lc.repo, title="Plan it first", body="It is red.", labels=[PICKUP, PLAN_LABEL]
    )
    await lc.settle()
    on_the_loop = await _watched(lc)  # the plan run
    assert lc.task(issue.number).state == TaskState.WAITING_FOR_INFO, _history(lc, issue.number)
    await lc.comment_as("maintainer", issue.number, f"{DECISION}\nReject.", "write")
    on_the_loop += await _watched(lc)  # the plan rejected: the task ends
    assert lc.task(issue.number).state == TaskState.TERMINATED, _history(lc, issue.number)
    assert await lc.pulls() == []
    assert on_the_loop == []


def _answered_before(session: Session, repo: str, question: str, decision: str) -> None:
    """Another issue of the repository asked `question` and a Decision answered it."""
    task = tasks.new_task(
        session, repo=repo, issue=900, title="Add a cache", origin_session=None, actor="test"
    )
    for state in (TaskState.RUNNING, TaskState.WAITING_FOR_INFO):
        data = {"question": question} if state == TaskState.WAITING_FOR_INFO else None
        apply(session, task.id, Move(state, actor="test", data=data))
    task = tasks.get_task(session, task.id)
    tasks.record(session, task, EventKind.DECISION, actor="maintainer", detail=decision)


async def test_a_question_answered_by_a_past_decision_never_runs_a_statement_on_its_loop(
    make: Make, any_db_url: str
) -> None:
    # The question's end hook (`auto_resume.after_question`) publishes the Decision that
    # answered the same question on another issue; the task resumes with it.
    lc = await make(coding_command=command("question"), database_url=any_db_url)
    commit_files(lc.sandbox.sandbox.world.repo(lc.repo).git_path, {CONFIG: AUTO_RESUME})
    asked = "Should the cache use Redis or SQLite?"  # what the runtime asks
    lc.ctx.db.call(_answered_before, lc.repo, asked, "Use SQLite.")
    issue = await lc.open_issue("Add a cache to the importer")
    on_the_loop = await _watched(lc)  # asks; the other issue's Decision answers it
    on_the_loop += await _watched(lc)  # the continuation it resumed
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED, _history(lc, issue)
    assert [e.kind for e in lc.events(task.id)].count(EventKind.DECISION) == 1
    assert "decision: Use SQLite." in (lc.branch_file("ANSWER.md", str(task.branch)) or "")
    assert on_the_loop == []


async def _review_comment(lc: Lifecycle, number: int, body: str = "Blue is too loud.") -> Any:
    pull = await lc.github.get_pull(lc.repo, number)
    comment = {"body": body, "commit_id": pull.head.sha, "path": "CHANGE.md", "line": 1}
    return await as_person(lc, "maintainer", "POST", f"/pulls/{number}/comments", comment)


@pytest.mark.parametrize("mode", ["ask", "nothing"])
async def test_a_review_run_that_asks_never_runs_a_statement_on_its_event_loop(
    make: Make, any_db_url: str, mode: str
) -> None:
    # "nothing": it changed nothing and answered nothing, so it asks the operator.
    lc = await make(coding_command=command("review", mode), database_url=any_db_url)
    issue, number = await delivered_pull(lc)
    await _review_comment(lc, number)
    on_the_loop = await _watched(lc)
    assert lc.task(issue).state == TaskState.WAITING_FOR_INFO, _history(lc, issue)
    replies = [c for c in await lc.github.list_review_comments(lc.repo, number) if c.in_reply_to_id]
    assert len(replies) == 1 and ("Which blue?" in replies[0].body or mode == "nothing")
    assert on_the_loop == []


def _answered_elsewhere(session: Session, task_id: int) -> None:
    session.execute(
        update(ReviewThread)
        .where(ReviewThread.task_id == task_id)
        .values(state=ThreadState.ADDRESSED)
    )


async def test_a_review_run_whose_threads_were_answered_meanwhile_stays_off_its_loop(
    make: Make, any_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its threads answered between the run's choice of a review run and its pickup (a race
    # with another path): nothing to take up, the task is delivered again as it was.
    lc = await make(coding_command=command("review", "fix"), database_url=any_db_url)
    issue, number = await delivered_pull(lc)
    await _review_comment(lc, number)

    async def answered_first(db: Any, github: Any, task: Task, **kwargs: Any) -> Any:
        await asyncio.to_thread(db.call, _answered_elsewhere, task.id)
        return await pick_up(db, github, task, **kwargs)

    monkeypatch.setattr(review_run, "pick_up", answered_first)
    on_the_loop = await _watched(lc)
    assert lc.task(issue).state == TaskState.DELIVERED, _history(lc, issue)
    replies = [c for c in await lc.github.list_review_comments(lc.repo, number) if c.in_reply_to_id]
    assert replies == []  # no run answered anything
    assert on_the_loop == []


async def test_a_review_that_came_in_during_a_run_is_followed_up_off_its_loop(
    make: Make, any_db_url: str, tmp_path: Path
) -> None:
    # The run's end asks the follow-up review run (`review_pickup.follow_up`) for a thread
    # recorded while it ran.
    started, go = exchange_dir(tmp_path) / "started.txt", exchange_dir(tmp_path) / "go"
    lc = await make(coding_command=command("review", "fix", started, go), database_url=any_db_url)
    issue, number = await delivered_pull(lc)
    await _review_comment(lc, number)
    with statements_on_the_loop(lc.ctx.db.engine, LIFECYCLE) as on_the_loop:
        running = asyncio.ensure_future(lc.work())
        try:
            await wait_for(started.exists, within=PATIENCE_SECONDS)
            await _review_comment(lc, number, "And the border too.")
        finally:
            go.touch()
            await running  # the burst runs the follow-up too
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED, _history(lc, issue)
    pickups = [e for e in lc.events(task.id) if e.kind == EventKind.REVIEW_PICKUP]
    assert len(pickups) == 2, _history(lc, issue)
    assert on_the_loop == []


async def test_a_worker_without_the_github_app_never_runs_a_statement_on_its_loop(
    make: Make, any_db_url: str
) -> None:
    lc = await make(coding_command=command("commit"), database_url=any_db_url)
    issue = await lc.open_issue()
    lc.ctx = dataclasses.replace(lc.ctx, github=None)  # no APP_ID, PRIVATE_KEY here
    on_the_loop = await _watched(lc)
    task = lc.task(issue)
    assert task.state == TaskState.FAILED, _history(lc, issue)
    assert "GitHub App is not configured" in (task.last_error or "")
    assert on_the_loop == []
