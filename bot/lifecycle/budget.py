"""A task's budget (issue 34; docs/lifecycle.md, "Budgets"): tokens and USD as the agent
reports them. The installation's setting (STEELFRAME_TASK_MAX_TOKENS,
STEELFRAME_TASK_MAX_COST_USD) is the default and the repository's `.steelframe/config.yml`
`budget:` overrides it. A run that reaches it is stopped (the coding runtime's hook ends
the sandbox at the usage report that crosses it; nothing is committed or pushed) and the
task waits for a person: "budget reached: spent X of Y". A Decision resumes it with the
budget as it stands then (raised, or the run stops again at its first report).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy.orm import Session

from bot.clock import Clock
from bot.contracts.tasks import BudgetData
from bot.lifecycle import tasks
from bot.lifecycle.finish import finish_move
from bot.lifecycle.models import EventKind
from bot.lifecycle.scope import Run
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move

log = logging.getLogger(__name__)
# The limits a budget stops a run by, named as bot.contracts.coding_protocol.AgentLimit names them.
BUDGET_LIMITS = frozenset({"tokens", "cost"})


@dataclass(frozen=True)
class TaskBudget:
    tokens: int | None = None
    usd: float | None = None
    source: str = "settings"  # or "repository config"

    def exceeded(self, tokens: int, usd: float) -> str | None:
        """The limit `tokens` and `usd` spent so far go over, or None."""
        if self.tokens is not None and tokens > self.tokens:
            return "tokens"
        if self.usd is not None and usd > self.usd:
            return "cost"
        return None

    def exhausted(self) -> str | None:
        """A budget of zero: no coding run at all."""
        if self.tokens == 0:
            return "tokens"
        if self.usd == 0:
            return "cost"
        return None

    def as_json(self) -> BudgetData:
        return {"tokens": self.tokens, "usd": self.usd, "source": self.source}


def for_run(run: Run) -> TaskBudget:
    """The setting, overridden field by field by the repository's config."""
    policy = run.ctx.policy
    config = run.repo_env.config.budget if run.repo_env is not None else None
    if config is not None and (config.tokens is not None or config.usd is not None):
        tokens = config.tokens if config.tokens is not None else policy.max_tokens
        usd = config.usd if config.usd is not None else policy.max_cost_usd
        return TaskBudget(tokens, usd, "repository config")
    return TaskBudget(policy.max_tokens, policy.max_cost_usd)


# Said of a limit the agent stopped at by itself (its own cap, not a budget Steelframe set).
AGENTS_OWN = "the coding agent's own limit"


def sets(budget: TaskBudget, limit: str) -> bool:
    """Whether the budget sets the limit the run stopped at."""
    return (budget.tokens if limit == "tokens" else budget.usd) is not None


def spent_text(budget: TaskBudget, limit: str, tokens: int, usd: float) -> str:
    if limit == "tokens":
        spent = f"{tokens:,} tokens"
        of = f"{budget.tokens:,}" if budget.tokens is not None else None
    else:
        spent = f"{usd:.2f} USD"
        of = f"{budget.usd:.2f}" if budget.usd is not None else None
    # An agent may stop at a cap of its own with no budget set here: never "of 0.00", and
    # never a failure to say it (formatting None failed the run as an internal error).
    return (
        f"budget reached: spent {spent} of {of}"
        if of
        else f"budget reached: spent {spent} ({AGENTS_OWN})"
    )


async def reached(run: Run, limit: str) -> str:
    """The run stopped at its task budget: the task waits for a person, saying so. Its
    database work runs off the run's loop (`Database.run`), which also carries the run's
    termination watch and its GitHub calls."""
    budget = for_run(run)
    said = await run.ctx.db.run(
        _limit_reached, run.task.id, run.fence, run.actor, limit, budget, run.ctx.clock
    )
    where = (
        "the repository's `.steelframe/config.yml` `budget:`"
        if budget.source == "repository config"
        else "STEELFRAME_TASK_MAX_TOKENS / STEELFRAME_TASK_MAX_COST_USD"
    )
    if sets(budget, limit):
        notice = (
            f"Steelframe stopped this task: {said} (set by {where}). Nothing of this run was "
            "pushed. Raise the budget and publish a Decision to go on, or leave the task here."
        )
    else:
        notice = (
            f"The coding agent stopped this task at a limit of its own: {said}. Nothing of "
            "this run was pushed. Publish a Decision to go on, or leave the task here."
        )
    move = Move(
        TaskState.WAITING_FOR_INFO,
        actor=run.actor,
        detail=said,
        data={"question": said, "limit": limit, "budget": budget.as_json()},
        expect=[TaskState.RUNNING],
        changes={"question": said, "pending_decision": None},
        notice=notice,
        note=said[0].upper() + said[1:] + ".",
        fence=run.fence,
    )
    change = await finish_move(run.ctx, run.github, run.task.id, move)  # or terminated as asked
    if isinstance(change, str):
        return change
    log.info("lifecycle: task %s: %s", run.task.id, said)
    return f"waiting_for_info: {said}"


def _limit_reached(
    session: Session,
    task_id: int,
    fence: str,
    actor: str,
    limit: str,
    budget: TaskBudget,
    clock: Clock,
) -> str:
    """What the task spent, said against its budget, and the `limit_exceeded` event saying
    it (only while the run still holds its lease: LeaseLost otherwise)."""
    tasks.hold(session, task_id, fence, clock)
    task = tasks.get_task(session, task_id)
    said = spent_text(budget, limit, task.tokens_used, task.cost_usd)
    tasks.record(
        session,
        task,
        EventKind.LIMIT_EXCEEDED,
        actor=actor,
        detail=said,
        data={"limit": limit},
        clock=clock,
    )
    return said
