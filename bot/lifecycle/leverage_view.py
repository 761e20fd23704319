"""What issue 34 adds to a task's JSON (docs/api.md): its plan, the budget hold a queued
task is under, what it will likely spend, and the past Decisions offered for its question,
as the task JSON's Structs (bot.contracts.tasks). Reads only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.contracts import tasks as wire
from bot.lifecycle import decision_drafts, estimate, plan_store
from bot.lifecycle.budget_ledger import RepoSpend
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


@dataclass(frozen=True)
class Leverage:
    """Issue 34's fields of a task's JSON, as the task JSON's own Structs."""

    plan: wire.TaskPlan | None
    held: str | None
    estimate: wire.TaskEstimate | None
    offered: list[wire.OfferedDecision]  # past Decisions that answered a question like its own
    draft: str | None  # a Decision drafted from them


def run_by(session: Session, task: Task) -> str | None:
    """The agent the task's latest run recorded (budget_ledger), None before it spent: the
    estimate is then made as its run made it (a plan-first task's plan says the same)."""
    query = (
        select(RepoSpend.agent)
        .where(RepoSpend.task_id == task.id)
        .order_by(RepoSpend.id.desc())
        .limit(1)
    )
    return session.scalar(query)


def leverage(session: Session, task: Task) -> Leverage:
    plan = plan_store.current(session, task.id, task.generation)
    agent = run_by(session, task)
    guess = estimate.for_repo(session, task.repo, excluding=task.id, agent=agent)
    offers: list[decision_drafts.Offered] = []
    if task.state == TaskState.WAITING_FOR_INFO and task.question:
        offers = decision_drafts.offered(session, task.repo, task.question, task_id=task.id)
    return Leverage(
        plan=plan_view(plan) if plan is not None else None,
        held=hold_reason(session, task),
        estimate=estimate_view(guess) if guess is not None else None,
        offered=[offer_view(offer) for offer in offers],
        draft=None if _waits_on(plan) else decision_drafts.draft(offers),
    )


def _waits_on(plan: plan_store.Plan | None) -> bool:
    """Whether the task's question is its plan: approved, edited or rejected, never drafted
    from a past Decision (plans read alike, and a drafted "go ahead (Reusing ...)", the
    Publish box's text, published as it stands is no approval: it became the edited plan,
    the plan itself lost). Past Decisions are still offered, to read."""
    return plan is not None and plan.status == plan_store.PlanStatus.PROPOSED


# The wire's words for a plan's status (a Literal there: the schema lists them).
_PLAN_STATUS: dict[
    plan_store.PlanStatus, Literal["proposed", "approved", "rejected", "withdrawn"]
] = {
    plan_store.PlanStatus.PROPOSED: "proposed",
    plan_store.PlanStatus.APPROVED: "approved",
    plan_store.PlanStatus.REJECTED: "rejected",
    plan_store.PlanStatus.WITHDRAWN: "withdrawn",
}


def plan_view(plan: plan_store.Plan) -> wire.TaskPlan:
    return wire.TaskPlan(
        status=_PLAN_STATUS[plan.status],
        text=plan.text,
        brief=plan.brief,
        edited=plan.edited,
        proposed_at=plan.proposed_at.isoformat(),
        decided_at=plan.decided_at.isoformat() if plan.decided_at else None,
    )


def estimate_view(guess: estimate.Estimate) -> wire.TaskEstimate:
    return wire.TaskEstimate(
        runs=guess.runs,
        tokens=guess.tokens,
        tokens_p90=guess.tokens_p90,
        usd=guess.usd,
        usd_p90=guess.usd_p90,
        text=guess.text(),
        similar=guess.similar,
        typical_error=None if guess.error is None else round(guess.error, 3),
    )


def offer_view(offer: decision_drafts.Offered) -> wire.OfferedDecision:
    return wire.OfferedDecision(
        issue=offer.past.issue,
        task_id=offer.past.task_id,
        at=offer.past.at.isoformat(),
        question=offer.past.question,
        decision=offer.past.decision,
        score=round(offer.score, 3),
    )
