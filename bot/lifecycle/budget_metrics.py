"""Scrape-time spend figures (issue 34): what each repository's tasks spent this UTC day
and month, in tokens and USD as the agents reported them (`budget_ledger`), and how many
queued tasks a repository budget holds. Read from the database, so every instance
reports the same."""

from __future__ import annotations

from datetime import datetime

from prometheus_client import Gauge
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.db import Database
from bot.lifecycle.budget_ledger import RepoSpend
from bot.lifecycle.leverage_view import HOLD_ACTOR
from bot.lifecycle.models import EventKind, Task, TaskEvent
from bot.lifecycle.states import TaskState
from bot.metrics import Collector, Metrics

Spend = dict[tuple[str, str], tuple[float, float]]


def _spend(session: Session, now: datetime) -> Spend:
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    found: Spend = {}
    for period, since in (("day", day), ("month", day.replace(day=1))):
        rows = session.execute(
            select(RepoSpend.repo, func.sum(RepoSpend.tokens), func.sum(RepoSpend.cost_usd))
            .where(RepoSpend.at >= since)
            .group_by(RepoSpend.repo)
        )
        for repo, tokens, usd in rows:
            found[(str(repo), period)] = (float(tokens or 0), float(usd or 0))
    return found


def _held(session: Session) -> int:
    """Queued tasks whose last event is a budget hold."""
    last = (
        select(TaskEvent.task_id, func.max(TaskEvent.id).label("event_id"))
        .join(Task, Task.id == TaskEvent.task_id)
        .where(Task.state == TaskState.QUEUED)
        .group_by(TaskEvent.task_id)
        .subquery()
    )
    query = (
        select(func.count())
        .select_from(TaskEvent)
        .join(last, TaskEvent.id == last.c.event_id)
        .where(TaskEvent.kind == EventKind.NOTE, TaskEvent.actor == HOLD_ACTOR)
    )
    return int(session.scalar(query) or 0)


def budget_collector(metrics: Metrics, db: Database, clock: Clock = utcnow) -> Collector:
    registry = metrics.registry
    tokens = Gauge(
        "steelframe_repo_spend_tokens",
        "Tokens a repository's tasks reported this UTC day or month",
        ["repo", "period"],
        registry=registry,
    )
    usd = Gauge(
        "steelframe_repo_spend_usd",
        "USD a repository's tasks reported this UTC day or month",
        ["repo", "period"],
        registry=registry,
    )
    held = Gauge(
        "steelframe_tasks_held_by_budget",
        "Queued tasks waiting because their repository is over its daily or monthly budget",
        registry=registry,
    )

    async def budgets(metrics: Metrics) -> None:
        found = await db.run(_spend, clock())
        tokens.clear()  # a period that turned has no spend yet: absent, then back
        usd.clear()
        for (repo, period), (spent_tokens, spent_usd) in found.items():
            tokens.labels(repo, period).set(spent_tokens)
            usd.labels(repo, period).set(spent_usd)
        held.set(await db.run(_held))

    return budgets
