"""The database side of failing CI: which task a failing commit belongs to, the rows of
`ci_fixes`, and the one transaction that claims a head commit and moves the task (a fix
run, or a person asked), with the webhook handler's done-record."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from bot.clock import Clock
from bot.contracts.tasks import FailingCheck
from bot.handler_runs import record_done
from bot.lifecycle import tasks
from bot.lifecycle.ci_models import (
    PENDING_STATES,
    CiFix,
    CiFixState,
    CiVerdict,
    check_names,
    failing_checks,
    fix_event_data,
)
from bot.lifecycle.ci_summary import CiStop, TriedRun
from bot.lifecycle.models import EventKind, Task
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, Transitioned, apply

# Where CI handling stopped for a commit: a person is asked, with the summary.
STOPS = frozenset({CiFixState.STOPPED, CiFixState.UNCHANGED})


@dataclass(frozen=True)
class Claim:
    """What a failure on `head_sha` decided, to be written in one transaction."""

    task_id: int
    generation: int
    pr_number: int
    head_sha: str
    chain_sha: str
    run_number: int  # 0: no fix run
    verdict: CiVerdict
    checks: tuple[FailingCheck, ...]
    reason: str
    evidence: str
    job_id: str | None
    note: str  # the progress comment's line
    fix_runs: int  # the bound, for the event
    # The commit's row no longer claims it (`ci_models.RECLAIMABLE_STATES`: an interrupted
    # or ended fix run), read in this state: this claim takes the row over instead of
    # adding one, if it is still in that state.
    taking_over: CiFixState | None = None


class AlreadyClaimed(Exception):
    """Another delivery claimed the head commit first."""


def tasks_on(
    session: Session, repo: str, branches: Sequence[str], pulls: Sequence[int]
) -> list[Task]:
    """The tasks of `repo` with a pull request whose branch is one of `branches` or whose
    pull request is one of `pulls`."""
    if not branches and not pulls:
        return []
    found = session.scalars(
        select(Task).where(
            Task.repo == repo,
            Task.pr_number.is_not(None),
            or_(
                Task.branch.in_(branches),
                Task.branch.is_(None),
                Task.pr_number.in_(pulls),
            ),
        )
    )
    return [
        task
        for task in found
        if (task.branch or tasks.branch_name(task.issue)) in branches or task.pr_number in pulls
    ]


def row_at(session: Session, task_id: int, head_sha: str) -> CiFix | None:
    return session.scalar(select(CiFix).where(CiFix.task_id == task_id, CiFix.head_sha == head_sha))


def made_by_fix_run(session: Session, task_id: int, sha: str) -> CiFix | None:
    """The fix run whose push made commit `sha`, if one did."""
    return session.scalar(select(CiFix).where(CiFix.task_id == task_id, CiFix.result_sha == sha))


def tried(session: Session, task_id: int, chain_sha: str) -> list[TriedRun]:
    rows = session.scalars(
        select(CiFix)
        .where(CiFix.task_id == task_id, CiFix.chain_sha == chain_sha, CiFix.run_number > 0)
        .order_by(CiFix.run_number)
    )
    return [TriedRun(r.run_number, r.head_sha, r.state, r.result_sha) for r in rows]


def pending_fix(session: Session, task_id: int, generation: int) -> CiFix | None:
    """The fix run a task's next run is (enqueued and not yet concluded), if any."""
    return session.scalar(
        select(CiFix)
        .where(
            CiFix.task_id == task_id,
            CiFix.generation == generation,
            CiFix.state.in_(PENDING_STATES),
        )
        .order_by(CiFix.id.desc())
        .limit(1)
    )


def conclude(
    session: Session,
    /,
    fix_id: int,
    state: CiFixState,
    clock: Clock,
    *,
    fence: str,
    **changes: object,
) -> None:
    """The fix run's end, written by the run holding lease `fence` (LeaseLost otherwise: a
    run that stalled past its lease leaves the fix to the run that took the task over)."""
    row = session.get(CiFix, fix_id)
    if row is None:
        return
    tasks.hold(session, row.task_id, fence, clock)
    if row.state in PENDING_STATES:
        row.state = state
        for key, value in changes.items():
            setattr(row, key, value)
        row.updated_at = clock()


