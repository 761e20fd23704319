"""A repository's spend, run by run, and the hold its daily and monthly budgets put on new
runs (issue 34; docs/lifecycle.md, "Budgets").

Every run adds what it spent (tokens and USD as its agent reported them) with the time;
a queued task of a repository whose spend this UTC day (or month) has reached
STEELFRAME_REPO_DAILY_MAX_* (or _MONTHLY_MAX_*) does not start: it stays queued with the
reason on the task, and its run looks again every ten minutes (budget_hold) until the next
day (or month) or a budget raised in the settings (from the workers' next start)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Float, ForeignKey, Index, String, func, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from bot.clock import Clock
from bot.config import Settings
from bot.db import Base

log = logging.getLogger(__name__)


class RepoSpend(Base):
    __tablename__ = "repo_spend"
    __table_args__ = (Index("ix_repo_spend_repo_at", "repo", "at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    repo: Mapped[str] = mapped_column(String(200))
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"))
    at: Mapped[datetime]
    tokens: Mapped[int]
    cost_usd: Mapped[float] = mapped_column(Float)
    # The coding agent that ran (for the estimate from similar runs); None before 0024.
    agent: Mapped[str | None] = mapped_column(String(40))


@dataclass(frozen=True)
class Spent:
    tokens: int
    usd: float


@dataclass(frozen=True)
class Hold:
    """Why a repository's new runs wait, and until when."""

    reason: str
    until: datetime


def record(
    session: Session,
    repo: str,
    task_id: int,
    tokens: int,
    usd: float,
    clock: Clock,
    agent: str | None = None,
) -> None:
    if tokens or usd:
        spend = RepoSpend(
            repo=repo, task_id=task_id, at=clock(), tokens=tokens, cost_usd=usd, agent=agent
        )
        session.add(spend)


def spent(session: Session, repo: str, since: datetime) -> Spent:
    tokens = func.coalesce(func.sum(RepoSpend.tokens), 0)
    usd = func.coalesce(func.sum(RepoSpend.cost_usd), 0.0)
    query = select(tokens, usd).where(RepoSpend.repo == repo, RepoSpend.at >= since)
    row = session.execute(query).one()
    return Spent(int(row[0]), float(row[1]))


def _periods(now: datetime) -> list[tuple[str, datetime, datetime]]:
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    month = day.replace(day=1)
    next_month = (month + timedelta(days=32)).replace(day=1)
    return [("daily", day, day + timedelta(days=1)), ("monthly", month, next_month)]


def hold(session: Session, settings: Settings, repo: str, now: datetime) -> Hold | None:
    """The hold on `repo`'s new runs at `now`, or None (no budget, or under it). Over both
    budgets, the monthly one holds: the day's turn would not start the task."""
    limits = {
        "daily": (settings.repo_daily_max_tokens, settings.repo_daily_max_cost_usd),
        "monthly": (settings.repo_monthly_max_tokens, settings.repo_monthly_max_cost_usd),
    }
    for period, start, end in reversed(_periods(now)):
        max_tokens, max_usd = limits[period]
        if max_tokens is None and max_usd is None:
            continue
        so_far = spent(session, repo, start)
        if max_tokens is not None and so_far.tokens >= max_tokens:
            said, zero = f"spent {so_far.tokens:,} tokens of {max_tokens:,}", max_tokens == 0
        elif max_usd is not None and so_far.usd >= max_usd:
            said, zero = f"spent {so_far.usd:.2f} USD of {max_usd:.2f}", max_usd == 0
        else:
            continue
        if zero:  # a budget of 0 holds every period alike: the turn of one starts nothing
            then = "it runs once the budget is raised"
        else:
            then = f"runs again from {end:%Y-%m-%d %H:%M} UTC, or once the budget is raised"
        return Hold(f"held: {repo} is over its {period} budget ({said}); {then}", end)
    return None


@dataclass(frozen=True)
class DaySpend:
    repo: str
    day: str  # YYYY-MM-DD, UTC
    tokens: int
    usd: float

    def as_json(self) -> dict[str, object]:
        return {"repo": self.repo, "day": self.day, "tokens": self.tokens, "usd": self.usd}


def daily(session: Session, since: datetime) -> list[DaySpend]:
    """Each repository's spend per UTC day since `since`, by repository then day."""
    rows = session.execute(
        select(RepoSpend.repo, RepoSpend.at, RepoSpend.tokens, RepoSpend.cost_usd).where(
            RepoSpend.at >= since
        )
    )
    totals: dict[tuple[str, str], tuple[int, float]] = {}
    for repo, at, tokens, usd in rows:
        key = (str(repo), f"{at:%Y-%m-%d}")
        known = totals.get(key, (0, 0.0))
        totals[key] = (known[0] + int(tokens), known[1] + float(usd))
    return [
        DaySpend(repo, day, tokens, round(usd, 6))
        for (repo, day), (tokens, usd) in sorted(totals.items())
    ]
