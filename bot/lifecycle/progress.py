"""What a person sees on the issue: state labels, one sticky progress comment, notices.

Every call here is idempotent. Labels are synced to the task's state (add the one that
should be there, remove the others). The progress comment is found by its marker if the
id was not stored (a crash between create and store) and edited in place. Notices are
written to `task_notices` before the call and get their comment id after it. A marked
comment counts only when the App wrote it: anyone can type a marker (task ids are
sequential), and a person's comment is never Steelframe's to edit or to take as posted.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from enum import StrEnum

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.db import Database
from bot.errors import NotFound
from bot.github.issue_records import Issue
from bot.lifecycle import tasks
from bot.lifecycle.models import Task, TaskNotice
from bot.lifecycle.seams import GitHubApi
from bot.lifecycle.states import LABEL_FOR_STATE, StateLabel, TaskState

log = logging.getLogger(__name__)


class Phase(StrEnum):
    PICKED_UP = "picked up"
    RUNNING = "running"
    RETRYING = "retrying"
    QUESTION = "question asked"
    DELIVERED = "delivered"
    FAILED = "failed"
    TERMINATED = "terminated"
    MERGED = "merged"
    CLOSED = "closed without merge"


PHASE_FOR_STATE = {
    TaskState.QUEUED: Phase.PICKED_UP,
    TaskState.RUNNING: Phase.RUNNING,
    TaskState.WAITING_FOR_INFO: Phase.QUESTION,
    TaskState.DELIVERED: Phase.DELIVERED,
    TaskState.FAILED: Phase.FAILED,
    TaskState.TERMINATED: Phase.TERMINATED,
    TaskState.MERGED: Phase.MERGED,
    TaskState.CLOSED: Phase.CLOSED,
}
ORDER = [Phase.PICKED_UP, Phase.RUNNING, Phase.QUESTION, Phase.DELIVERED]


PROGRESS_PREFIX = "<!-- steelframe-progress "
NOTICE_PREFIX = "<!-- steelframe-notice "


def progress_marker(task_id: int) -> str:
    return f"{PROGRESS_PREFIX}task={task_id} -->"


def notice_marker(task_id: int, key: str) -> str:
    return f"{NOTICE_PREFIX}task={task_id} key={key} -->"


def progress_body(task: Task, phase: Phase, note: str = "") -> str:
    """The whole comment, rendered from the task: editing it twice changes nothing."""
    lines = [progress_marker(task.id), f"**Steelframe** is working on this issue (task {task.id})."]
    lines.append("")
    reached = ORDER.index(phase) if phase in ORDER else ORDER.index(Phase.RUNNING)
    if phase in (Phase.MERGED, Phase.CLOSED):  # the pull request's end, after delivery
        reached = ORDER.index(Phase.DELIVERED)
    for index, step in enumerate(ORDER):
        if step == Phase.QUESTION and phase != Phase.QUESTION:
            continue
        mark = "x" if index <= reached else " "
        lines.append(f"- [{mark}] {step}")
    if phase in (Phase.FAILED, Phase.TERMINATED, Phase.RETRYING, Phase.MERGED, Phase.CLOSED):
        lines.append(f"- [x] {phase}")
    lines.append("")
    lines.append(f"State: `{task.state}` · attempt {task.attempts}")
    if task.pr_url:
        lines.append(f"Pull request: {task.pr_url}")
    if note:
        lines.append("")
        lines.append(note)
    return "\n".join(lines)


async def sync_labels(github: GitHubApi, repo: str, issue: int, state: TaskState) -> list[str]:
    """Make the issue carry exactly the state label of `state`; returns what changed."""
    have = set((await github.get_issue(repo, issue)).label_names)
    want = LABEL_FOR_STATE[state].value
    changes: list[str] = []
    if want not in have:
        await github.add_labels(repo, issue, [want])
        changes.append(f"+{want}")
    for label in StateLabel:
        if label.value != want and label.value in have:
            await github.remove_label(repo, issue, label.value)
            changes.append(f"-{label.value}")
    return changes


def labels_match(issue: Issue, state: TaskState) -> bool:
    have = set(issue.label_names)
    state_labels = have & {label.value for label in StateLabel}
    return state_labels == {LABEL_FOR_STATE[state].value}


async def _find_marked(github: GitHubApi, repo: str, issue: int, marker: str) -> int | None:
    """The App's own comment on the issue carrying `marker` (what an earlier, crashed
    attempt posted); another author's copy of the marker is theirs and is passed over."""
    for comment in await github.list_comments(repo, issue):
        if marker in comment.body and await github.is_app_login(comment.author):
            return comment.id
    return None


