"""A plan-first task's plan (docs/lifecycle.md, "Plan-first runs"): one row per task and
generation, written when the read-only plan run ends and settled by the Decision that
answers it (approved as written, approved as the operator edited it, or rejected); and how
each generation started (plan-first or coding), recorded once by its first run.

The rows are the one place a plan's state changes; `plan_flow` decides, this stores."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from sqlalchemy import BigInteger, ForeignKey, String, Text, UniqueConstraint, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from bot.clock import Clock
from bot.db import Base
from bot.lifecycle import tasks
from bot.lifecycle.models import Task
from bot.lifecycle.states import FINISHED, TaskState


class PlanStatus(StrEnum):
    PROPOSED = "proposed"  # posted as the task's question, waiting for a Decision
    APPROVED = "approved"  # "go ahead", or an edited plan: `brief` is what the run follows
    REJECTED = "rejected"  # the task ended
    # Never stored: a plan still proposed when its task ended without a Decision
    # (terminated, its issue closed) reads so; no Decision can settle it any more.
    WITHDRAWN = "withdrawn"


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


class TaskStart(Base):
    """How a task's generation started: plan-first or coding, decided once by its first run
    that reached the coding step and kept for every later run of the generation (a retry, a
    continuation after a Decision), whatever the config, the label or the estimate say by
    then. A new generation (the task picked up again) decides again."""

    __tablename__ = "task_starts"

    task_id: Mapped[int] = mapped_column(
        ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True
    )
    generation: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    plan_first: Mapped[bool]
    # Why it is plan-first ("label", "config", "setting", "estimate"); "" for coding.
    reason: Mapped[str] = mapped_column(String(20), default="")
    started_at: Mapped[datetime]


@dataclass(frozen=True)
class Start:
    """How a generation started, as the rest of the code sees it."""

    plan_first: bool
    reason: str
    started_at: datetime


def started(session: Session, task_id: int, generation: int) -> Start | None:
    """How the generation started; None: no run of it has decided yet."""
    row = session.get(TaskStart, (task_id, generation))
    return Start(row.plan_first, row.reason, row.started_at) if row is not None else None


def start(
    session: Session, task_id: int, generation: int, *, reason: str | None, clock: Clock
) -> Start:
    """Record how the generation starts (`reason` None: coding), unless it was recorded
    already: the first record stands and is returned."""
    known = started(session, task_id, generation)
    if known is not None:
        return known
    row = TaskStart(
        task_id=task_id,
        generation=generation,
        plan_first=reason is not None,
        reason=reason or "",
        started_at=clock(),
    )
    session.add(row)
    session.flush()
    return Start(row.plan_first, row.reason, row.started_at)


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
    """The generation's plan as it stands: a proposed plan of a task that ended without a
    Decision (terminated, its issue closed; a new generation has a plan of its own) reads
    as withdrawn."""
    row = _row(session, task_id, generation)
    if row is None:
        return None
    plan = _plan(row)
    if plan.status == PlanStatus.PROPOSED and _ended(session, task_id, generation):
        return replace(plan, status=PlanStatus.WITHDRAWN)
    return plan


def waits_on_plan(session: Session, task_id: int) -> bool:
    """Whether the task waits for a Decision on its proposed plan."""
    task = session.get(Task, task_id)
    if task is None or task.state != TaskState.WAITING_FOR_INFO:
        return False
    plan = current(session, task_id, task.generation)
    return plan is not None and plan.status == PlanStatus.PROPOSED


def _ended(session: Session, task_id: int, generation: int) -> bool:
    task = session.get(Task, task_id)
    return task is not None and (task.generation != generation or task.state in FINISHED)


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
    fence: str,
    clock: Clock,
) -> Plan | None:
    """Settle a proposed plan by the Decision `comment_id`, in the run holding lease `fence`
    (LeaseLost otherwise); a plan settled already stays as it is (the same Decision read
    twice decides once). None when there is no plan."""
    tasks.hold(session, task_id, fence, clock)
    row = _row(session, task_id, generation)
    if row is None:
        return None
    if row.status == PlanStatus.PROPOSED:
        row.status, row.decision_comment_id, row.decided_at = status, comment_id, clock()
        row.brief = brief
        row.edited = status == PlanStatus.APPROVED and brief != row.text
    return _plan(row)
