"""A run's records for operators: the runtime's private log, redacted, and its usage counted
on the task and the repository's spend ledger."""

from __future__ import annotations

import asyncio

from sqlalchemy.orm import Session

from bot.lifecycle import budget_ledger, tasks
from bot.lifecycle.coding import CodingOutcome
from bot.lifecycle.models import TaskLog
from bot.lifecycle.scope import Run


def keep_log(run: Run, status: str, text: str) -> None:
    """The run's private log, redacted (kept even if the lease was lost: it is a record
    for operators, not a change of the task)."""

    def store(session: Session) -> None:
        session.add(
            TaskLog(
                task_id=run.task.id,
                generation=run.task.generation,
                attempt=run.task.attempts,
                holder=run.holder.id,
                status=str(status)[:20],
                text=run.ctx.redactor.redact(text),
                at=run.ctx.clock(),
            )
        )

    run.ctx.db.call(store)


def account(run: Run, outcome: CodingOutcome) -> None:
    task = run.task
    run.ctx.db.call(
        tasks.touch,
        task.id,
        run.ctx.clock,
        fence=run.fence,
        runtime_seconds=task.runtime_seconds + outcome.seconds,
        tokens_used=task.tokens_used + outcome.tokens,
        cost_usd=task.cost_usd + outcome.cost_usd,
    )
    spend = (task.repo, task.id, outcome.tokens, outcome.cost_usd, run.ctx.clock)
    agent = run.ctx.policy.coding_agent  # for the estimate from similar runs
    run.ctx.db.call(budget_ledger.record, *spend, agent)  # the repository's daily/monthly spend


async def record(run: Run, outcome: CodingOutcome) -> None:
    """The runtime's private log kept and its usage counted (each run of the runtime)."""
    await asyncio.to_thread(keep_log, run, outcome.status, outcome.log.text())
    await asyncio.to_thread(account, run, outcome)