async def update_progress(
    db: Database,
    github: GitHubApi,
    task_id: int,
    phase: Phase,
    note: str = "",
    *,
    create: bool = True,
    clock: Clock = utcnow,
) -> int | None:
    """Edit the task's progress comment (creating it the first time, if `create`)."""
    task = await db.run(tasks.get_task, task_id)
    body = progress_body(task, phase, note)
    comment_id = task.progress_comment_id
    if comment_id is not None:
        try:
            await github.update_comment(task.repo, comment_id, body)
            return comment_id
        except NotFound:
            comment_id = None  # someone deleted it: make a new one
    found = await _find_marked(github, task.repo, task.issue, progress_marker(task_id))
    if found is not None:
        await github.update_comment(task.repo, found, body)
        comment_id = found
    elif create:
        comment_id = (await github.create_comment(task.repo, task.issue, body)).id
    if comment_id is not None:
        await db.run(tasks.touch, task_id, clock, progress_comment_id=comment_id)
    return comment_id


def notice_body(task_id: int, key: str, text: str) -> str:
    return f"{notice_marker(task_id, key)}\n{text}"


def add_notice(session: Session, task_id: int, key: str, text: str, clock: Clock) -> None:
    """Queue a notice in the caller's transaction (the one that changed the state), so a
    crash after the commit leaves it for `post_pending` instead of losing it."""
    exists = session.scalar(
        select(TaskNotice.id).where(TaskNotice.task_id == task_id, TaskNotice.key == key)
    )
    if exists is None:
        session.add(
            TaskNotice(
                task_id=task_id, key=key, body=notice_body(task_id, key, text), created_at=clock()
            )
        )
        session.flush()


def _notice(session: Session, task_id: int, key: str) -> tuple[str, int | None, str, int] | None:
    row = session.execute(
        select(TaskNotice.body, TaskNotice.comment_id, Task.repo, Task.issue)
        .join(Task, Task.id == TaskNotice.task_id)
        .where(TaskNotice.task_id == task_id, TaskNotice.key == key)
    ).first()
    return None if row is None else (row[0], row[1], row[2], row[3])


def _posted(session: Session, task_id: int, key: str, comment_id: int, clock: Clock) -> None:
    row = session.scalar(
        select(TaskNotice).where(TaskNotice.task_id == task_id, TaskNotice.key == key)
    )
    if row is not None:
        row.comment_id = comment_id
        row.posted_at = clock()


async def post_notice(
    db: Database,
    github: GitHubApi,
    task_id: int,
    key: str,
    *,
    fresh: bool = False,
    clock: Clock = utcnow,
) -> int | None:
    """Post a queued notice unless it was posted; `fresh` (the caller queued it a moment
    ago) skips looking for a copy an earlier, crashed attempt may have posted."""
    found = await db.run(_notice, task_id, key)
    if found is None:
        return None
    body, comment_id, repo, issue = found
    if comment_id is not None:
        return comment_id
    marked = None if fresh else await _find_marked(github, repo, issue, notice_marker(task_id, key))
    if marked is None:
        marked = (await github.create_comment(repo, issue, body)).id
    await db.run(_posted, task_id, key, marked, clock)
    return marked


def _pending(session: Session, older_than: datetime) -> list[tuple[int, str]]:
    rows = session.execute(
        select(TaskNotice.task_id, TaskNotice.key).where(
            TaskNotice.comment_id.is_(None), TaskNotice.created_at < older_than
        )
    )
    return [(r[0], r[1]) for r in rows]


async def post_pending(
    db: Database, github: GitHubApi, *, grace: float, clock: Clock = utcnow
) -> int:
    """Post notices queued more than `grace` seconds ago whose poster died or failed."""
    posted = 0
    for task_id, key in await db.run(_pending, clock() - timedelta(seconds=grace)):
        await post_notice(db, github, task_id, key, clock=clock)
        posted += 1
    return posted
