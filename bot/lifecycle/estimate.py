"""What a task will likely spend, before it runs (issue 34; docs/lifecycle.md, "Budgets"):
from what this installation's finished tasks of the same repository spent (tokens and USD
as their agents reported them), each counted by how like the task it is (same agent,
similar issue text and size: estimate_similar), as the weighted median and 90th
percentile, with how many tasks it rests on and how far off it typically was on the
repository's own past. Shown on the task (its JSON) and in a plan-first task's plan."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bot.lifecycle import estimate_similar
from bot.lifecycle.budget_ledger import RepoSpend
from bot.lifecycle.estimate_similar import Past
from bot.lifecycle.models import Task
from bot.lifecycle.states import FINISHED

# The most recent tasks an estimate looks at.
WINDOW = 200


@dataclass(frozen=True)
class Estimate:
    runs: int
    tokens: int
    tokens_p90: int
    usd: float | None  # None: no past task reported a cost
    usd_p90: float | None
    similar: int | None = None  # how many runs the likeness weights amount to
    error: float | None = None  # typical relative error on the repository's past (0.25)

    def text(self) -> str:
        spend = f"~{self.tokens:,} tokens (90% under {self.tokens_p90:,})"
        if self.usd is not None and self.usd_p90 is not None:
            spend += f", ~{self.usd:.2f} USD (90% under {self.usd_p90:.2f})"
        else:
            spend += ", cost unknown"
        said = f"Estimate: {spend}, from {self.runs} past task(s) of this repository"
        if self.similar is not None and self.similar < self.runs:
            said += f", mostly the {self.similar} most like it (agent, issue text and size)"
        if self.error is not None:
            said += f"; typically within ±{self.error:.0%}"
        return said + "."


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def of(tokens: list[int], costs: list[float]) -> Estimate | None:
    """The estimate from past tasks' spend, all counted alike; None without any."""
    if not tokens:
        return None
    paid = [c for c in costs if c > 0]
    return Estimate(
        runs=len(tokens),
        tokens=int(statistics.median(tokens)),
        tokens_p90=int(_p90([float(t) for t in tokens])),
        usd=round(statistics.median(paid), 4) if paid else None,
        usd_p90=round(_p90(paid), 4) if paid else None,
    )


def like(agent: str | None, text: str, history: Sequence[Past]) -> Estimate | None:
    """The estimate for a task of `agent` with issue text `text` from `history` (oldest
    first), weighted by likeness, with its typical error on that history."""
    weighted = estimate_similar.estimate(agent, text, history)
    if weighted is None:
        return None
    return Estimate(
        runs=len(history),
        tokens=weighted.tokens,
        tokens_p90=weighted.tokens_p90,
        usd=weighted.usd,
        usd_p90=weighted.usd_p90,
        similar=weighted.similar,
        error=estimate_similar.typical_error(history),
    )


def issue_text(task: Task) -> str:
    return f"{task.issue_title or task.title}\n\n{task.issue_body or ''}".strip()


def history(session: Session, repo: str, *, excluding: int | None = None) -> list[Past]:
    """The repository's finished tasks that spent something (the newest WINDOW), oldest
    first, each with the agent its runs recorded."""
    agents = (
        select(RepoSpend.task_id, func.max(RepoSpend.agent).label("agent"))
        .group_by(RepoSpend.task_id)
        .subquery()
    )
    query = (
        select(Task, agents.c.agent)
        .outerjoin(agents, agents.c.task_id == Task.id)
        .where(Task.repo == repo, Task.state.in_(list(FINISHED)), Task.tokens_used > 0)
        .order_by(Task.updated_at.desc())
        .limit(WINDOW)
    )
    if excluding is not None:
        query = query.where(Task.id != excluding)
    rows = session.execute(query).all()
    return [
        Past(int(task.tokens_used), float(task.cost_usd), agent, issue_text(task))
        for task, agent in reversed(rows)
    ]


def for_repo(
    session: Session, repo: str, *, excluding: int | None = None, agent: str | None = None
) -> Estimate | None:
    """For the task `excluding` (its issue text; or any task of `repo` without one) run by
    `agent` (None: any agent counts alike)."""
    task = session.get(Task, excluding) if excluding is not None else None
    text = issue_text(task) if task is not None else ""
    return like(agent, text, history(session, repo, excluding=excluding))


def median_absolute_error(history: Sequence[Past], *, weighted: bool = True) -> float:
    """How far the estimate (from the tasks before, the newest WINDOW) was from each task's
    actual tokens, over a history oldest first: the median of those errors, in tokens
    (bench/estimates.py). `weighted=False`: the plain median of the repository's past."""
    errors = []
    for index in range(1, len(history)):
        before = history[max(0, index - WINDOW) : index]
        actual = history[index]
        if weighted:
            found = estimate_similar.estimate(actual.agent, actual.text, before)
            guess = found.tokens if found is not None else None
        else:
            plain = of([p.tokens for p in before], [])
            guess = plain.tokens if plain is not None else None
        if guess is not None:
            errors.append(abs(actual.tokens - guess))
    return float(statistics.median(errors)) if errors else 0.0
