"""A task's issue closed while the task is live (queued, running, waiting for a person):
the task is terminated, as an operator's terminate would (bot.lifecycle.terminate).

Closing the issue is how people on GitHub say "no more work on this"; without it a
closed issue's queued task still ran, a running one delivered a pull request for it, and a
waiting plan could still be approved by a Decision and coded. A task that is not live is
left as it is: a delivered task's pull request is the person's to merge or close (a merge
that closes the issue with "Fixes #N" finds the task delivered or merged already), and a
finished one has nothing left to stop. Reopening the issue with the pickup label picks it
up again, as after any terminate.

Idempotent: a redelivered `closed` finds the task terminated (not live) and changes
nothing; a crash after the terminate's request was recorded leaves it for whoever next
takes the task's row (the terminate's own rule).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy.orm import Session

from bot.db import Database
from bot.errors import Conflict
from bot.lifecycle import tasks
from bot.lifecycle.states import LIVE
from bot.lifecycle.terminate import Terminations

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IssueClosed:
    """An `issues` `closed` event as the lifecycle reads it."""

    repo: str
    issue: int
    closed_by: str


async def stop_for_closed_issue(
    db: Database, terminations: Terminations, closed: IssueClosed
) -> int | None:
    """Terminate the issue's live task; its id, or None when there was none to stop."""
    task_id = await db.run(_live_task, closed.repo, closed.issue)
    if task_id is None:
        return None
    actor = f"{closed.closed_by or 'someone'}, who closed the issue"
    try:
        await terminations.terminate(task_id, actor=actor)
    except Conflict:  # it finished meanwhile: nothing left to stop
        return None
    log.info("lifecycle: task %s terminated: %s#%s closed", task_id, closed.repo, closed.issue)
    return task_id


def _live_task(session: Session, repo: str, issue: int) -> int | None:
    task = tasks.find_task(session, repo, issue)
    return task.id if task is not None and task.state in LIVE else None
