"""Whether an `issues` webhook still says what GitHub says, and whether a pickup webhook is
one its task has not followed yet.

An issue closed, reopened and closed again within one second, or a pickup label added,
removed and added again, sends the same bytes twice (GitHub's times are whole seconds and
no field of the payload counts the changes), so these deliveries carry no content key
(`webhooks/content_keys.py`): one may be a new change or the same one sent again. As for a
pull request's close and reopen (`bot.lifecycle.pull_end`), the lifecycle reads the issue
from GitHub before it acts and follows only what GitHub says now:

* The issue's *pickup signal* is on while it is open and carries a pickup label. A pickup
  (`opened`, `labeled` with a pickup label, `reopened`) that finds it off on GitHub is
  outdated, and so is a close that finds the issue open, or a pickup label's removal that
  finds the signal on: each changes nothing (a later delivery says what GitHub says now).
* A pickup is an edge, not a state: a task terminated by an operator keeps its open,
  labelled issue, and only a new pickup starts it again. So a task follows a pickup once:
  one whose change is newer than the newest it followed (`Task.pickup_followed_at`,
  GitHub's time), or any pickup after GitHub showed the signal off (`Task.pickup_rearmed`,
  set by a close or a pickup label's removal that GitHub's state agreed with). Any other is
  the change the task already followed, sent again under a new delivery id or a second
  pickup in that second with no off between, and changes nothing, not even the task's
  history. Closed, reopened and closed again in one second, each step is followed (the
  close rearms the task); a replay of any of them, in any order, changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import update
from sqlalchemy.orm import Session

from bot.github.errors import GitHubNotFound
from bot.github.issue_records import Issue
from bot.handler_runs import record_done
from bot.lifecycle import tasks
from bot.lifecycle.models import Task


class IssueReader(Protocol):
    async def get_issue(self, repo: str, number: int) -> Issue: ...


@dataclass(frozen=True)
class Trigger:
    """A pickup webhook as the task follows it: GitHub's time of its change (the issue's
    `updated_at` in the payload; None when the payload has none)."""

    at: datetime | None


def signal_on(issue: Issue, pickup_labels: tuple[str, ...]) -> bool:
    """The issue is open and carries a pickup label (GitHub's state as read now)."""
    return issue.state == "open" and any(name in pickup_labels for name in issue.label_names)


async def read_issue(github: IssueReader, repo: str, number: int) -> Issue | None:
    """The issue as GitHub says now (`GET .../issues/{n}`); None when it is gone (deleted,
    410, or out of the App's sight, 404): an answer that will not change, so the delivery
    that asked is done with, not retried until it dies."""
    try:
        return await github.get_issue(repo, number)
    except GitHubNotFound:
        return None


async def read_signal(
    github: IssueReader, repo: str, number: int, pickup_labels: tuple[str, ...]
) -> bool:
    """The issue's pickup signal as GitHub says now: off for an issue that is gone."""
    issue = await read_issue(github, repo, number)
    return issue is not None and signal_on(issue, pickup_labels)


def is_new(task: Task, trigger: Trigger) -> bool:
    """`trigger` is a pickup `task` has not followed yet (the module's docstring)."""
    if task.pickup_rearmed or task.pickup_followed_at is None:
        return True
    return trigger.at is not None and trigger.at > task.pickup_followed_at


def follow(session: Session, task: Task, trigger: Trigger) -> None:
    """Record that `task` followed `trigger` (started, or recorded as ignored, for it)."""
    newest = task.pickup_followed_at
    if trigger.at is not None and (newest is None or trigger.at > newest):
        newest = trigger.at
    session.execute(
        update(Task)
        .where(Task.id == task.id)
        .values(pickup_followed_at=newest, pickup_rearmed=False)
        .execution_options(synchronize_session="fetch")
    )


def rearm(session: Session, repo: str, issue: int) -> bool:
    """GitHub showed the issue's pickup signal off: the next pickup of its task is new.
    True when that changed anything (a delivery sent again finds it rearmed already)."""
    record_done(session)
    task = tasks.find_task(session, repo, issue)
    if task is None or task.pickup_rearmed:
        return False
    session.execute(update(Task).where(Task.id == task.id).values(pickup_rearmed=True))
    return True
