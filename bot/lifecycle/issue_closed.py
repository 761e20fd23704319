"""A task's issue closed while the task is live (queued, running, waiting for a person):
the task is terminated, as an operator's terminate would (bot.lifecycle.terminate).

Closing the issue is how people on GitHub say "no more work on this"; without it a
closed issue's queued task still ran, a running one delivered a pull request for it, and a
waiting plan could still be approved by a Decision and coded. A task that is not live is
left as it is: a delivered task's pull request is the person's to merge or close (a merge
that closes the issue with "Fixes #N" finds the task delivered or merged already), and a
finished one has nothing left to stop. Reopening the issue with the pickup label picks it
up again, as after any terminate.

Before it acts, the close reads the issue from GitHub (as a pull request's close does,
`bot.lifecycle.pull_end`): closed, reopened and closed again within one second, the two
closes are the same bytes and carry no content key, and a close delivered late may come
after the reopen that undid it. A close that finds the issue open on GitHub is outdated
and changes nothing; one that finds it closed stops the task and rearms its pickup, so the
reopen that follows picks it up again (`bot.lifecycle.pickup_signal`).

Idempotent: a redelivered `closed`, under any delivery id, finds the task terminated (not
live) and rearmed already, or the issue open, and changes nothing; a crash after the
terminate's request was recorded leaves it for whoever next takes the task's row (the
terminate's own rule).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy.orm import Session

from bot.db import Database
from bot.errors import Conflict
from bot.lifecycle import tasks
from bot.lifecycle.pickup_signal import IssueReader, read_issue, rearm
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
    db: Database, github: IssueReader | None, terminations: Terminations, closed: IssueClosed
) -> int | None:
    """Terminate the issue's live task if GitHub says the issue is closed (or gone: deleted,
    or out of the App's sight), and rearm its
    pickup; the id of the task terminated, or None (also without GitHub: the close cannot
    be checked, and no task is picked up without GitHub either)."""
    repo, number = closed.repo, closed.issue
    found = await db.run(_task, repo, number)
    if found is None or github is None:
        return None
    issue = await read_issue(github, repo, number)
    state = "gone" if issue is None else issue.state  # a deleted issue is closed for good
    if state == "open":
        log.info(
            "lifecycle: %s#%s close outdated: the issue is %s on GitHub now", repo, number, state
        )
        return None
    task_id, live = found
    stopped = live and await _terminate(terminations, task_id, closed)
    await db.run(rearm, repo, number)
    if not stopped:
        return None
    log.info("lifecycle: task %s terminated: %s#%s closed", task_id, repo, number)
    return task_id


async def _terminate(terminations: Terminations, task_id: int, closed: IssueClosed) -> bool:
    actor = f"{closed.closed_by or 'someone'}, who closed the issue"
    try:
        await terminations.terminate(task_id, actor=actor)
    except Conflict:  # it finished meanwhile: nothing left to stop
        return False
    return True


def _task(session: Session, repo: str, issue: int) -> tuple[int, bool] | None:
    """The issue's task (its id, and whether it is live), or None."""
    task = tasks.find_task(session, repo, issue)
    return None if task is None else (task.id, task.state in LIVE)
