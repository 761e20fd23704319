"""A Decision on a task that failing CI stopped (the fix runs spent, a fix run that changed
nothing, a failure that is not the change's): one more fix run on the same head commit,
with the Decision pinned into its prompt as the operator's guidance (docs/lifecycle.md,
"Failing CI").

The stop's row (`ci_fixes`, one per head commit) becomes that fix run, in the resume's own
transaction: verdict `decision`, state queued, the next run number of its chain, the
resume's job. The resumed run then finds it as it finds any queued fix (`ci_run.pending`),
and `ci_run.fix` wraps the Decision (`ci_prompt.fix_prompt`). A failure on the commit that
run pushes continues the chain, already past the bound, so a person is asked again: each
Decision buys one fix run. A fix run that waits for a person (it asked a question, hit a
budget) is no stop: its row stays queued, so the Decision's run finds it the same way and
continues that fix run (the same run number and evidence, the Decision as guidance:
`ci_run.FIX_GOES_ON`). Any other wait (an issue run's question, a plan) is not CI's, and
its Decision resumes the task as before.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.clock import Clock
from bot.lifecycle import ci_store, tasks
from bot.lifecycle.ci_intake import needs_human_question
from bot.lifecycle.ci_models import CiFix, CiFixState, CiVerdict, failing_checks, fix_event_data
from bot.lifecycle.ci_view import bounds
from bot.lifecycle.models import EventKind, Task


def waited_on(session: Session, task: Task) -> CiFix | None:
    """The CI stop the task waits on: its generation's newest stopped row, when the task's
    question is that stop's (a later question of another kind is not answered by a fix)."""
    row = session.scalar(
        select(CiFix)
        .where(
            CiFix.task_id == task.id,
            CiFix.generation == task.generation,
            CiFix.state.in_(ci_store.STOPS),
        )
        .order_by(CiFix.id.desc())
        .limit(1)
    )
    if row is None or task.question != needs_human_question(row.pr_number, row.reason):
        return None
    return row


def one_more_fix_run(
    session: Session, task_id: int, *, job: str, author: str, clock: Clock
) -> CiFix | None:
    """Turn the stop the task waits on into a queued fix run for `job` (the resume's),
    recorded as a `ci_fix_run` event; None (nothing changed) when it waits on no CI stop.
    Called inside the resume's transaction, after its move."""
    task = tasks.get_task(session, task_id)
    row = waited_on(session, task)
    if row is None:
        return None
    runs = ci_store.tried(session, task.id, row.chain_sha)
    row.run_number = max((run.number for run in runs), default=0) + 1
    row.verdict = CiVerdict.DECISION
    row.state = CiFixState.QUEUED
    row.job_id = job
    row.reason = f"a Decision from {author} asked for one more fix run"
    row.updated_at = clock()
    data = fix_event_data(
        row.head_sha,
        row.pr_number,
        failing_checks(row.failing),
        run=row.run_number,
        fix_runs=bounds(session, task.id).get(row.head_sha, 0),
    )
    data["decision"] = True
    note = f"Fix run {row.run_number} for failing CI, asked for by a Decision from {author}."
    tasks.record(
        session, task, EventKind.CI_FIX_RUN, actor=author, detail=note, data=data, clock=clock
    )
    return row
