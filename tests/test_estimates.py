"""Estimates before running (issue 34): from the repository's finished tasks, the median
and 90th percentile of what they spent, with how many it rests on; shown on a task before
it starts and in a plan-first task's plan; its error measured on a generated history."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.orm import Session

from bench import estimates as bench_estimates
from bot.db import Database
from bot.lifecycle import budget_ledger, estimate, tasks
from bot.lifecycle.estimate_similar import Past
from bot.lifecycle.plan_flow import PLAN_LABEL
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, apply
from tests.fakes.coding import command
from tests.fakes.lifecycle import PICKUP, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir


def test_the_estimate_is_the_median_and_90th_percentile_of_past_spend() -> None:
    guess = estimate.of([100, 200, 300, 400, 10_000], [0.01, 0.02, 0.03, 0.04, 1.0])
    assert guess is not None
    assert (guess.runs, guess.tokens, guess.tokens_p90) == (5, 300, 10_000)
    assert guess.usd == 0.03 and "from 5 past task(s)" in guess.text()
    # An agent that reports no cost: counted by tokens, and the cost said to be unknown.
    unpaid = estimate.of([100, 300], [0.0, 0.0])
    assert unpaid is not None and unpaid.usd is None and "cost unknown" in unpaid.text()
    assert estimate.of([], []) is None


def test_the_median_absolute_error_on_a_generated_history_of_200_runs() -> None:
    # Runs of one repository by two agents on four kinds of issue (bench/estimates.py).
    history = bench_estimates.history(200, seed=34)
    similar = estimate.median_absolute_error(history)
    plain = estimate.median_absolute_error(history, weighted=False)
    typical = sorted(p.tokens for p in history)[100]
    # Off by less than half a typical run: useful, and honest about it; and counting the
    # runs most like each one does better than the plain median of the repository's past.
    assert 0 < similar < typical / 2
    assert similar < plain


def test_similar_runs_count_more_than_unlike_ones() -> None:
    # Small docs fixes by one agent, large features by another: a new small docs fix by
    # the first agent is estimated from the fixes, whatever the features cost.
    fixes = [Past(1_000 + i, 0.01, "claude", f"fix typo in readme {i}") for i in range(6)]
    features = [
        Past(50_000 + i, 2.0, "codex", "new export api endpoint with paging " * 20)
        for i in range(6)
    ]
    guess = estimate.like("claude", "fix a typo in the readme", [*features, *fixes])
    assert guess is not None and guess.runs == 12
    assert 1_000 <= guess.tokens < 1_010 and guess.usd == 0.01
    assert guess.similar is not None and guess.similar < 12
    # Its typical error, measured on the same history, is said on the estimate.
    assert guess.error is not None and "typically within ±" in guess.text()


async def test_a_task_shows_its_estimate_before_it_runs_and_in_its_plan(
    make: Make, tmp_path: Path
) -> None:
    lc = await make(coding_command=command("planner", exchange_dir(tmp_path)))
    first = await lc.open_issue("First change")
    await lc.work()
    assert lc.task(first).state == TaskState.DELIVERED  # spent 1,200 tokens, 0.05 USD
    made = await lc.github.create_issue(
        lc.repo, title="Second change", body="Also blue.", labels=[PICKUP, PLAN_LABEL]
    )
    await lc.settle()
    second = made.number
    task = lc.task(second)
    detail = await (await lc.api.get(f"/api/operator/tasks/{task.id}")).json()
    assert detail["state"] == TaskState.QUEUED
    assert detail["estimate"]["runs"] == 1 and detail["estimate"]["tokens"] == 1200
    await lc.work()
    assert "Estimate: ~1,200 tokens" in (lc.task(second).question or "")


async def test_a_task_estimated_above_the_threshold_asks_for_approval_first(
    make: Make, tmp_path: Path
) -> None:
    lc = await make(
        coding_command=command("planner", exchange_dir(tmp_path)), approve_above_usd=0.02
    )
    first = await lc.open_issue("First change")
    await lc.work()
    assert lc.task(first).state == TaskState.DELIVERED  # 0.05 USD: no history, no approval
    second = await lc.open_issue("Second change")
    await lc.work()
    task = lc.task(second)
    assert task.state == TaskState.WAITING_FOR_INFO  # likely 0.05 USD, over 0.02: a plan
    assert "Proposed plan" in (task.question or "") and "~0.05 USD" in (task.question or "")
    assert len(await lc.pulls()) == 1


def test_a_repositorys_estimate_weighs_its_tasks_by_the_agent_that_ran_them(
    any_db: Database,
) -> None:
    db = any_db  # SQLite and PostgreSQL
    at = datetime(2026, 11, 1, tzinfo=UTC)

    def finished(session: Session, issue: int, agent: str, tokens: int) -> None:
        task = tasks.new_task(
            session,
            repo="o/r",
            issue=issue,
            title="Fix the flaky login test",
            origin_session=None,
            actor="test",
            clock=lambda: at,
        )
        apply(session, task.id, Move(TaskState.RUNNING, actor="test"), lambda: at)
        apply(session, task.id, Move(TaskState.FAILED, actor="test"), lambda: at)
        stored = tasks.get_task(session, task.id)
        stored.tokens_used, stored.cost_usd = tokens, 0.0
        budget_ledger.record(session, "o/r", task.id, tokens, 0.0, lambda: at, agent)

    def history(session: Session) -> None:
        for issue in range(1, 4):
            finished(session, issue, "claude", 1_000)
        for issue in range(4, 7):
            finished(session, issue, "codex", 9_000)

    db.call(history)
    past = db.call(estimate.history, "o/r")
    assert sorted({p.agent for p in past}, key=str) == ["claude", "codex"]
    by_claude = db.call(estimate.for_repo, "o/r", agent="claude")
    by_codex = db.call(estimate.for_repo, "o/r", agent="codex")
    assert by_claude is not None and by_claude.tokens == 1_000 and by_claude.runs == 6
    assert by_codex is not None and by_codex.tokens == 9_000
