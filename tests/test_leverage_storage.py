"""Issue 34's records on SQLite and PostgreSQL: a plan settles once (a Decision read twice
decides once), and a repository's spend is summed per UTC day and month, its hold lifting
when the period turns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from bot.config import Settings
from bot.db import Database
from bot.lifecycle import budget_ledger, leases, plan_store, tasks
from bot.lifecycle.leases import Holder
from bot.lifecycle.plan_store import PlanStatus

NOON = datetime(2026, 12, 31, 12, 0, tzinfo=UTC)


def _task(session: Session) -> int:
    task = tasks.new_task(
        session, repo="o/r", issue=1, title="t", origin_session=None, actor="test"
    )
    return task.id


def test_a_plan_is_settled_once(any_db: Database) -> None:
    task_id = any_db.call(_task)
    any_db.call(plan_store.propose, task_id, 1, "Files to change: a.py", lambda: NOON)
    run = Holder.this_process()  # the run settling it holds the task
    assert leases.acquire(any_db, task_id, run, ttl=3 * 3600, clock=lambda: NOON)
    first = any_db.call(
        plan_store.settle,
        task_id,
        1,
        status=PlanStatus.APPROVED,
        brief="Edited plan",
        comment_id=10,
        fence=run.id,
        clock=lambda: NOON,
    )
    again = any_db.call(
        plan_store.settle,
        task_id,
        1,
        status=PlanStatus.REJECTED,
        brief=None,
        comment_id=10,
        fence=run.id,
        clock=lambda: NOON + timedelta(hours=1),
    )
    assert first is not None and again == first
    assert first.status == PlanStatus.APPROVED and first.edited and first.decided_at == NOON
    assert any_db.call(plan_store.current, task_id, 2) is None  # another generation: none


def test_spend_is_summed_per_day_and_month_and_the_hold_lifts_when_the_period_turns(
    any_db: Database,
) -> None:
    task_id = any_db.call(_task)
    for at, tokens in ((NOON - timedelta(days=1), 500), (NOON, 100), (NOON, 60)):
        any_db.call(budget_ledger.record, "o/r", task_id, tokens, 0.01, lambda at=at: at)
    any_db.call(budget_ledger.record, "o/r", task_id, 0, 0.0, lambda: NOON)  # nothing: no row
    settings = Settings(repo_daily_max_tokens=150, repo_monthly_max_tokens=1000)
    held = any_db.call(budget_ledger.hold, settings, "o/r", NOON)
    assert held is not None and held.until == datetime(2027, 1, 1, tzinfo=UTC)
    assert "daily budget (spent 160 tokens of 150)" in held.reason
    assert any_db.call(budget_ledger.hold, settings, "o/r", held.until) is None  # a new day
    assert any_db.call(budget_ledger.hold, settings, "other/r", NOON) is None
    monthly = Settings(repo_monthly_max_tokens=600)
    over = any_db.call(budget_ledger.hold, monthly, "o/r", NOON)
    assert over is not None and "monthly budget (spent 660 tokens of 600)" in over.reason
    days = any_db.call(budget_ledger.daily, NOON - timedelta(days=2))
    assert [(d.day, d.tokens) for d in days] == [("2026-12-30", 500), ("2026-12-31", 160)]