def pushed_so_far(session: Session, /, fix_id: int, sha: str, clock: Clock, *, fence: str) -> None:
    """A pending fix run that waits for a person pushed its work so far, `sha` (written by
    the run holding lease `fence`): the run the Decision starts continues from it, and a
    failure on it continues the fix run's chain (`made_by_fix_run`)."""
    row = session.get(CiFix, fix_id)
    if row is None or row.state not in PENDING_STATES:
        return
    tasks.hold(session, row.task_id, fence, clock)
    row.result_sha = sha
    row.updated_at = clock()


def end_pending(
    session: Session, task_id: int, clock: Clock, *, state: CiFixState = CiFixState.INTERRUPTED
) -> None:
    """The task's fix runs still pending, interrupted: its pull request was merged or closed
    under them, so no run of them will conclude them (a reopened task's next run is not one
    of them; a failure on the commit after the reopen claims it again). Or `state` (ended):
    the task was terminated while its fix run waited for a person, no Decision continues it."""
    session.execute(
        update(CiFix)
        .where(CiFix.task_id == task_id, CiFix.state.in_(PENDING_STATES))
        .values(state=state, updated_at=clock())
        .execution_options(synchronize_session=False)
    )


def _claimed(claim: Claim, now: datetime) -> dict[str, object]:
    """The head commit's row as `claim` makes it (`created_at` aside)."""
    fix = claim.verdict is CiVerdict.FIX
    return {
        "task_id": claim.task_id,
        "generation": claim.generation,
        "pr_number": claim.pr_number,
        "head_sha": claim.head_sha,
        "chain_sha": claim.chain_sha,
        "run_number": claim.run_number,
        "verdict": claim.verdict,
        "state": CiFixState.QUEUED if fix else CiFixState.STOPPED,
        "failing": list(claim.checks),
        "reason": claim.reason,
        "evidence": claim.evidence,
        "job_id": claim.job_id,
        "result_sha": None,
        "updated_at": now,
    }


def _write_claim(session: Session, claim: Claim, now: datetime) -> None:
    """Add the head commit's row, or take over its interrupted or ended one (compare-and-set
    on the state read: of two deliveries claiming it again, one wins, the other is
    AlreadyClaimed)."""
    if claim.taking_over is None:
        session.add(CiFix(**_claimed(claim, now), created_at=now))
        session.flush()
        return
    taken = session.connection().execute(
        update(CiFix)
        .where(
            CiFix.task_id == claim.task_id,
            CiFix.head_sha == claim.head_sha,
            CiFix.state == claim.taking_over,
        )
        .values(**_claimed(claim, now))
    )
    if taken.rowcount != 1:
        raise AlreadyClaimed(claim.head_sha)


def claim_tx(session: Session, claim: Claim, question: str, clock: Clock) -> Transitioned:
    """Write the head commit's row and move the task (raises IllegalTransition when the
    task is no longer delivered, IntegrityError or AlreadyClaimed when another delivery
    claimed it first)."""
    fix = claim.verdict is CiVerdict.FIX
    _write_claim(session, claim, clock())
    data = fix_event_data(
        claim.head_sha,
        claim.pr_number,
        claim.checks,
        run=claim.run_number,
        fix_runs=claim.fix_runs,
    )
    actor = "webhook:ci"
    if fix:
        changes: tasks.TaskChanges = {"attempts": 0, "job_id": claim.job_id, "question": None}
        wanted = TaskState.RUNNING
    else:
        changes = {"question": question}
        wanted = TaskState.WAITING_FOR_INFO
    moved = apply(
        session,
        claim.task_id,
        Move(
            wanted,
            actor=actor,
            detail=claim.note,
            data=data,
            expect=[TaskState.DELIVERED],
            changes=changes,
            note=claim.note,
        ),
        clock,
    )
    if fix:
        task = tasks.get_task(session, claim.task_id)
        tasks.record(
            session,
            task,
            EventKind.CI_FIX_RUN,
            actor=actor,
            detail=claim.note,
            data=data,
            clock=clock,
        )
    record_done(session)
    return moved


def stop_of(session: Session, task: Task, head_sha: str) -> CiStop | None:
    """What the pull request's summary says about the stop at `head_sha` (None: no stop)."""
    row = row_at(session, task.id, head_sha)
    if row is None or row.state not in STOPS:
        return None
    return CiStop(
        repo=task.repo,
        issue=task.issue,
        pr_number=row.pr_number,
        head_sha=row.head_sha,
        checks=check_names(failing_checks(row.failing)),
        tried=tried(session, task.id, row.chain_sha),
        reason=row.reason,
    )
