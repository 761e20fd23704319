"""What issue 34 adds to a task's JSON (docs/api.md): its plan, the budget hold a queued
task is under, what it will likely spend, and the past Decisions offered for its question.
Reads only."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.lifecycle import decision_drafts, estimate, plan_store
from bot.lifecycle.models import EventKind, Task, TaskEvent
from bot.lifecycle.states import TaskState

# The actor of the note a budget hold leaves on a task (budget_hold).
HOLD_ACTOR = "budget"


def hold_reason(session: Session, task: Task) -> str | None:
    """The hold a queued task is under, as its last event says."""
    if task.state != TaskState.QUEUED:
        return None
    last = session.scalar(
        select(TaskEvent).where(TaskEvent.task_id == task.id).order_by(TaskEvent.id.desc())
    )
    if last is not None and last.kind == EventKind.NOTE and last.actor == HOLD_ACTOR:
        return last.detail
    return None


def leverage_json(session: Session, task: Task) -> dict[str, Any]:
    plan = plan_store.current(session, task.id, task.generation)
    guess = estimate.for_repo(session, task.repo, excluding=task.id)
    offers = []
    if task.state == TaskState.WAITING_FOR_INFO and task.question:
        offers = decision_drafts.offered(session, task.repo, task.question, task_id=task.id)
    return {
        "plan": plan.as_json() if plan is not None else None,
        "held": hold_reason(session, task),
        "estimate": guess.as_json() if guess is not None else None,
        # Past Decisions that answered a question like the one it waits on, and a draft.
        "offered": [offer.as_json() for offer in offers],
        "draft": decision_drafts.draft(offers),
    }
