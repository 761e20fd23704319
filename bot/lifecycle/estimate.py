"""What a task will likely spend, before it runs (issue 34; docs/lifecycle.md, "Budgets"):
from what this installation's finished tasks of the same repository spent (tokens and USD
as their agents reported them), as the median and the 90th percentile, with how many
tasks it rests on. Shown on the task (its JSON) and in a plan-first task's plan."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

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

    def text(self) -> str:
        spend = f"~{self.tokens:,} tokens (90% under {self.tokens_p90:,})"
        if self.usd is not None and self.usd_p90 is not None:
            spend += f", ~{self.usd:.2f} USD (90% under {self.usd_p90:.2f})"
        else:
            spend += ", cost unknown"
        return f"Estimate: {spend}, from {self.runs} past task(s) of this repository."

    def as_json(self) -> dict[str, object]:
        return {
            "runs": self.runs,
            "tokens": self.tokens,
            "tokens_p90": self.tokens_p90,
            "usd": self.usd,
            "usd_p90": self.usd_p90,
            "text": self.text(),
        }


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def of(tokens: list[int], costs: list[float]) -> Estimate | None:
    """The estimate from past tasks' spend; None without any."""
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


def for_repo(session: Session, repo: str, *, excluding: int | None = None) -> Estimate | None:
    """From the repository's finished tasks that spent something (the newest WINDOW)."""
    query = (
        select(Task.tokens_used, Task.cost_usd)
        .where(Task.repo == repo, Task.state.in_(list(FINISHED)), Task.tokens_used > 0)
        .order_by(Task.updated_at.desc())
        .limit(WINDOW)
    )
    if excluding is not None:
        query = query.where(Task.id != excluding)
    rows = session.execute(query).all()
    return of([int(r[0]) for r in rows], [float(r[1]) for r in rows])


def median_absolute_error(history: list[tuple[int, float]]) -> float:
    """How far the estimate (the median of the tasks before) was from each task's actual
    tokens, over a history oldest first: the median of those errors (bench/README.md)."""
    errors = []
    for index in range(1, len(history)):
        before = [t for t, _ in history[max(0, index - WINDOW) : index]]
        guess = of(before, [])
        if guess is not None:
            errors.append(abs(history[index][0] - guess.tokens))
    return float(statistics.median(errors)) if errors else 0.0
