"""The database side of a pull request that conflicts with its moved base: the tasks such a
move may concern, the rows of `base_updates`, and the one transaction that claims a (base,
head) pair and moves the task (an update run, or a person asked)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from bot.clock import Clock
from bot.contracts.tasks import EventData
from bot.lifecycle import tasks
from bot.lifecycle.base_models import PENDING_STATES, BaseUpdate, UpdateState, UpdateVerdict
from bot.lifecycle.models import Task
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, Transitioned, apply

ACTOR = "base-update"
# Where the update of a (base, head) pair stopped: a person is asked, with one comment.
STOPS = frozenset({UpdateState.STOPPED, UpdateState.UNRESOLVED})


@dataclass(frozen=True)
class Claim:
    """What a conflict at (`base_sha`, `head_sha`) decided, written in one transaction."""

    task_id: int
    generation: int
    pr_number: int
    base_ref: str
    base_sha: str
    head_sha: str
    chain_sha: str
    run_number: int  # 0: no update run
    verdict: UpdateVerdict
    reason: str
    job_id: str | None
    note: str  # the progress comment's line


def delivered_with_pulls(session: Session, repo: str | None = None) -> list[Task]:
    """The delivered tasks (of `repo`, or every repository) with a pull request: the only
    ones whose pull request a moved base can leave conflicting and an update run may take."""
    query = select(Task).where(
        Task.state == TaskState.DELIVERED,
        Task.archived.is_(False),
        Task.pr_number.is_not(None),
    )
    if repo is not None:
        query = query.where(Task.repo == repo)
    return list(session.scalars(query.order_by(Task.id)))


def row_at(session: Session, task_id: int, base_sha: str, head_sha: str) -> BaseUpdate | None:
    return session.scalar(
        select(BaseUpdate).where(
            BaseUpdate.task_id == task_id,
            BaseUpdate.base_sha == base_sha,
            BaseUpdate.head_sha == head_sha,
        )
    )


def made_by_update(session: Session, task_id: int, sha: str) -> BaseUpdate | None:
    """The update run whose push made commit `sha`, if one did."""
    return session.scalar(
        select(BaseUpdate).where(BaseUpdate.task_id == task_id, BaseUpdate.result_sha == sha)
    )


def commented(session: Session, row_id: int, comment_id: int) -> None:
    row = session.get(BaseUpdate, row_id)
    if row is not None:
        row.comment_id = comment_id


def uncommented_stops(
    session: Session, limit: int, before: datetime
) -> list[tuple[str, BaseUpdate]]:
    """(repository, row) of the stops written before `before` whose comment GitHub has not
    taken yet, each the latest row of a task still waiting for a person (a younger stop's
    comment is on its way from the process that wrote it: not posted twice)."""
    latest = (
        select(BaseUpdate.task_id, func.max(BaseUpdate.id).label("id"))
        .group_by(BaseUpdate.task_id)
        .subquery()
    )
    found = session.execute(
        select(Task.repo, BaseUpdate)
        .join(latest, latest.c.id == BaseUpdate.id)
        .join(Task, Task.id == BaseUpdate.task_id)
        .where(
            BaseUpdate.state.in_(STOPS),
            BaseUpdate.comment_id.is_(None),
            BaseUpdate.updated_at < before,
            BaseUpdate.generation == Task.generation,
            Task.state == TaskState.WAITING_FOR_INFO,
        )
        .order_by(BaseUpdate.id)
        .limit(limit)
    )
    return [(str(repo), row) for repo, row in found]


def pending_update(session: Session, task_id: int, generation: int) -> BaseUpdate | None:
    """The update run a task's next run is (enqueued and not yet concluded), if any."""
    return session.scalar(
        select(BaseUpdate)
        .where(
            BaseUpdate.task_id == task_id,
            BaseUpdate.generation == generation,
            BaseUpdate.state.in_(PENDING_STATES),
        )
        .order_by(BaseUpdate.id.desc())
        .limit(1)
    )


def conclude(
    session: Session,
    /,
    update_id: int,
    state: UpdateState,
    clock: Clock,
    *,
    fence: str,
    **changes: object,
) -> None:
    """The update run's end, written by the run holding lease `fence` (LeaseLost otherwise)."""
    row = session.get(BaseUpdate, update_id)
    if row is None:
        return
    tasks.hold(session, row.task_id, fence, clock)
    if row.state in PENDING_STATES:
        row.state = state
        for key, value in changes.items():
            setattr(row, key, value)
        row.updated_at = clock()


def end_pending(session: Session, task_id: int, clock: Clock) -> None:
    """The task's update runs still pending, ended: its pull request was merged or closed
    under them, or the task was terminated; no run of them will conclude them."""
    session.execute(
        update(BaseUpdate)
        .where(BaseUpdate.task_id == task_id, BaseUpdate.state.in_(PENDING_STATES))
        .values(state=UpdateState.ENDED, updated_at=clock())
        .execution_options(synchronize_session=False)
    )


def _row(claim: Claim, now: datetime) -> BaseUpdate:
    run = claim.verdict is UpdateVerdict.UPDATE
    return BaseUpdate(
        task_id=claim.task_id,
        generation=claim.generation,
        pr_number=claim.pr_number,
        base_ref=claim.base_ref,
        base_sha=claim.base_sha,
        head_sha=claim.head_sha,
        chain_sha=claim.chain_sha,
        run_number=claim.run_number,
        verdict=claim.verdict,
        state=UpdateState.QUEUED if run else UpdateState.STOPPED,
        reason=claim.reason,
        job_id=claim.job_id,
        conflicts=[],
        result_sha=None,
        created_at=now,
        updated_at=now,
    )


def claim_tx(session: Session, claim: Claim, question: str, clock: Clock) -> Transitioned:
    """Write the pair's row and move the task (IllegalTransition when the task is no longer
    delivered, IntegrityError when another delivery claimed the pair first)."""
    session.add(_row(claim, clock()))
    session.flush()
    run = claim.verdict is UpdateVerdict.UPDATE
    # The base is in the note (EventData, the wire's event shape, has no key for it).
    data: EventData = {"pr_number": claim.pr_number, "head_sha": claim.head_sha}
    if run:
        changes: tasks.TaskChanges = {"attempts": 0, "job_id": claim.job_id, "question": None}
        wanted = TaskState.RUNNING
    else:
        changes = {"question": question}
        wanted = TaskState.WAITING_FOR_INFO
    move = Move(
        wanted,
        actor=ACTOR,
        detail=claim.note,
        data=data,
        expect=[TaskState.DELIVERED],
        changes=changes,
        note=claim.note,
    )
    return apply(session, claim.task_id, move, clock)
