"""Plan-first runs at their edges (issue 34): a budget of 0 starts no plan run either; a
plan stored by a run that died before asking is never settled by the Decision that run was
answering. Real service, GitHub sandbox, RQ worker, bubblewrap where it runs here."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session

from bot.lifecycle import estimate, plan_store
from bot.lifecycle.models import TaskLease
from bot.lifecycle.plan_flow import PLAN_LABEL
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.git import commit_files
from tests.fakes.lifecycle import DECISION, PICKUP, Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir


async def _plan_first_issue(lc: Lifecycle) -> int:
    issue = await lc.github.create_issue(
        lc.repo, title="Make the widget blue", body="It is red.", labels=[PICKUP, PLAN_LABEL]
    )
    await lc.settle()
    return issue.number


async def test_a_zero_budget_starts_no_plan_run(make: Make, tmp_path: Path) -> None:
    lc = await make(coding_command=command("planner", exchange_dir(tmp_path)))
    commit_files(
        lc.sandbox.sandbox.world.repo(lc.repo).git_path,
        {".steelframe/config.yml": "budget:\n  tokens: 0\n"},
    )
    issue = await _plan_first_issue(lc)
    await lc.work()
    task = lc.task(issue)
    # "A budget of 0 means no coding run": the plan run is one (it spends as any run).
    assert task.state == TaskState.WAITING_FOR_INFO
    assert task.question == "budget reached: spent 0 tokens of 0"
    assert task.tokens_used == 0
    assert lc.ctx.db.call(plan_store.current, task.id, task.generation) is None


async def test_a_plan_its_run_died_before_asking_is_not_settled_by_an_older_decision(
    make: Make, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lc = await make(coding_command=command("planner", exchange_dir(tmp_path)), task_max_tokens=100)
    issue = await _plan_first_issue(lc)
    await lc.work()  # the plan run spends 400 tokens: stopped by the budget, no plan yet
    task = lc.task(issue)
    assert task.question == "budget reached: spent 400 tokens of 100"
    # The budget raised, a Decision resumes the task: its plan run plans again.
    raised = dataclasses.replace(lc.ctx.policy, max_tokens=100_000)
    lc.ctx = dataclasses.replace(lc.ctx, policy=raised)
    await lc.comment_as("maintainer", issue, f"{DECISION}\nBudget raised: go on.", "write")
    assert lc.task(issue).pending_decision == "Budget raised: go on."
    # That run stores its plan, then stalls past its lease before posting it (the lease
    # expired, another holder's now): the question is never asked (the run is fenced out)
    # and the task is run again with the Decision still pending.
    estimated = estimate.for_repo
    stalled: list[bool] = []

    def estimated_then_stalled(session: Session, *args: Any, **kwargs: Any) -> Any:
        if not stalled:
            stalled.append(True)
            past = lc.ctx.clock() - timedelta(seconds=1)
            session.execute(
                update(TaskLease)
                .where(TaskLease.task_id == task.id)
                .values(holder="elsewhere:1:dead", expires_at=past)
            )
        return estimated(session, *args, **kwargs)

    monkeypatch.setattr(estimate, "for_repo", estimated_then_stalled)
    await lc.work()  # the run that stalls, and the run again
    assert stalled
    lost = [e.data for e in lc.events(task.id) if "lost its lease" in str(e.data)]
    assert lost, "the stalled run was not fenced out"
    task = lc.task(issue)
    # The operator never saw a plan: it is asked for, not approved by "Budget raised: go on."
    assert task.state == TaskState.WAITING_FOR_INFO, task.state
    assert "Proposed plan" in (task.question or "")
    plan = lc.ctx.db.call(plan_store.current, task.id, task.generation)
    assert plan is not None and plan.status == plan_store.PlanStatus.PROPOSED
    assert await lc.pulls() == []


async def test_a_rejected_plan_ends_the_task_after_plan_first_was_turned_off(
    make: Make, tmp_path: Path
) -> None:
    lc = await make(coding_command=command("planner", exchange_dir(tmp_path)))
    git_path = lc.sandbox.sandbox.world.repo(lc.repo).git_path
    commit_files(git_path, {".steelframe/config.yml": "plan_first: true\n"})
    issue = await lc.open_issue()
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO and "Proposed plan" in (task.question or "")
    # The repository turns plan-first off while the plan waits; the operator rejects it.
    commit_files(git_path, {".steelframe/config.yml": "plan_first: false\n"})
    await lc.comment_as("maintainer", issue, f"{DECISION}\nReject.", "write")
    await lc.work()
    task = lc.task(issue)
    # The plan it proposed is still settled by the Decision: rejected, nothing written.
    assert task.state == TaskState.TERMINATED, task.state
    assert await lc.pulls() == []
    plan = lc.ctx.db.call(plan_store.current, task.id, task.generation)
    assert plan is not None and plan.status == plan_store.PlanStatus.REJECTED


async def test_a_plan_is_never_answered_by_a_draft_from_past_decisions(
    make: Make, tmp_path: Path
) -> None:
    lc = await make(coding_command=command("planner", exchange_dir(tmp_path)))
    first = await _plan_first_issue(lc)
    await lc.work()
    await lc.comment_as("maintainer", first, f"{DECISION}\nGo ahead.", "write")
    await lc.work()
    assert lc.task(first).state == TaskState.DELIVERED
    second = await _plan_first_issue(lc)
    await lc.work()
    task = lc.task(second)
    assert task.state == TaskState.WAITING_FOR_INFO and "Proposed plan" in (task.question or "")
    detail = await (await lc.api.get(f"/api/operator/tasks/{task.id}")).json()
    # Plans read alike (the same headings): a past approval drafted for this one, published
    # as the GUI puts it in the Publish box, would replace the plan with "Go ahead. (Reusing
    # the Decision ...)" as the operator's edited plan. The Publish box holds the plan, and
    # the first plan's approval, which answered that plan alone, is not offered at all.
    assert detail["offered"] == [] and detail["draft"] is None
    assert detail["plan"]["status"] == "proposed"
