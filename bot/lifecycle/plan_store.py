"""A plan-first task's plan (docs/lifecycle.md, "Plan-first runs"): one row per task and
generation, written when the read-only plan run ends and settled by the Decision that
answers it (approved as written, approved as the operator edited it, or rejected).

The row is the one place a plan's state changes; `plan_flow` decides, this stores."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from sqlalchemy import BigInteger, ForeignKey, String, Text, UniqueConstraint, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from bot.clock import Clock
from bot.db import Base


class PlanStatus(StrEnum):
    PROPOSED = "proposed"  # posted as the task's question, waiting for a Decision
    APPROVED = "approved"  # "go ahead", or an edited plan: `brief` is what the run follows
    REJECTED = "rejected"  # the task ended


class TaskPlan(Base):
    __tablename__ = "task_plans"
    __table_args__ = (UniqueConstraint("task_id", "generation", name="uq_task_plans_task_gen"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    generation: Mapped[int]
    status: Mapped[str] = mapped_column(String(20))
    # The plan as the agent wrote it, made public (redacted, defanged) before it is stored.
    text: Mapped[str] = mapped_column(Text)
    # What the coding run follows once approved: the plan, or the operator's edited plan.
    brief: Mapped[str | None] = mapped_column(Text)
    edited: Mapped[bool] = mapped_column(default=False)
    # Settled: the Decision that settled it. Proposed: the Decision its plan run was resumed
    # by (None: none), which therefore cannot be an answer to it.
    decision_comment_id: Mapped[int | None] = mapped_column(BigInteger)
    proposed_at: Mapped[datetime]
    decided_at: Mapped[datetime | None]


@dataclass(frozen=True)
class Plan:
    """A task's plan as the rest of the code sees it."""

    status: PlanStatus
    text: str
    brief: str | None
    edited: bool
    proposed_at: datetime
    decided_at: datetime | None
    decision_comment_id: int | None = None  # as the row's column says


def _row(session: Session, task_id: int, generation: int) -> TaskPlan | None:
    query = select(TaskPlan).where(TaskPlan.task_id == task_id, TaskPlan.generation == generation)
    return session.execute(query).scalar_one_or_none()


def _plan(row: TaskPlan) -> Plan:
    return Plan(
        PlanStatus(row.status),
        row.text,
        row.brief,
        row.edited,
        row.proposed_at,
        row.decided_at,
        row.decision_comment_id,
    )


def current(session: Session, task_id: int, generation: int) -> Plan | None:
    row = _row(session, task_id, generation)
    return _plan(row) if row is not None else None


def propose(
    session: Session,
    task_id: int,
    generation: int,
    text: str,
    clock: Clock,
    *,
    after: int | None = None,
) -> None:
    """The plan run's plan (a new plan run of the same generation replaces a proposed one);
    `after`: the Decision comment the plan run was resumed by, never an answer to it."""
    row = _row(session, task_id, generation)
    if row is None:
        row = TaskPlan(task_id=task_id, generation=generation)
        session.add(row)
    row.status, row.text, row.brief, row.edited = PlanStatus.PROPOSED, text, None, False
    row.decision_comment_id, row.proposed_at, row.decided_at = after, clock(), None


def settle(
    session: Session,
    task_id: int,
    generation: int,
    *,
    status: PlanStatus,
    brief: str | None,
    comment_id: int | None,
    clock: Clock,
) -> Plan | None:
    """Settle a proposed plan by the Decision `comment_id`; a plan settled already stays
    as it is (the same Decision read twice decides once). None when there is no plan."""
    row = _row(session, task_id, generation)
    if row is None:
        return None
    if row.status == PlanStatus.PROPOSED:
        row.status, row.decision_comment_id, row.decided_at = status, comment_id, clock()
        row.brief = brief
        row.edited = status == PlanStatus.APPROVED and brief != row.text
    return _plan(row)
