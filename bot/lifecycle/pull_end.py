"""The end of a task's pull request: merged -> `merged`, closed without a merge -> `closed`.

Both states are final (bot.lifecycle.states.FINAL). The `pull_request` `closed` webhook
drives it (webhooks.lifecycle_hooks); the state change, its memory record (the merged
outcome with the pull request and the task's Decisions) and the webhook handler's "done"
record commit in one transaction, then labels and the sticky comment follow (idempotent,
repaired by the reconciler). A redelivery finds the task already final and changes nothing.

A terminated task's pull request (a terminate leaves an open one as it is,
bot.lifecycle.terminate.terminate_move) merged after all makes the task `merged`: the work
landed, and the Board, the issue's label, the events stream and memory say so as for any
merge; an operator who sees `terminated` would think it did not. Closed without a merge, the
task stays `terminated` (a `pull_end_ignored` event names who closed it): nothing landed,
the terminate already ended the task, and a terminated issue can still be picked up again,
which a `closed` one cannot. `ENDS_FROM` holds those rules, for the check and the move.
Either way, the pending fix and the review threads of a run the terminate stopped are let
go (`MAY_HOLD`), as when the end itself stops a run: the issue's close that follows "Fixes
#N" may be delivered before the merge, and it is the terminate that stopped the run then.

A pull request closed without a merge and then reopened (`pull_request` `reopened`: people
close and reopen one to run its CI again) puts its `closed` task back as the close found it
(`delivered`, `failed`, or `waiting_for_info` with its question; `delivered` when the close
stopped a run, whose pending fix and held threads the close let go): its reviews, CI,
Decisions and merge count again, and memory's outcome says it is open again.

Webhooks may come late or out of order (a failed delivery is retried minutes later), and a
close and a reopen in one second share `updated_at`, so neither the order of arrival nor
the payload's time says which is newer. Before it acts, a close or a reopen reads its pull
request from GitHub (as CI's intake reads the head and a review run the reviews' state): one
that GitHub's state contradicts (a close delivered after the reopen that undid it, a reopen
after the next close) is outdated and changes nothing; the delivery that says what GitHub
says now is the one that moves the task. So the task ends as its pull request is, whatever
the order, and a delivery sent again changes nothing it has not already changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.db import Database
from bot.github.issue_records import PullRequest
from bot.handler_runs import record_done
from bot.lifecycle import base_store, ci_store, tasks, thread_answers
from bot.lifecycle.models import EventKind, Task, TaskEvent
from bot.lifecycle.seams import GitHubApi
from bot.lifecycle.states import FINAL, PULL_ENDABLE, TaskState
from bot.lifecycle.transition import Move, Transitioned, apply, publish
from memory import ChunkIn, ChunkSource, add_chunk

log = logging.getLogger(__name__)
MAX_DECISIONS_IN_MEMORY = 20
MAX_MEMORY_TEXT = 8000
# The states a pull request's end moves a task from, by the state it moves it to: a merge
# also ends a terminated task (its kept pull request landed); a close without a merge does
# not (the module's docstring says why).
ENDS_FROM: dict[TaskState, frozenset[TaskState]] = {
    TaskState.MERGED: frozenset({*PULL_ENDABLE, TaskState.TERMINATED}),
    TaskState.CLOSED: PULL_ENDABLE,
}
# The states in which a run may hold a pending fix or review threads when the pull request
# ends: a review or CI fix run queued or working, or one a terminate stopped (the issue's
# close that follows "Fixes #N" can come before the merge's webhook); what it held is let go.
MAY_HOLD = frozenset({TaskState.QUEUED, TaskState.RUNNING, TaskState.TERMINATED})


@dataclass(frozen=True)
class PullChange:
    """A `pull_request` `closed` or `reopened` event as the lifecycle reads it."""

    repo: str
    number: int
    title: str
    url: str
    head_ref: str
    head_repo: str  # the head branch's repository: a fork's branch is never a task's
    author: str  # who opened the pull request
    merged: bool
    sender: str  # who closed or reopened it
    merge_commit: str | None = None


class PullGitHub(GitHubApi, Protocol):
    async def get_pull(self, repo: str, number: int) -> PullRequest: ...


class EndVerdict(StrEnum):
    ENDED = "ended"
    REOPENED = "reopened"
    ALREADY = "already final"
    OUTDATED = "outdated"  # GitHub's state contradicts it: a later change undid it
    NOT_OURS = "not a Steelframe pull request"
    IGNORED = "ignored"


@dataclass(frozen=True)
class PullEnd:
    verdict: EndVerdict
    reason: str
    task_id: int | None = None
    state: TaskState | None = None
    moved: Transitioned | None = None  # ENDED: the committed change, to show on GitHub


def parse_pull_change(payload: dict[str, Any]) -> PullChange:
    """The parts of a `pull_request` payload read here (number and repository were checked
    before the handler ran); missing optional fields read as empty."""
    pull = payload.get("pull_request") or {}
    head = pull.get("head") or {}
    head_repo = head.get("repo") or {}
    return PullChange(
        repo=str(payload["repository"]["full_name"]),
        number=int(pull["number"]),
        title=str(pull.get("title") or ""),
        url=str(pull.get("html_url") or ""),
        head_ref=str(head.get("ref") or ""),
        head_repo=str(head_repo.get("full_name") or "") if isinstance(head_repo, dict) else "",
        author=str((pull.get("user") or {}).get("login") or ""),
        merged=bool(pull.get("merged")),
        sender=str((payload.get("sender") or {}).get("login") or ""),
        merge_commit=pull.get("merge_commit_sha") if pull.get("merged") else None,
    )


def task_of_pull(
    session: Session, repo: str, number: int, head_ref: str, head_repo: str
) -> Task | None:
    """The task whose branch pull request `number` comes from, in the same repository,
    and whose recorded pull request (if any) is this one."""
    if head_repo != repo:
        return None
    task = session.scalar(select(Task).where(Task.repo == repo, Task.branch == head_ref))
    if task is None or task.pr_number not in (None, number):
        return None
    return task


async def end_pull(
    db: Database,
    github: PullGitHub | None,
    closed: PullChange,
    *,
    opened_by_app: bool,
    clock: Clock = utcnow,
) -> PullEnd:
    """Move the task of `closed`'s branch to `merged` or `closed` (once), remember the
    outcome, then show it on the issue. `opened_by_app`: the pull request's author is the
    App (a person's pull request from a branch named like a task's is not the task's)."""
    said = f"closed (merged={closed.merged})"
    says = "merged" if closed.merged else "closed"
    return await _follow(db, github, closed, _end_tx, _Said(said, says), opened_by_app, clock)


@dataclass(frozen=True)
class _Said:
    """A change as the log names it, and the state it says the pull request is in
    (`PullRequest.shown_state`: open, closed or merged)."""

    words: str
    state: str


async def _follow(
    db: Database,
    github: PullGitHub | None,
    change: PullChange,
    tx: Callable[[Session, PullChange, Clock], PullEnd],
    said: _Said,
    opened_by_app: bool,
    clock: Clock,
) -> PullEnd:
    """The task follows its pull request's change (`tx`, one transaction), then GitHub
    shows it; a change GitHub's state contradicts is outdated (the module's docstring)."""
    if github is None or not opened_by_app:
        why = f"opened by {change.author or 'unknown'}, not the App"
        return _not_ours(change, said.words, why)
    now = (await github.get_pull(change.repo, change.number)).shown_state
    if now != said.state:
        why = f"the pull request is {now} on GitHub now: a later change undid this one"
        result = PullEnd(EndVerdict.OUTDATED, why)
    else:
        result = await db.run(tx, change, clock)
    if result.moved is not None:
        await publish(db, github, result.moved, create_progress=False, clock=clock)
    log.info(
        "lifecycle: %s#%s %s: task %s %s: %s",
        change.repo,
        change.number,
        said.words,
        result.task_id,
        result.verdict,
        result.reason,
    )
    return result


def _not_ours(change: PullChange, said: str, why: str) -> PullEnd:
    log.info(
        "lifecycle: %s#%s %s: not a Steelframe pull request (%s)",
        change.repo,
        change.number,
        said,
        why,
    )
    return PullEnd(EndVerdict.NOT_OURS, why)


def _end_tx(session: Session, closed: PullChange, clock: Clock) -> PullEnd:
    task = task_of_pull(session, closed.repo, closed.number, closed.head_ref, closed.head_repo)
    if task is None:
        record_done(session)
        return PullEnd(EndVerdict.NOT_OURS, f"no task has branch {closed.head_ref!r} here")
    wanted = TaskState.MERGED if closed.merged else TaskState.CLOSED
    by = closed.sender or "unknown"
    ended = "merged" if closed.merged else "closed without a merge"
    detail = f"pull request #{closed.number} {ended} by {by}"
    ignored = _why_ignored(task, wanted)
    if ignored is not None:
        verdict, why = ignored
        if verdict is EndVerdict.IGNORED:
            tasks.record(
                session,
                task,
                EventKind.PULL_END_IGNORED,
                actor=f"webhook:pull_request.closed:{closed.sender}",
                detail=f"{detail}; ignored: {why}",
                data={"pr_number": closed.number, "merged": closed.merged},
                clock=clock,
            )
            if task.state in MAY_HOLD:  # terminated, it stays so: its stopped run held them
                _let_go(session, task.id, clock)
        record_done(session)
        return PullEnd(verdict, why, task.id, TaskState(task.state))
    move = Move(
        wanted,
        actor=f"webhook:pull_request.closed:{by}",
        detail=detail,
        data={"pr_number": closed.number, "pr_url": closed.url, "merge": closed.merge_commit},
        expect=ENDS_FROM[wanted],
        changes={"pr_number": closed.number, "pr_url": task.pr_url or closed.url or None},
        note=detail,
    )
    held = task.state in MAY_HOLD
    moved = apply(session, task.id, move, clock)
    if held:
        _let_go(session, task.id, clock)
    elif closed.merged:  # final: a fix or update run waiting on a person is never continued now
        ci_store.end_pending(session, task.id, clock)
        base_store.end_pending(session, task.id, clock)
    add_chunk(session, _outcome_chunk(session, task, closed, by), clock=clock)
    record_done(session)
    return PullEnd(EndVerdict.ENDED, detail, task.id, wanted, moved)


def _let_go(session: Session, task_id: int, clock: Clock) -> None:
    """What a run of the task held, let go: its pull request ended under it, so no run will
    conclude its pending fix or update, or answer the review threads it took up."""
    ci_store.end_pending(session, task_id, clock)
    base_store.end_pending(session, task_id, clock)
    thread_answers.let_go(session, task_id)


def _why_ignored(task: Task, wanted: TaskState) -> tuple[EndVerdict, str] | None:
    if task.state in FINAL:
        return EndVerdict.ALREADY, f"task is already {task.state}"
    if task.archived:
        return EndVerdict.IGNORED, "the task is archived"
    if task.state not in ENDS_FROM[wanted]:
        if task.state == TaskState.TERMINATED:
            return EndVerdict.IGNORED, "the task was terminated; it stays terminated"
        return EndVerdict.IGNORED, f"task is {task.state}, not delivered"
    return None


async def reopen_pull(
    db: Database,
    github: PullGitHub | None,
    reopened: PullChange,
    *,
    opened_by_app: bool,
    clock: Clock = utcnow,
) -> PullEnd:
    """Put the `closed` task of `reopened`'s pull request back as its close found it
    (once), say so in memory, then show it on the issue."""
    said = _Said("reopened", "open")
    return await _follow(db, github, reopened, _reopen_tx, said, opened_by_app, clock)


def _reopen_tx(session: Session, reopened: PullChange, clock: Clock) -> PullEnd:
    number = reopened.number
    task = task_of_pull(session, reopened.repo, number, reopened.head_ref, reopened.head_repo)
    if task is None:
        record_done(session)
        return PullEnd(EndVerdict.NOT_OURS, f"no task has branch {reopened.head_ref!r} here")
    if task.state != TaskState.CLOSED or task.archived:
        # Not closed by this pull request's end (a redelivery finds it reopened already; a
        # terminated task stays terminated, as its close left it).
        record_done(session)
        why = "the task is archived" if task.archived else f"task is {task.state}, not closed"
        return PullEnd(EndVerdict.IGNORED, why, task.id, TaskState(task.state))
    by = reopened.sender or "unknown"
    back = _before_close(session, task.id)
    detail = f"pull request #{number} reopened by {by}"
    move = Move(
        back,
        actor=f"webhook:pull_request.reopened:{by}",
        detail=detail,
        data={"pr_number": number, "pr_url": task.pr_url or reopened.url or None},
        expect=[TaskState.CLOSED],
        note=detail,
    )
    moved = apply(session, task.id, move, clock)
    text = (
        f"Pull request #{number} ({reopened.title}) for {task.repo}#{task.issue} was "
        f"reopened by {by} (task {task.id}): it is open again, not closed."
    )
    add_chunk(session, _outcome(task, number, text), clock=clock)
    record_done(session)
    return PullEnd(EndVerdict.REOPENED, detail, task.id, back, moved)


def _before_close(session: Session, task_id: int) -> TaskState:
    """The state a reopen puts the task back in: the one its close found (still waiting
    for a person's Decision, or failed), `delivered` when the close stopped a run (its
    pull request is open again; the threads that run held wait for the next one)."""
    found = session.scalar(
        select(TaskEvent.from_state)
        .where(
            TaskEvent.task_id == task_id,
            TaskEvent.kind == EventKind.TRANSITION,
            TaskEvent.to_state == TaskState.CLOSED,
        )
        .order_by(TaskEvent.id.desc())
        .limit(1)
    )
    kept = {TaskState.FAILED, TaskState.WAITING_FOR_INFO}
    return TaskState(found) if found in kept else TaskState.DELIVERED


def _outcome(task: Task, number: int, text: str) -> ChunkIn:
    """Memory's record of what became of the task's pull request (one per pull request:
    the latest replaces the one before)."""
    return ChunkIn(
        text=text[:MAX_MEMORY_TEXT],
        source=ChunkSource.PULL_REQUEST,
        repo=task.repo,
        issue=task.issue,
        key=f"pull-outcome:{task.repo}#{number}",
    )


def _outcome_chunk(session: Session, task: Task, closed: PullChange, by: str) -> ChunkIn:
    """The outcome as memory keeps it: what happened to the pull request, for which issue,
    and the Decisions the task ran with (what a later Chat or run should know)."""
    decisions = list(
        session.scalars(
            select(TaskEvent.detail)
            .where(TaskEvent.task_id == task.id, TaskEvent.kind == EventKind.DECISION)
            .order_by(TaskEvent.id)
            .limit(MAX_DECISIONS_IN_MEMORY)
        )
    )
    ended = "was merged" if closed.merged else "was closed without a merge"
    lines = [
        f"Pull request #{closed.number} ({closed.title}) for {task.repo}#{task.issue} "
        f"{ended} by {by} (task {task.id}).",
        f"Pull request: {closed.url}" if closed.url else "",
        f"Merge commit: {closed.merge_commit}" if closed.merge_commit else "",
        *(f"Decision: {text}" for text in decisions),
    ]
    return _outcome(task, closed.number, "\n".join(line for line in lines if line))
