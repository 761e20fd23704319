"""`transition`: the one seam through which a task changes state.

Contract. A new state (a review or CI state: `needs_human`, ...) is declared in
`states.py` (`TaskState`, its edges in `TRANSITIONS`, its label in `LABEL_FOR_STATE`) and its
progress phase in `progress.PHASE_FOR_STATE`; its module then moves tasks only by calling
`transition` (or `apply` + `publish`) with a `Move`. Nothing else writes `Task.state`
(`tasks.touch` and `Move.changes` refuse it). What `transition` does:

1. **The state change.** The task moves to `Move.wanted` only if the state machine allows it
   (`states.TRANSITIONS`) and only from the state this transaction read (a compare-and-set
   on the row, so two writers cannot both win). `Move.expect` narrows the states this caller
   moves from; anything else raises `IllegalTransition` and changes nothing. `Move.fence` (a
   run's lease holder) raises `LeaseLost` unless that run still holds the lease. `Move.changes`
   are other columns set in the same statement.
2. **The event.** A `transition` row goes into the task's event log in the same transaction;
   once the transaction commits, `bot.lifecycle.announce` mirrors it onto the operator events
   stream (a `task` frame), whoever made the change. A rollback announces nothing.
3. **The notice.** `Move.notice` (a comment saying why, e.g. a question or a failure) is
   queued in the same transaction and posted after it, once (`progress.post_notice`).
4. **Labels and the sticky comment.** After the commit the issue's state label is synced and
   the progress comment edited (started too unless `create_progress=False`). These are
   GitHub effects: idempotent, best-effort, repaired by the reconciler; they never raise.
5. **The result.** `Transitioned` says what moved, from where to where, the event's id and
   whether GitHub shows it yet (`published`).

`transition` runs all of that; `after_commit` is awaited between the commit and the GitHub
effects (enqueuing the next job), `within` adds the caller's own rows to the transaction.
`apply` is the transactional half alone, for a caller that decides inside its own
transaction whether to move at all (a pickup reopening a task, a pull request's end); it
then calls `publish` after its commit.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.contracts.tasks import EventData
from bot.db import Database, bound_lock_wait
from bot.lifecycle import progress, tasks
from bot.lifecycle.models import EventKind, Task
from bot.lifecycle.progress import PHASE_FOR_STATE, Phase
from bot.lifecycle.seams import GitHubApi
from bot.lifecycle.states import IllegalTransition, TaskState, check_transition

log = logging.getLogger(__name__)
CAS_ROUNDS = 5


@dataclass(frozen=True)
class Move:
    """A requested state change: where to, who asks and why, and what goes with it."""

    wanted: TaskState
    actor: str
    detail: str = ""  # the event's words ("<from> -> <to>" when empty)
    data: EventData | None = None  # the event's JSON data
    expect: Collection[TaskState] | None = None  # the states this caller moves from
    changes: tasks.TaskChanges | None = None  # other task columns, set with the state
    fence: str | None = None  # a run's lease holder: LeaseLost unless it holds the lease
    notice: str | None = None  # a comment posted once after the commit
    phase: Phase | None = None  # the progress comment's phase (the state's by default)
    note: str = ""  # the progress comment's note


@dataclass(frozen=True)
class Transitioned:
    """A committed state change (and, from `transition`, whether GitHub shows it yet)."""

    task_id: int
    from_state: TaskState
    state: TaskState
    event_id: int
    phase: Phase
    note: str = ""
    notice_key: str | None = None
    published: bool = False


def apply(session: Session, task_id: int, move: Move, clock: Clock = utcnow) -> Transitioned:
    """The transactional half: the state (compare-and-set), its event and its notice."""
    if move.fence is not None:
        tasks.hold(session, task_id, move.fence, clock)
    if move.changes and "state" in move.changes:
        raise ValueError("the state is Move.wanted, never one of Move.changes")
    allowed = frozenset(move.expect) if move.expect is not None else None
    wanted = move.wanted
    for _ in range(CAS_ROUNDS):
        task = tasks.get_task(session, task_id)
        current = TaskState(task.state)
        if allowed is not None and current not in allowed:
            raise IllegalTransition(task_id, current, wanted)
        check_transition(task_id, current, wanted)
        values: dict[str, Any] = {"state": wanted, "updated_at": clock(), **(move.changes or {})}
        result = session.execute(
            update(Task)
            .where(Task.id == task_id, Task.state == current)
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        if getattr(result, "rowcount", 0) == 1:
            session.refresh(task)
            return _logged(session, task, current, move, clock)
    raise IllegalTransition(task_id, tasks.get_task(session, task_id).state, wanted)


def _logged(
    session: Session, task: Task, current: TaskState, move: Move, clock: Clock
) -> Transitioned:
    event = tasks.record(
        session,
        task,
        EventKind.TRANSITION,
        actor=move.actor,
        detail=move.detail or f"{current} -> {move.wanted}",
        data=move.data,
        from_state=current,
        to_state=move.wanted,
        clock=clock,
    )
    key = None
    if move.notice:
        key = f"{move.wanted}-e{event.id}"
        progress.add_notice(session, task.id, key, move.notice, clock)
    return Transitioned(
        task_id=task.id,
        from_state=current,
        state=move.wanted,
        event_id=event.id,
        phase=move.phase or PHASE_FOR_STATE[move.wanted],
        note=move.note,
        notice_key=key,
    )


async def transition(
    db: Database,
    github: GitHubApi | None,
    task_id: int,
    move: Move,
    *,
    clock: Clock = utcnow,
    create_progress: bool = True,
    lock_wait: float | None = None,
    within: Callable[[Session, Transitioned], None] | None = None,
    after_commit: Callable[[Transitioned], Awaitable[None]] | None = None,
) -> Transitioned:
    """Move the task (one transaction: state, event, notice, and `within`'s rows), then
    `after_commit`, then labels, the progress comment and the notice on GitHub.

    Raises IllegalTransition or LeaseLost (nothing changed), or OperationalError when
    `lock_wait` seconds pass waiting for a row another process holds."""

    def unit(session: Session) -> Transitioned:
        if lock_wait is not None:
            bound_lock_wait(session, lock_wait)
        moved = apply(session, task_id, move, clock)
        if within is not None:
            within(session, moved)
        return moved

    moved = await db.run(unit)
    if after_commit is not None:
        await after_commit(moved)
    published = await publish(db, github, moved, create_progress=create_progress, clock=clock)
    return replace(moved, published=published)


async def publish(
    db: Database,
    github: GitHubApi | None,
    moved: Transitioned,
    *,
    create_progress: bool = True,
    clock: Clock = utcnow,
) -> bool:
    """Labels, progress comment, notice, for a committed change. False if any step failed
    (logged, left to the reconciler); never raises for GitHub's sake. Without
    `create_progress` an existing progress comment is edited but none is started (a task
    terminated before it ran)."""
    return await show(
        db,
        github,
        moved.task_id,
        moved.phase,
        moved.note,
        notice_key=moved.notice_key,
        create_progress=create_progress,
        clock=clock,
    )


async def show(
    db: Database,
    github: GitHubApi | None,
    task_id: int,
    phase: Phase,
    note: str = "",
    *,
    notice_key: str | None = None,
    create_progress: bool = True,
    clock: Clock = utcnow,
) -> bool:
    """The task's state on GitHub as it is now: labels, progress comment, a queued notice
    (`publish`, and a run's announcement, which changes no state)."""
    if github is None:
        return False
    task = await db.run(tasks.get_task, task_id)
    ok = True
    try:
        await progress.sync_labels(github, task.repo, task.issue, TaskState(task.state))
    except Exception as exc:
        ok = False
        log.warning("lifecycle: task %s labels not synced: %s", task.id, _reason(exc))
    try:
        await progress.update_progress(
            db, github, task.id, phase, note, create=create_progress, clock=clock
        )
    except Exception as exc:
        ok = False
        log.warning("lifecycle: task %s progress comment not updated: %s", task.id, _reason(exc))
    if notice_key is not None:
        try:
            await progress.post_notice(db, github, task.id, notice_key, fresh=True, clock=clock)
        except Exception as exc:
            ok = False
            log.warning("lifecycle: task %s notice not posted: %s", task.id, _reason(exc))
    return ok


def _reason(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc)
    return f"{type(exc).__name__}: {message}"[:300]
