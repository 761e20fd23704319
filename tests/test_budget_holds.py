"""A repository over more than one of its budgets at once (issue 34): the hold names the
one that lasts longest, so "runs again from" is when the task may really start. Real
service, GitHub sandbox, RQ worker."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.lifecycle.queue import LifecycleQueue, job_id, rq_queue
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture


async def test_a_repository_over_its_daily_and_monthly_budgets_is_held_until_next_month(
    make: Make,
) -> None:
    lc = await make(
        coding_command=command("commit"), repo_daily_max_tokens=100, repo_monthly_max_tokens=100
    )
    first = await lc.open_issue("First change")
    await lc.work()
    assert lc.task(first).state == TaskState.DELIVERED  # 150 tokens: both budgets spent
    second = await lc.open_issue("Second change")
    await lc.work()
    task = lc.task(second)
    assert task.state == TaskState.QUEUED
    detail = await (await lc.api.get(f"/api/operator/tasks/{task.id}")).json()
    now = datetime.now(UTC)
    next_month = (now.replace(day=1) + timedelta(days=32)).replace(day=1)
    # Tomorrow the monthly budget still holds it: the day's turn is not when it runs again.
    assert "over its monthly budget (spent 150 tokens of 100)" in detail["held"], detail["held"]
    assert f"runs again from {next_month:%Y-%m-%d} 00:00 UTC" in detail["held"]


async def test_a_repository_budget_of_zero_promises_no_day_it_runs_again(make: Make) -> None:
    lc = await make(coding_command=command("commit"), repo_daily_max_cost_usd=0.0)
    issue = await lc.open_issue()
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.QUEUED and task.attempts == 0
    detail = await (await lc.api.get(f"/api/operator/tasks/{task.id}")).json()
    # Tomorrow 0.00 USD of 0.00 holds it again: only a raised budget starts it.
    assert detail["held"] == (
        f"held: {lc.repo} is over its daily budget (spent 0.00 USD of 0.00); "
        "it runs once the budget is raised"
    )


async def test_a_second_run_of_a_held_task_leaves_one_recheck_waiting(make: Make) -> None:
    lc = await make(coding_command=command("commit"), repo_daily_max_tokens=100)
    first = await lc.open_issue("First change")
    await lc.work()
    assert lc.task(first).state == TaskState.DELIVERED  # 150 tokens: over the day's budget
    second = await lc.open_issue("Second change")
    await lc.work()
    task = lc.task(second)
    assert task.state == TaskState.QUEUED
    scheduled = rq_queue(lc.ctx.queue_name, lc.ctx.redis).scheduled_job_registry
    assert scheduled.get_job_ids() == [task.job_id]
    # Another run of the task starts meanwhile (a second worker's job for it: the
    # reconciler's, a trigger's): held as well, it leaves the waiting re-check as it is.
    queue = LifecycleQueue(lc.ctx.redis, name=lc.ctx.queue_name)
    queue.enqueue(task.id, job=job_id(task.id, task.generation, "again"))
    await lc.work()
    assert lc.task(second).state == TaskState.QUEUED
    assert len(scheduled.get_job_ids()) == 1, scheduled.get_job_ids()
    assert lc.task(second).job_id in scheduled.get_job_ids()
