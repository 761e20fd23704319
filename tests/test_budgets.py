"""Budgets (issue 34): a task's budget (the setting, or the repository config's) stops a
run cleanly, nothing pushed, and the task waits for a person saying what it spent; a
repository over its daily budget holds new runs with the reason on the task until the
next day (an injected clock); bad budgets are refused with one line. Real service, GitHub
sandbox, RQ worker, bubblewrap where it runs here."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from bot.config import ConfigError, Secret, Settings
from bot.lifecycle import budget_ledger
from bot.lifecycle.models import EventKind
from bot.lifecycle.queue import rq_queue
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.git import commit_files
from tests.fakes.lifecycle import DECISION, Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.test_operations import samples


def _seed(lc: Lifecycle, files: dict[str, str]) -> None:
    commit_files(lc.sandbox.sandbox.world.repo(lc.repo).git_path, files)


async def test_a_run_over_the_task_budget_stops_with_nothing_pushed_and_waits(
    make: Make,
) -> None:
    lc = await make(coding_command=command("spend_after_commit"), task_max_tokens=2500)
    issue = await lc.open_issue("Spend tokens")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO
    assert task.question == "budget reached: spent 3,000 tokens of 2,500"
    assert "steelframe:needs_human" in await lc.labels(issue)
    said = [c["body"] for c in await lc.comments(issue) if "budget reached" in c["body"]]
    assert len(said) == 1 and "STEELFRAME_TASK_MAX_TOKENS" in said[0]
    # Stopped at the report that crossed it; its half change never left the worker.
    assert lc.branch_file("WIP.md", f"steelframe/issue-{issue}") is None
    assert await lc.pulls() == []
    assert any(e.kind == EventKind.LIMIT_EXCEEDED for e in lc.events(task.id))
    detail = await (await lc.api.get(f"/api/operator/tasks/{task.id}")).json()
    assert detail["usage"]["tokens"] == 3000 and detail["question"] == task.question


async def test_the_repository_config_overrides_the_task_budget(make: Make) -> None:
    lc = await make(coding_command=command("spend"), task_max_tokens=100_000)
    _seed(lc, {".steelframe/config.yml": "budget:\n  usd: 0.05\n"})
    issue = await lc.open_issue("Spend money")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO
    assert task.question == "budget reached: spent 0.06 USD of 0.05"
    said = [c["body"] for c in await lc.comments(issue) if "budget reached" in c["body"]]
    assert "`.steelframe/config.yml` `budget:`" in said[0]


async def test_a_zero_budget_means_no_coding_run(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    _seed(lc, {".steelframe/config.yml": "budget:\n  tokens: 0\n"})
    issue = await lc.open_issue()
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO
    assert task.question == "budget reached: spent 0 tokens of 0"
    assert task.tokens_used == 0 and await lc.pulls() == []


async def test_a_bad_budget_in_the_repository_config_fails_with_one_line(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    _seed(lc, {".steelframe/config.yml": "budget:\n  tokens: -5\n"})
    issue = await lc.open_issue()
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.FAILED
    error = task.last_error or ""
    assert "budget.tokens" in error and "\n" not in error
    assert await lc.pulls() == []


@pytest.mark.parametrize(
    "name", ["STEELFRAME_TASK_MAX_TOKENS", "STEELFRAME_REPO_DAILY_MAX_COST_USD"]
)
@pytest.mark.parametrize("value", ["-1", "lots", "nan"])
def test_a_negative_or_non_numeric_budget_is_refused_at_start_up(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name) as info:
        Settings.from_env({name: value})
    assert "\n" not in str(info.value)


async def test_a_repository_over_its_daily_budget_holds_new_runs_until_the_next_day(
    make: Make,
) -> None:
    lc = await make(
        coding_command=command("commit"),
        repo_daily_max_tokens=100,
        metrics_token=Secret("scrape-me"),
    )
    shift = [timedelta(0)]
    lc.ctx = dataclasses.replace(lc.ctx, clock=lambda: datetime.now(UTC) + shift[0])
    first = await lc.open_issue("First change")
    await lc.work()
    assert lc.task(first).state == TaskState.DELIVERED  # 150 tokens: the day's budget is spent
    spent = lc.ctx.db.call(budget_ledger.spent, lc.repo, lc.ctx.clock() - timedelta(hours=1))
    assert spent.tokens == 150

    second = await lc.open_issue("Second change")
    await lc.work()
    task = lc.task(second)
    assert task.state == TaskState.QUEUED and task.attempts == 0
    detail = await (await lc.api.get(f"/api/operator/tasks/{task.id}")).json()
    assert "over its daily budget (spent 150 tokens of 100)" in detail["held"]
    tomorrow = (lc.ctx.clock() + timedelta(days=1)).strftime("%Y-%m-%d")
    assert f"runs again from {tomorrow} 00:00 UTC" in detail["held"]
    # Its run waits in RQ's schedule for the next day, not in the queue.
    scheduled = rq_queue(lc.ctx.queue_name, lc.ctx.redis).scheduled_job_registry
    assert task.job_id in scheduled.get_job_ids() and lc.queued_jobs() == []
    # Tried again the same day (a redelivered job): still held, the reason said once.
    await _run_job(lc, task.id, task.job_id)
    holds = [e for e in lc.events(task.id) if e.actor == "budget"]
    assert len(holds) == 1 and lc.task(second).state == TaskState.QUEUED
    # /metrics: the day's and the month's spend of the repository, and the task it holds.
    scrape = await lc.api.raw.get("/metrics", headers={"Authorization": "Bearer scrape-me"})
    found = samples(await scrape.text())
    for period in ("day", "month"):
        labels = (("period", period), ("repo", lc.repo))
        assert found[("steelframe_repo_spend_tokens", labels)] == 150
        assert found[("steelframe_repo_spend_usd", labels)] == pytest.approx(0.001)
    assert found[("steelframe_tasks_held_by_budget", ())] == 1
    # The Dashboard's figures: the repository's spend per day.
    spend = await (await lc.api.get("/api/operator/spend?days=7")).json()
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    assert spend == {
        "days": 7,
        "spend": [{"repo": lc.repo, "day": today, "tokens": 150, "usd": pytest.approx(0.001)}],
    }
    bad = await lc.api.get("/api/operator/spend?days=0")
    assert bad.status == 400 and (await bad.json())["detail"]["field"] == "days"

    shift[0] = timedelta(days=1)  # the next day: the scheduled run starts and delivers
    await _run_job(lc, task.id, lc.task(second).job_id)
    assert lc.task(second).state == TaskState.DELIVERED


async def test_a_held_task_starts_once_its_repository_budget_is_raised(make: Make) -> None:
    lc = await make(coding_command=command("commit"), repo_daily_max_cost_usd=0.0005)
    first = await lc.open_issue("First change")
    await lc.work()
    assert lc.task(first).state == TaskState.DELIVERED  # 0.001 USD: over the day's budget
    second = await lc.open_issue("Second change")
    await lc.work()
    task = lc.task(second)
    assert task.state == TaskState.QUEUED
    held = [e.detail for e in lc.events(task.id) if e.actor == "budget"]
    assert held and "over its daily budget" in held[0] and "raised" in held[0]
    # The operator raises it (the workers restarted with the new setting): the next look
    # starts the task the same day.
    raised = dataclasses.replace(lc.ctx.settings, repo_daily_max_cost_usd=1.0)
    lc.ctx = dataclasses.replace(lc.ctx, settings=raised)
    await _run_job(lc, task.id, task.job_id)
    assert lc.task(second).state == TaskState.DELIVERED


async def _run_job(lc: Lifecycle, task_id: int, job: str | None) -> None:
    """The task's scheduled run, as RQ's scheduler would start it when it is due."""
    assert job is not None
    queue = rq_queue(lc.ctx.queue_name, lc.ctx.redis)
    queue.scheduled_job_registry.remove(job)
    fetched = queue.fetch_job(job)
    assert fetched is not None
    queue.enqueue_job(fetched)
    await lc.work()


async def test_a_decision_resumes_a_task_stopped_by_its_budget_once_raised(make: Make) -> None:
    lc = await make(coding_command=command("question"), task_max_cost_usd=0.1)
    issue = await lc.open_issue("Add a cache")
    await lc.work()  # asks its question (no spend)
    await lc.comment_as("maintainer", issue, f"{DECISION}\nUse SQLite.", "write")
    await lc.work()  # the continuation reports 0.42 USD: over 0.10
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO
    assert task.question == "budget reached: spent 0.42 USD of 0.10"
    lc.ctx = dataclasses.replace(lc.ctx, policy=dataclasses.replace(lc.ctx.policy, max_cost_usd=5))
    await lc.comment_as("maintainer", issue, f"{DECISION}\nBudget raised: go on.", "write")
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED
