"""Pickup: a labelled issue (or a Chat filing) becomes a queued task, once.

A live task (queued, running, waiting) or a delivered one is left as it is and the pickup
is recorded as ignored; a failed or terminated task is reopened through `transition.apply`
(a new generation). The task row commits first; the enqueue and the `queued` label follow
and are idempotent, so a retry or a crash in between never doubles anything (the
reconciler enqueues a queued task without a job). An `issues` edit re-pins the text only
when the App or a writer made it.

A pickup webhook counts only if GitHub agrees with it now (the issue open, with a pickup
label) and its task has not followed it yet (`bot.lifecycle.pickup_signal`): a pickup sent
again under a new delivery id changes nothing, a new one in the same second still counts.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime

import redis
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.contracts.errors import ErrorDetail
from bot.db import Database
from bot.errors import BadRequest
from bot.handler_runs import record_done
from bot.lifecycle import progress, tasks
from bot.lifecycle.access import may_act
from bot.lifecycle.models import EventKind, Task
from bot.lifecycle.pickup_signal import Trigger, follow, is_new, read_signal, rearm
from bot.lifecycle.queue import LifecycleQueue, job_id
from bot.lifecycle.seams import GitHubApi
from bot.lifecycle.states import FINAL, LIVE, TaskState
from bot.lifecycle.terminate import forget as forget_stop_request
from bot.lifecycle.transition import Move, apply

log = logging.getLogger(__name__)
PICKUP_ROUNDS = 5


@dataclass(frozen=True)
class PickupResult:
    task_id: int
    created: bool
    started: bool


@dataclass(frozen=True)
class IssueText:
    """An issue's title and body as an authorised pickup saw them (body None: unknown)."""

    title: str
    body: str | None


@dataclass(frozen=True)
class _Pickup:
    """One pickup as its transaction sees it: the issue, its text, the chat session that
    filed it (if any), who or what picked it up (`cause`, the events' actor) and, for a
    webhook's, the change it follows (`trigger`)."""

    repo: str
    issue: int
    text: IssueText
    origin: str | None
    cause: str
    trigger: Trigger | None = None


@dataclass(frozen=True)
class IssueEvent:
    """An `issues` webhook event as the lifecycle reads it (webhooks.lifecycle_hooks parses
    the payload): what happened, to which issue, by whom, and the labels involved."""

    action: str
    repo: str
    number: int
    title: str
    body: str
    sender: str
    labels: tuple[str, ...] = ()  # the issue's labels
    label: str | None = None  # `labeled`/`unlabeled`: the label added or removed
    is_pull_request: bool = False
    updated_at: datetime | None = None  # GitHub's time of the change (`issue.updated_at`)

    def names_pickup_label(self, pickup_labels: tuple[str, ...]) -> bool:
        """The label just added is a pickup label, or (any other action) the issue
        carries one."""
        if self.action == "labeled":
            return self.label in pickup_labels
        return any(name in pickup_labels for name in self.labels)


@dataclass(frozen=True, kw_only=True)
class Pickups:
    """Pickups from webhooks and Chat filings (built once by the composition root)."""

    db: Database
    queue: LifecycleQueue
    github: GitHubApi | None
    pickup_labels: tuple[str, ...]
    clock: Clock = utcnow

    async def pickup(
        self,
        repo: str,
        issue: int,
        *,
        title: str,
        body: str | None = None,
        origin_session: str | None = None,
        cause: str,
        trigger: Trigger | None = None,
    ) -> PickupResult:
        """Create the task for (repo, issue) and enqueue its run, once.

        A live task (queued, running, waiting) or a delivered one is left as it is and the
        pickup is recorded as ignored; a failed or terminated task is reopened. A Chat
        filing whose webhook got here first still links its session (`origin_session`).
        A started task pins `title` and `body` (the text as this authorised pickup saw it;
        without a body the first run pins what the issue says then). A webhook's pickup
        (`trigger`) the task already followed changes nothing (`pickup_signal.is_new`)."""
        if isinstance(issue, bool) or not isinstance(issue, int) or issue <= 0:
            raise BadRequest("issue must be a positive integer", detail=ErrorDetail(field="issue"))
        wanted = _Pickup(repo, issue, IssueText(title, body), origin_session, cause, trigger)
        result, job = await self._pickup_row(wanted)
        if job is not None:
            try:
                await asyncio.to_thread(self.queue.enqueue, result.task_id, job=job)
            except redis.RedisError as exc:
                # The task row is committed as `queued`: the reconciler enqueues a queued
                # task without a job once Redis is back, so the pickup itself succeeded.
                log.warning(
                    "lifecycle: task %s queued, not yet enqueued (%s); the reconciler will",
                    result.task_id,
                    type(exc).__name__,
                )
            log.info("lifecycle: task %s for %s#%s (%s)", result.task_id, repo, issue, cause)
            await self._show_queued(result.task_id)
        return result

    async def _pickup_row(self, wanted: _Pickup) -> tuple[PickupResult, str | None]:
        for _ in range(PICKUP_ROUNDS):
            try:
                return await self.db.run(self._pickup_tx, wanted)
            except (IntegrityError, OperationalError):
                # Two pickups raced to create the row: the next round finds it.
                continue
        return await self.db.run(self._pickup_tx, wanted)

    def _pickup_tx(self, session: Session, wanted: _Pickup) -> tuple[PickupResult, str | None]:
        result, job = self._pickup_task(session, wanted)
        if job is not None:
            self._pin(session, result.task_id, wanted.text, wanted.cause)
        record_done(session)  # a webhook's pickup: the handler is done with this commit
        return result, job

    def _pin(self, session: Session, task_id: int, text: IssueText, cause: str) -> None:
        """Pin the issue text a started task works from (or clear it for the run to pin)."""
        known = text.body is not None
        tasks.touch(
            session,
            task_id,
            self.clock,
            issue_title=text.title if known else None,
            issue_body=text.body,
            pinned_at=self.clock() if known else None,
        )
        if known:
            tasks.record(
                session,
                tasks.get_task(session, task_id),
                EventKind.ISSUE_PINNED,
                actor=cause,
                detail="issue text pinned at pickup",
                clock=self.clock,
            )

    def _pickup_task(self, session: Session, wanted: _Pickup) -> tuple[PickupResult, str | None]:
        task = tasks.find_task(session, wanted.repo, wanted.issue)
        if task is None:
            task = tasks.new_task(
                session,
                repo=wanted.repo,
                issue=wanted.issue,
                title=wanted.text.title,
                origin_session=wanted.origin,
                actor=wanted.cause,
                clock=self.clock,
            )
            if wanted.trigger is not None:
                follow(session, task, wanted.trigger)
            job = job_id(task.id, task.generation, "a1")
            tasks.touch(session, task.id, self.clock, job_id=job)
            return PickupResult(task.id, created=True, started=True), job
        if wanted.trigger is not None:
            if not is_new(task, wanted.trigger):  # followed already: sent again
                return PickupResult(task.id, created=False, started=False), None
            follow(session, task, wanted.trigger)
        if wanted.origin and not task.origin_session:
            task.origin_session = wanted.origin
            tasks.record(
                session,
                task,
                EventKind.ORIGIN_LINKED,
                actor=wanted.cause,
                detail=f"results go to chat session {wanted.origin}",
                clock=self.clock,
            )
        if task.state in LIVE or task.state in FINAL or task.state == TaskState.DELIVERED:
            tasks.record(
                session,
                task,
                EventKind.PICKUP_IGNORED,
                actor=wanted.cause,
                detail=f"task is already {task.state}",
                clock=self.clock,
            )
            return PickupResult(task.id, created=False, started=False), None
        return self._reopen(session, task, wanted.text.title, wanted.cause)

    def _reopen(
        self, session: Session, task: Task, title: str, cause: str
    ) -> tuple[PickupResult, str | None]:
        """A failed or terminated task picked up again: a new generation, queued afresh."""
        job = job_id(task.id, task.generation + 1, "a1")
        # A terminate recorded for the finished generation must not stop the new one.
        forget_stop_request(session, task.id)
        move = Move(
            TaskState.QUEUED,
            actor=cause,
            detail=f"picked up again after {task.state}",
            changes={
                "generation": task.generation + 1,
                "attempts": 0,
                "archived": False,
                "job_id": job,
                "title": (title or task.title)[: tasks.MAX_TITLE],
                "question": None,
                "pending_decision": None,
                "last_error": None,
                "runtime_seconds": 0.0,
                "tokens_used": 0,
                "cost_usd": 0.0,
            },
        )
        apply(session, task.id, move, self.clock)
        return PickupResult(task.id, created=False, started=True), job

    async def _show_queued(self, task_id: int) -> None:
        """Labels for `queued` right away, unless a worker already moved the task on."""
        if self.github is None:
            return
        task = await self.db.run(tasks.get_task, task_id)
        if task.state != TaskState.QUEUED:
            return
        try:
            state = TaskState.QUEUED
            for _ in range(3):
                await progress.sync_labels(self.github, task.repo, task.issue, state)
                # A worker may have moved the task on, and synced its labels, while these
                # requests were in flight: a queued label landing last stayed until the
                # reconciler's pass. Follow the state until the labels match it.
                now = (await self.db.run(tasks.get_task, task_id)).state
                if now == state:
                    break
                state = TaskState(now)
        except Exception as exc:  # the worker and the reconciler sync labels again
            log.warning("lifecycle: task %s queued label not set: %s", task_id, exc)

    async def on_issue_event(self, event: IssueEvent) -> PickupResult | None:
        """`issues` opened/labeled/reopened carrying a pickup label starts the task, if
        GitHub agrees and the task has not followed it yet; a pickup label's removal that
        GitHub agrees with makes the next one new (bot.lifecycle.pickup_signal)."""
        if event.is_pull_request:
            return None
        if event.action == "edited":
            await self.on_issue_edited(event)
            return None
        if event.action == "unlabeled":
            await self.on_label_removed(event)
            return None
        if event.action not in ("labeled", "opened", "reopened"):
            return None
        if not event.names_pickup_label(self.pickup_labels):
            return None
        trigger = Trigger(event.updated_at)
        if not await self._to_follow(event, trigger):
            return None
        # An issue template can apply the pickup label for anyone, and an author may reopen
        # their own issue: only the App or someone with write access starts a task.
        allowed, why = await self._may_act(event.repo, event.sender, "starting a task")
        if not allowed:
            await self._pickup_ignored(event, why, trigger)
            return None
        return await self.pickup(
            event.repo,
            event.number,
            title=event.title,
            body=event.body,
            cause=f"webhook:issues.{event.action}",
            trigger=trigger,
        )

    async def _to_follow(self, event: IssueEvent, trigger: Trigger) -> bool:
        """The pickup is one to act on: its task (if any) has not followed it, and GitHub
        says now what it says (the issue open, with a pickup label)."""
        repo, number = event.repo, event.number
        task = await self.db.run(lambda s: tasks.find_task(s, repo, number))
        if task is not None and not is_new(task, trigger):
            log.info(
                "lifecycle: pickup of %s#%s (issues.%s): task %s followed it already",
                repo,
                number,
                event.action,
                task.id,
            )
            return False
        if self.github is not None and not await read_signal(
            self.github, repo, number, self.pickup_labels
        ):
            log.info(
                "lifecycle: pickup of %s#%s (issues.%s) outdated: on GitHub the issue is "
                "closed or carries no pickup label now",
                repo,
                number,
                event.action,
            )
            return False
        return True

    async def on_label_removed(self, event: IssueEvent) -> bool:
        """A pickup label removed: once GitHub shows the issue without one (or closed), its
        task's next pickup is new (`pickup_signal.rearm`). True when that changed anything."""
        repo, number = event.repo, event.number
        if event.label not in self.pickup_labels or self.github is None:
            return False
        if await self.db.run(lambda s: tasks.find_task(s, repo, number)) is None:
            return False
        if await read_signal(self.github, repo, number, self.pickup_labels):
            log.info("lifecycle: %s#%s pickup label removal outdated: it is back", repo, number)
            return False
        return await self.db.run(rearm, repo, number)

    async def on_issue_edited(self, event: IssueEvent) -> bool:
        """An edit of a picked-up issue re-pins its text only if the App or a writer made
        it; anyone else's is recorded and not used. True when the text was re-pinned."""
        repo, number, sender = event.repo, event.number, event.sender
        task = await self.db.run(lambda s: tasks.find_task(s, repo, number))
        if task is None or task.state not in LIVE:
            return False
        allowed, why = await self._may_act(repo, sender, "changing a picked-up issue's text")
        kind = EventKind.ISSUE_PINNED if allowed else EventKind.EDIT_IGNORED
        text = IssueText(event.title, event.body)

        def note(session: Session) -> None:
            if allowed:
                tasks.touch(
                    session,
                    task.id,
                    self.clock,
                    issue_title=text.title,
                    issue_body=text.body,
                    pinned_at=self.clock(),
                )
            detail = f"edit by {sender or 'unknown'}: " + ("text re-pinned" if allowed else why)
            tasks.record(
                session,
                tasks.get_task(session, task.id),
                kind,
                actor=sender or "unknown",
                detail=detail,
                clock=self.clock,
            )
            record_done(session)

        await self.db.run(note)
        log.info("lifecycle: task %s issue edit by %s: pinned=%s", task.id, sender, allowed)
        return allowed

    async def _pickup_ignored(self, event: IssueEvent, why: str, trigger: Trigger) -> None:
        repo, issue, sender, action = event.repo, event.number, event.sender, event.action

        def note(session: Session) -> None:
            task = tasks.find_task(session, repo, issue)
            if task is not None and is_new(task, trigger):
                follow(session, task, trigger)
                tasks.record(
                    session,
                    task,
                    EventKind.PICKUP_IGNORED,
                    actor=sender or "unknown",
                    detail=why,
                    data={"action": f"issues.{action}"},
                    clock=self.clock,
                )
            record_done(session)

        await self.db.run(note)
        log.info("lifecycle: pickup of %s#%s (issues.%s) ignored: %s", repo, issue, action, why)

    async def _may_act(self, repo: str, login: str, what: str) -> tuple[bool, str]:
        return await may_act(self.github, repo, login, what)
