"""A state change and what follows it on GitHub: one transaction, then idempotent effects.

`change_state` moves the task and queues its notice (if any) in one transaction. `publish`
then syncs labels, edits the progress comment and posts the notice; each of those is
idempotent and best-effort here: if GitHub fails, the reconciler repairs it later.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Unpack

from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.db import Database
from bot.lifecycle import progress, tasks
from bot.lifecycle.progress import PHASE_FOR_STATE, Phase
from bot.lifecycle.seams import GitHubApi
from bot.lifecycle.states import TaskState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Change:
    task_id: int
    state: TaskState
    event_id: int
    phase: Phase
    note: str = ""
    notice_key: str | None = None


class ChangeFields(tasks.TransitionFields, total=False):
    """`change_state`'s keywords as one type, for what passes them on (lifecycle.finish)."""

    notice: str | None
    phase: Phase | None
    note: str


def change_state(
    db: Database,
    task_id: int,
    wanted: TaskState,
    *,
    notice: str | None = None,
    phase: Phase | None = None,
    note: str = "",
    **fields: Unpack[tasks.TransitionFields],
) -> Change:
    """`tasks.transition` (raises IllegalTransition, or LeaseLost for a `fence` that no
    longer holds the lease) and the notice queued, in one transaction."""
    clock = fields.get("clock", utcnow)

    def apply(session: Session) -> Change:
        event = tasks.transition(session, task_id, wanted, **fields)
        key = None
        if notice:
            key = f"{wanted}-e{event.id}"
            progress.add_notice(session, task_id, key, notice, clock)
        return Change(
            task_id=task_id,
            state=wanted,
            event_id=event.id,
            phase=phase or PHASE_FOR_STATE[wanted],
            note=note,
            notice_key=key,
        )

    return db.call(apply)


async def publish(
    db: Database,
    github: GitHubApi | None,
    change: Change,
    *,
    create_progress: bool = True,
    clock: Clock = utcnow,
) -> bool:
    """Labels, progress comment, notice. False if any step failed (logged, left to the
    reconciler); never raises for GitHub's sake. Without `create_progress` an existing
    progress comment is edited but none is started (a task terminated before it ran)."""
    if github is None:
        return False
    task = await db.run(tasks.get_task, change.task_id)
    ok = True
    try:
        await progress.sync_labels(github, task.repo, task.issue, TaskState(task.state))
    except Exception as exc:
        ok = False
        log.warning("lifecycle: task %s labels not synced: %s", task.id, _reason(exc))
    try:
        await progress.update_progress(
            db, github, task.id, change.phase, change.note, create=create_progress, clock=clock
        )
    except Exception as exc:
        ok = False
        log.warning("lifecycle: task %s progress comment not updated: %s", task.id, _reason(exc))
    if change.notice_key is not None:
        try:
            await progress.post_notice(
                db, github, task.id, change.notice_key, fresh=True, clock=clock
            )
        except Exception as exc:
            ok = False
            log.warning("lifecycle: task %s notice not posted: %s", task.id, _reason(exc))
    return ok


def _reason(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc)
    return f"{type(exc).__name__}: {message}"[:300]
