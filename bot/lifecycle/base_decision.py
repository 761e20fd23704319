"""A Decision on a task whose pull request's conflict with its base Steelframe stopped on
(the update runs spent, an update run that could not conclude the merge): one more update
run of the same (base, head) pair, with the Decision pinned into its prompt as the
operator's guidance (docs/lifecycle.md, "Conflicts with the base"), as `ci_decision` does
for failing CI.

The stop's row (`base_updates`, one per pair) becomes that update run, in the resume's own
transaction: verdict `decision`, state queued, the next run number of its chain, the
resume's job. The resumed run then finds it as it finds any queued update
(`base_run.pending`), and `base_run.update` wraps the Decision (`base_prompt`). A conflict
on the merge commit that run pushes continues the chain, already past the bound, so a
person is asked again: each Decision buys one update run. An update run that waits for a
person (its agent asked a question, it hit a budget) is no stop: its row stays queued, so
the Decision's run finds it the same way and continues that update run
(`base_run.UPDATE_GOES_ON`). Any other wait is not the update's, and its Decision resumes
the task as before.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bot.clock import Clock
from bot.contracts.tasks import EventData
from bot.lifecycle import base_store, tasks
from bot.lifecycle.base_comment import shown_ref
from bot.lifecycle.base_intake import needs_human_question
from bot.lifecycle.base_models import BaseUpdate, UpdateState, UpdateVerdict
from bot.lifecycle.models import EventKind, Task


def waited_on(session: Session, task: Task) -> BaseUpdate | None:
    """The update stop the task waits on: its generation's newest row, when that row is a
    stop and the task's question is that stop's (a later question of another kind is not
    answered by an update run)."""
    row = session.scalar(
        select(BaseUpdate)
        .where(BaseUpdate.task_id == task.id, BaseUpdate.generation == task.generation)
        .order_by(BaseUpdate.id.desc())
        .limit(1)
    )
    if row is None or row.state not in base_store.STOPS:
        return None
    asked = needs_human_question(row.pr_number, shown_ref(row.base_ref), row.reason)
    return row if task.question == asked else None


def one_more_update_run(
    session: Session, task_id: int, *, job: str, author: str, clock: Clock
) -> BaseUpdate | None:
    """Turn the stop the task waits on into a queued update run for `job` (the resume's),
    recorded as a note on the task; None (nothing changed) when it waits on no update stop.
    Called inside the resume's transaction, after its move."""
    task = tasks.get_task(session, task_id)
    row = waited_on(session, task)
    if row is None:
        return None
    used = session.scalar(
        select(func.max(BaseUpdate.run_number)).where(
            BaseUpdate.task_id == task.id, BaseUpdate.chain_sha == row.chain_sha
        )
    )
    row.run_number = (used or 0) + 1
    row.verdict = UpdateVerdict.DECISION
    row.state = UpdateState.QUEUED
    row.job_id = job
    row.reason = f"a Decision from {author} asked for one more update run"
    row.comment_id = None  # a stop of this run is its own, and edits the pair's comment
    row.updated_at = clock()
    data: EventData = {"pr_number": row.pr_number, "head_sha": row.head_sha, "decision": True}
    note = (
        f"Update run {row.run_number} merges `{shown_ref(row.base_ref)}` into the branch, "
        f"asked for by a Decision from {author}."
    )
    tasks.record(session, task, EventKind.NOTE, actor=author, detail=note, data=data, clock=clock)
    return row
